package server

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeKind is a feed whose turns the test writes.
type fakeKind struct {
	turnFn func(f *feed) turnResult
}

func (k *fakeKind) turn(f *feed, _ *writeWatchdog) turnResult { return k.turnFn(f) }
func (k *fakeKind) close()                                    {}

// schedServer is a Server with only what the delivery scheduler uses.
func schedServer(tenantMax, totalMax int) *Server {
	s := &Server{cfg: Config{EventWriteTimeout: time.Hour}, log: slog.New(slog.DiscardHandler)}
	s.deliv = deliverySched{s: s, tenantMax: tenantMax, totalMax: totalMax}
	return s
}

// startFake hands a fake feed to its tenant's workers as feed.start does
// (without an event stream).
func startFake(s *Server, tenant string, k feedKind) *feed {
	f := s.newFeed()
	f.kind = k
	f.t = s.deliv.tenant(tenant)
	f.state.Store(feedQueued)
	f.t.push(f)
	return f
}

func schedDeadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitIdle waits until every worker has exited.
func waitIdle(t *testing.T, ctx context.Context, s *Server) {
	t.Helper()
	for s.DeliveryStats().Workers != 0 {
		select {
		case <-ctx.Done():
			require.Fail(t, "workers still running at the deadline")
		default:
			runtime.Gosched()
		}
	}
}

// A notification that lands during a turn, after the feed found nothing
// to deliver, is not lost: the feed runs again instead of going idle.
func TestFeedNotifiedDuringTurnRunsAgain(t *testing.T) {
	ctx := schedDeadline(t)
	s := schedServer(1, 1)
	turns := make(chan int, 4)
	n := 0
	startFake(s, "t", &fakeKind{turnFn: func(f *feed) turnResult {
		n++
		if n == 1 {
			f.notify() // a batch queued after the turn's last TryNext
		}
		turns <- n
		return turnIdle
	}})
	for want := 1; want <= 2; want++ {
		select {
		case got := <-turns:
			require.Equal(t, want, got)
		case <-ctx.Done():
			require.Fail(t, "the notification during the turn was lost", "turns run: %d", want-1)
		}
	}
	waitIdle(t, ctx, s)
	require.Empty(t, turns, "no turn without a notification")
}

// Many goroutines notify feeds while workers run them: no feed ever runs
// on two workers at once, no notification is lost (every one is seen by
// a later turn), and no worker stays once nothing is ready.
func TestFeedsNeverRunTwiceNorLoseAWakeup(t *testing.T) {
	const feeds, notifiers, each = 16, 4, 5000
	ctx := schedDeadline(t)
	s := schedServer(4, 6)
	var pending, seen [feeds]atomic.Int64
	var inside [feeds]atomic.Int32
	var overlaps atomic.Int64
	fs := make([]*feed, feeds)
	for j := range fs {
		turn := 0
		fs[j] = startFake(s, []string{"a", "b"}[j%2], &fakeKind{turnFn: func(f *feed) turnResult {
			if inside[j].Add(1) != 1 {
				overlaps.Add(1)
			}
			defer inside[j].Add(-1)
			if turn++; turn%2 == 1 {
				runtime.Gosched()
				return turnMore // quantum used before what is pending: back to the queue's tail
			}
			seen[j].Add(pending[j].Swap(0))
			return turnIdle
		}})
	}
	var wg sync.WaitGroup
	for g := range notifiers {
		wg.Go(func() {
			for i := range each {
				j := (g*each + i*7) % feeds
				pending[j].Add(1)
				fs[j].notify()
			}
		})
	}
	wg.Wait()
	total := func() (n int64) {
		for j := range seen {
			n += seen[j].Load()
		}
		return n
	}
	for total() != notifiers*each {
		select {
		case <-ctx.Done():
			require.Fail(t, "notifications lost", "seen %d of %d", total(), notifiers*each)
		default:
			runtime.Gosched()
		}
	}
	waitIdle(t, ctx, s)
	require.Zero(t, overlaps.Load(), "a feed ran on two workers at once")
	st := s.DeliveryStats()
	require.Zero(t, st.Queued)
	require.Zero(t, st.WaitingTenants)
}
