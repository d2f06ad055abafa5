package grouploop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type rec struct{ off int }

type delivery struct {
	rec
	f       *fake
	settled bool
}

func (d *delivery) Ack(context.Context) error {
	f := d.f
	f.mu.Lock()
	defer f.mu.Unlock()
	d.settled = true
	f.acks = append(f.acks, d.off)
	return f.ackErr
}

func (d *delivery) Nack(context.Context, time.Duration) error {
	f := d.f
	f.mu.Lock()
	defer f.mu.Unlock()
	d.settled = true
	f.nacks = append(f.nacks, d.off)
	return nil
}

// fake serves polls from a queue of batches and logs every settlement.
type fake struct {
	mu      sync.Mutex
	batches [][]rec
	acks    []int
	nacks   []int
	ackErr  error
	idleErr error
	idles   int
}

func (f *fake) loop() *Loop[rec, *delivery] {
	return &Loop[rec, *delivery]{
		Poll: func(ctx context.Context) ([]rec, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.batches) == 0 {
				return nil, errors.New("drained")
			}
			b := f.batches[0]
			f.batches = f.batches[1:]
			return b, nil
		},
		Deliver: func(r rec) *delivery { return &delivery{rec: r, f: f} },
		Settled: func(d *delivery) bool { return d.settled },
		Idle:    func(context.Context) error { f.idles++; return f.idleErr },
	}
}

// Unsettled deliveries are acked, settled ones are not; an empty poll
// idles; a failed poll is yielded last.
func TestLoopAcksUnsettledAndEndsOnPollError(t *testing.T) {
	f := &fake{batches: [][]rec{{{1}, {2}}, {}, {{3}}}}
	var got []int
	var errs []error
	for d, err := range f.loop().Seq(context.Background()) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got = append(got, d.off)
		if d.off == 2 {
			d.settled = true // the body settled it itself
		}
	}
	require.Equal(t, []int{1, 2, 3}, got)
	require.Equal(t, []int{1, 3}, f.acks)
	require.Empty(t, f.nacks)
	require.Equal(t, 1, f.idles)
	require.Len(t, errs, 1)
	require.EqualError(t, errs[0], "drained")
}

// Breaking out nacks the current delivery (unless settled) and the rest of
// its poll.
func TestLoopBreakGivesBack(t *testing.T) {
	for _, settle := range []bool{false, true} {
		f := &fake{batches: [][]rec{{{1}, {2}, {3}, {4}}}}
		for d, err := range f.loop().Seq(context.Background()) {
			require.NoError(t, err)
			if d.off == 2 {
				d.settled = settle
				break
			}
		}
		require.Equal(t, []int{1}, f.acks)
		if settle {
			require.Equal(t, []int{3, 4}, f.nacks)
		} else {
			require.Equal(t, []int{2, 3, 4}, f.nacks)
		}
	}
}

// A failed ack is yielded; the loop goes on when the body continues and
// gives back the rest when it breaks on the error.
func TestLoopAckError(t *testing.T) {
	boom := errors.New("ack failed")
	f := &fake{batches: [][]rec{{{1}, {2}, {3}}}, ackErr: boom}
	var errs []error
	for _, err := range f.loop().Seq(context.Background()) {
		if err != nil {
			errs = append(errs, err)
			if len(errs) == 2 {
				break
			}
		}
	}
	require.Equal(t, []error{boom, boom}, errs)
	require.Equal(t, []int{1, 2}, f.acks)
	require.Equal(t, []int{3}, f.nacks)
}

// The end of ctx ends the loop with its error, giving back what was not
// yielded; an Idle error ends it too.
func TestLoopContextAndIdleEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fake{batches: [][]rec{{{1}, {2}, {3}}}}
	var errs []error
	for d, err := range f.loop().Seq(ctx) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if d.off == 1 {
			cancel()
		}
	}
	require.Equal(t, []error{context.Canceled}, errs)
	require.Equal(t, []int{1}, f.acks)
	require.Equal(t, []int{2, 3}, f.nacks)

	closed := errors.New("closed")
	f = &fake{batches: [][]rec{{}}, idleErr: closed}
	errs = nil
	for _, err := range f.loop().Seq(context.Background()) {
		errs = append(errs, err)
	}
	require.Equal(t, []error{closed}, errs)
}
