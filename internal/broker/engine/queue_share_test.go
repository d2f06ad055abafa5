package engine

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

// TestQueueShareShrinkLagsTheTenantsOverTheirShare: tenants A, B and C
// each took a queue share that later tenants shrank, and stalled; their
// queued bytes hold the engine near twice MaxQueuedBytes, the hard cap.
// Tenant D then subscribes, publishes and reads, at times 48 batches
// behind, within its share (a quarter of the bound). D must never be
// lagged and must get every batch in order: the engine takes back the
// queues of the tenants over their share at once (the one holding the
// most first) instead of waiting for them to drain or time out, and the
// total never passes the hard cap. Each stalled reader read some batches
// before stalling; a taken-back one's lag report resumes at exactly the
// first batch it did not receive, and a subscription from there gets the
// rest of the shard with no gap and no repeat. The table runs it with A's
// queue still open when taken back and with A already lagged by a batch
// its queue refused (its queue still holding the batches before it).
func TestQueueShareShrinkLagsTheTenantsOverTheirShare(t *testing.T) {
	for _, overflowed := range []bool{false, true} {
		t.Run("A overflowed "+strconv.FormatBool(overflowed), func(t *testing.T) {
			testQueueShareShrink(t, overflowed)
		})
	}
}

func testQueueShareShrink(t *testing.T, overflowed bool) {
	// A batch costs about 1.2 KiB here: D's share is 51 of them, the
	// room A, B and C leave under the hard cap about 40.
	const limit = 256 << 10
	e := New(Config{DefaultStream: durable, MaxQueuedBytes: limit, SubscriberQueueBytes: 1 << 20, MaxQueueCapacity: 4096})
	defer e.Close()
	payload := bytes.Repeat([]byte("p"), 100)
	publish := func(tp Topic) {
		t.Helper()
		_, err := e.Publish(PublishRequest{Topic: tp, Payloads: [][]byte{payload}})
		require.NoError(t, err)
		require.LessOrEqual(t, e.QueuedBytes(), int64(2*limit), "past the hard cap")
	}
	subscribe := func(tp Topic) *Subscription {
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, QueueCapacity: 4096, LagReport: true, Mods: felix.FlagEventBatchOffsets})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	}
	ten := func(tp Topic) *tenantUse {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.tenants[tp.Tenant]
	}
	// stall subscribes tenant tp's reader, which reads read batches and
	// stalls while its tenant fills its share: up to the last batch
	// that fits, or, with overflow, until one is refused.
	type stalled struct {
		tp      Topic
		s       *Subscription
		read    uint64 // the first offset it did not receive
		dropped bool   // lagged by its own full share before D came
	}
	stall := func(name string, read int, overflow bool) stalled {
		tp := Topic{Tenant: name, Stream: "s"}
		s := subscribe(tp)
		for i := range read {
			publish(tp)
			d := nextQ(t, s)
			require.Equal(t, uint64(i), decodeEvent(t, d.Frame).base)
			d.Release()
		}
		cost := (&Batch{Payloads: [][]byte{payload}}).cost()
		for !s.Dropped() {
			if !overflow && e.QueuedBytes()+2*cost > limit && ten(tp).queued.Load()+2*cost > e.queueShare() {
				break // the next one would be refused
			}
			publish(tp)
		}
		require.Equal(t, overflow, s.Dropped())
		return stalled{tp: tp, s: s, read: uint64(read), dropped: overflow}
	}
	a := stall("A", 3, overflowed) // fills the bound alone
	b := stall("B", 5, true)       // then its half share
	c := stall("C", 7, false)      // then its third
	require.Greater(t, e.QueuedBytes(), int64(limit*17/10), "A, B and C hold the engine near the hard cap")
	require.Less(t, a.s.queued.Load()+b.s.queued.Load()+c.s.queued.Load(), int64(2*limit))

	d := Topic{Tenant: "D", Stream: "s"}
	ds := subscribe(d) // the shares shrink to a quarter: A, B and C are over theirs
	const bursts, burst = 20, 48
	got := uint64(0)
	for range bursts {
		for range burst {
			publish(d)
		}
		require.LessOrEqual(t, ten(d).queued.Load(), e.queueShare(), "D is within its share")
		for range burst {
			dl := nextQ(t, ds)
			require.False(t, dl.Lagged, "the reader within its share was lagged (got %d, queued %d, D %d, A %d B %d C %d, share %d)", got, e.QueuedBytes(), ten(d).queued.Load(), ten(a.tp).queued.Load(), ten(b.tp).queued.Load(), ten(c.tp).queued.Load(), e.queueShare())
			require.Equal(t, got, decodeEvent(t, dl.Frame).base)
			dl.Release()
			got++
		}
	}
	require.Equal(t, uint64(bursts*burst), got)
	require.False(t, ds.Dropped())
	require.Zero(t, ds.QueueStats().Dropped)

	// A held the most: its queue was taken back, whole, at once.
	require.True(t, a.s.Dropped(), "A, over its share, was not lagged")
	require.Zero(t, a.s.queued.Load(), "A's queue still holds bytes")
	publish(a.tp) // and takes no more batches
	require.Zero(t, a.s.queued.Load(), "a taken-back queue took a batch")
	// Each lagged reader, when it comes back, gets the lag report resuming
	// at its first undelivered batch; from there the shard has the rest.
	for _, st := range []stalled{a, b, c} {
		if !st.s.Dropped() {
			continue // not needed for room: untouched
		}
		dl := nextQ(t, st.s)
		if st.tp != a.tp && st.dropped {
			// lagged by its own refusal: its queue is delivered first
			for !dl.Lagged {
				require.Equal(t, st.read, decodeEvent(t, dl.Frame).base)
				st.read++
				dl.Release()
				dl = nextQ(t, st.s)
			}
		}
		require.True(t, dl.Lagged, "%s: a batch after its queue was taken back", st.tp.Tenant)
		require.Equal(t, st.read, dl.ResumeFrom, "%s resumes at its first undelivered batch", st.tp.Tenant)
		r, _, err := e.Subscribe(SubscribeRequest{Topic: st.tp, Start: Start{Kind: StartOffset, Offset: dl.ResumeFrom}, Mods: felix.FlagEventBatchOffsets})
		require.NoError(t, err)
		want := dl.ResumeFrom
		for want < r.Info().LiveOffset {
			h := nextQ(t, r)
			require.Equal(t, want, decodeEvent(t, h.Frame).base, "%s: a gap or a repeat on resuming", st.tp.Tenant)
			want = h.Batch.EndOffset()
			h.Release()
		}
		r.Close()
	}
	// B and C were not needed for room: B lagged by its own refusal, C
	// not lagged at all.
	require.False(t, c.s.Dropped(), "C was lagged although taking A's queue made room")
	ds.Close()
	for _, st := range []stalled{a, b, c} {
		st.s.Close()
	}
	require.Zero(t, e.QueuedBytes(), "queued bytes left charged after every subscription closed")
}

// TestMakeQueueRoomSparesTheTenantsWithinTheirShare: asked for more room
// than the tenants over their share can give, makeQueueRoom takes back
// every queue of theirs and none of a tenant within its share.
func TestMakeQueueRoomSparesTheTenantsWithinTheirShare(t *testing.T) {
	const limit = 64 << 10
	e := New(Config{DefaultStream: durable, MaxQueuedBytes: limit, SubscriberQueueBytes: 1 << 20, MaxQueueCapacity: 4096})
	defer e.Close()
	payload := bytes.Repeat([]byte("p"), 100)
	var subs []*Subscription
	for i, n := range []int{40, 20, 3} { // 1.2 KiB each; with three tenants a share is 21 KiB: A and B are over it, C within
		tp := Topic{Tenant: string(rune('A' + i)), Stream: "s"}
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, QueueCapacity: 4096, LagReport: true})
		require.NoError(t, err)
		defer s.Close()
		subs = append(subs, s)
		for range n {
			_, err := e.Publish(PublishRequest{Topic: tp, Payloads: [][]byte{payload}})
			require.NoError(t, err)
		}
	}
	for _, s := range subs {
		require.False(t, s.Dropped())
	}
	e.makeQueueRoom(4 * limit)
	require.True(t, subs[0].Dropped(), "A over its share was not taken back")
	require.True(t, subs[1].Dropped(), "B over its share was not taken back")
	require.False(t, subs[2].Dropped(), "C within its share was taken back")
	require.Equal(t, subs[2].queued.Load(), e.QueuedBytes(), "only C's queue is left")
}

// TestQueueShareShrinkTakesBackAWatch: a stalled watch of the tenant over
// its share is taken back like a subscription, its lag report resuming
// after the last event it received: a watch from there replays the rest
// with no gap and no repeat.
func TestQueueShareShrinkTakesBackAWatch(t *testing.T) {
	const limit = 256 << 10
	e := New(Config{DefaultStream: durable, MaxQueuedBytes: limit, SubscriberQueueBytes: 1 << 20, MaxQueueCapacity: 4096,
		WatchQueueBytes: 1 << 20, WatchQueueCapacity: 4096})
	defer e.Close()
	payload := bytes.Repeat([]byte("p"), 100)
	cr := CacheRef{Tenant: "A", Cache: "c"}
	e.CreateCache(cr)
	w, _, err := e.Watch(WatchRequest{CacheRef: cr, Key: "k"})
	require.NoError(t, err)
	defer w.Close()
	var offsets []uint64
	put := func() {
		off, err := e.CachePut(cr, "k", payload, nil)
		require.NoError(t, err)
		offsets = append(offsets, off)
	}
	for i := range 3 { // the watcher reads three events, then stalls
		put()
		d := nextWQ(t, w)
		require.Equal(t, offsets[i], d.Event.Offset)
	}
	for e.QueuedBytes() < limit-1024 { // an event costs less than 1 KiB
		put()
	}
	require.False(t, watchLagged(w))
	// B and C take their shares, D reads within its own.
	fill := func(tp Topic, n int) *Subscription {
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, QueueCapacity: 4096, LagReport: true, Mods: felix.FlagEventBatchOffsets})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		for range n {
			_, err := e.Publish(PublishRequest{Topic: tp, Payloads: [][]byte{payload}})
			require.NoError(t, err)
			require.LessOrEqual(t, e.QueuedBytes(), int64(2*limit), "past the hard cap")
		}
		return s
	}
	fill(Topic{Tenant: "B", Stream: "s"}, 1000)
	fill(Topic{Tenant: "C", Stream: "s"}, 1000)
	ds := fill(Topic{Tenant: "D", Stream: "s"}, 50) // its share is 51 batches
	for i := range 50 {
		d := nextQ(t, ds)
		require.False(t, d.Lagged, "the reader within its share was lagged")
		require.Equal(t, uint64(i), decodeEvent(t, d.Frame).base)
		d.Release()
	}
	require.True(t, watchLagged(w), "A's watch, over its share, was not taken back")
	require.Zero(t, w.queued.Load())
	d := nextWQ(t, w)
	require.True(t, d.Lagged)
	require.Equal(t, offsets[2]+1, d.ResumeFrom, "the watch resumes after the last event it received")
	r, _, err := e.Watch(WatchRequest{CacheRef: cr, Key: "k", HasFrom: true, FromOffset: d.ResumeFrom})
	require.NoError(t, err)
	defer r.Close()
	for _, off := range offsets[3:] {
		require.Equal(t, off, nextWQ(t, r).Event.Offset, "a gap or a repeat on resuming")
	}
}

// watchLagged reports whether w's live delivery has ended with a lag.
func watchLagged(w *Watch) bool {
	select {
	case <-w.lagged:
		return true
	default:
		return false
	}
}

// TestEvictRacesTheReaderAndThePublisher: a queue taken back while its
// reader reads it and its publisher fills it: whichever of them takes
// each batch, the reader gets a gapless run of batches from the start
// and then the lag report resuming right after it, and every byte
// charged comes back.
func TestEvictRacesTheReaderAndThePublisher(t *testing.T) {
	payload := []byte("p")
	for range 200 {
		e := New(Config{DefaultStream: durable, MaxQueueCapacity: 4096})
		tp := Topic{Tenant: "A", Stream: "s"}
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, QueueCapacity: 4096, LagReport: true, Mods: felix.FlagEventBatchOffsets})
		require.NoError(t, err)
		for range 50 {
			_, err := e.Publish(PublishRequest{Topic: tp, Payloads: [][]byte{payload}})
			require.NoError(t, err)
		}
		evicted, published := make(chan struct{}), make(chan error, 1)
		go func() {
			defer close(evicted)
			s.evict()
		}()
		go func() {
			for range 50 {
				if _, err := e.Publish(PublishRequest{Topic: tp, Payloads: [][]byte{payload}}); err != nil {
					published <- err
					return
				}
			}
			published <- nil
		}()
		want := uint64(0)
		for {
			d := nextQ(t, s)
			if d.Lagged {
				require.Equal(t, want, d.ResumeFrom, "the lag report does not resume after the last batch delivered")
				break
			}
			require.Equal(t, want, decodeEvent(t, d.Frame).base, "a gap or a repeat")
			want = d.Batch.EndOffset()
			d.Release()
		}
		<-evicted
		require.NoError(t, <-published)
		s.Close()
		require.Zero(t, e.QueuedBytes(), "queued bytes left charged")
		e.Close()
	}
}

// TestEvictedReaderDeliversNothingMore: a batch the reader takes from the
// queue once its subscription is being taken back (the evictor has
// marked it and not yet emptied the queue, or emptied it while the
// reader held the batch) is dropped, not delivered: the evictor may have
// taken an earlier one. The lag report resumes at it.
func TestEvictedReaderDeliversNothingMore(t *testing.T) {
	e := New(Config{DefaultStream: durable})
	defer e.Close()
	tp := Topic{Tenant: "A", Stream: "s"}
	s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, LagReport: true, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	defer s.Close()
	for range 3 {
		pub(t, e, tp, "p")
	}
	d := nextQ(t, s)
	require.Equal(t, uint64(0), decodeEvent(t, d.Frame).base)
	d.Release()
	s.evicted.Store(true) // evict has begun
	d = nextQ(t, s)
	require.True(t, d.Lagged, "a batch delivered from a queue being taken back")
	require.Equal(t, uint64(1), d.ResumeFrom)
	s.Close()
	require.Zero(t, e.QueuedBytes())
}

// TestEvictedWatchDeliversNothingMore: as TestEvictedReaderDeliversNothingMore,
// for a watch: its lag report resumes after the last event delivered.
func TestEvictedWatchDeliversNothingMore(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	cr := CacheRef{Tenant: "A", Cache: "c"}
	e.CreateCache(cr)
	w, _, err := e.Watch(WatchRequest{CacheRef: cr, Key: "k"})
	require.NoError(t, err)
	defer w.Close()
	var offs []uint64
	for range 3 {
		off, err := e.CachePut(cr, "k", []byte("v"), nil)
		require.NoError(t, err)
		offs = append(offs, off)
	}
	require.Equal(t, offs[0], nextWQ(t, w).Event.Offset)
	w.evicted.Store(true) // evict has begun
	d := nextWQ(t, w)
	require.True(t, d.Lagged, "an event delivered from a queue being taken back")
	require.Equal(t, offs[0]+1, d.ResumeFrom)
	w.Close()
	require.Zero(t, e.QueuedBytes())
}

// TestEvictedBeforeItsHistoryWasRead: a subscription taken back while it
// still reads its history, which retention then overtakes, resumes where
// its history reading stopped, not after the live batches.
func TestEvictedBeforeItsHistoryWasRead(t *testing.T) {
	e := New(Config{DefaultStream: StreamConfig{Durable: true, RetainRecords: 4}})
	defer e.Close()
	tp := Topic{Tenant: "A", Stream: "s"}
	publish := func(n int) {
		for i := range n { // alternate publishers: a history page holds one record
			_, err := e.Publish(PublishRequest{Topic: tp, Payloads: [][]byte{[]byte("p")}, Publisher: strconv.Itoa(i % 2)})
			require.NoError(t, err)
		}
	}
	publish(4)
	s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartEarliest}, LagReport: true, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	defer s.Close()
	d := nextQ(t, s)
	require.Equal(t, uint64(0), decodeEvent(t, d.Frame).base)
	require.Len(t, d.Batch.Payloads, 1)
	d.Release()
	publish(2) // queued live
	s.evict()
	publish(8) // retention passes offset 1
	d = nextQ(t, s)
	require.True(t, d.Lagged)
	require.Equal(t, uint64(1), d.ResumeFrom, "resumes after the live batches, past its unread history")
}

// queueTestDeadline bounds each Next of these tests, so that a reader a
// bug leaves without a delivery fails the test instead of hanging it: far
// longer than a delivery takes on a loaded machine.
const queueTestDeadline = 30 * time.Second

func nextQ(t testing.TB, s *Subscription) Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), queueTestDeadline)
	defer cancel()
	d, err := s.Next(ctx)
	require.NoError(t, err, "no delivery")
	return d
}

func nextWQ(t testing.TB, w *Watch) WatchDelivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxT(t), queueTestDeadline)
	defer cancel()
	d, err := w.Next(ctx)
	require.NoError(t, err, "no event")
	return d
}
