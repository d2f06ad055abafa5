package conn

import (
	"context"
	"sync"
	"time"

	"github.com/flxproto/felix"
)

// writeDeadliner and readDeadliner are the deadline halves of QUIC streams.
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }
type readDeadliner interface{ SetReadDeadline(time.Time) error }

// ctxGuard makes a blocking stream call honour ctx by moving the stream's
// deadline to now when ctx is cancelled. done must be called when the call
// returned; it reports whether the call was interrupted by ctx (the stream
// may then be in the middle of a frame and must be abandoned). With a ctx
// that can never be cancelled it costs nothing.
func ctxGuard(ctx context.Context, set func(time.Time) error) (done func() bool) {
	if ctx.Done() == nil {
		return noGuard
	}
	var mu sync.Mutex
	finished, fired := false, false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			fired = true
			set(time.Now())
		}
	})
	return func() bool {
		stop()
		mu.Lock()
		finished = true
		f := fired
		mu.Unlock()
		if f {
			set(time.Time{})
		}
		return f
	}
}

// noGuard is the done function of a call that ctx cannot interrupt.
func noGuard() bool { return false }

// readFrameCtx reads one frame from r, whose stream is d, honouring ctx.
// When ctx interrupts the read it returns ctx's error and interrupted true:
// the stream is then no longer on a frame boundary.
func readFrameCtx(ctx context.Context, r *felix.Reader, d readDeadliner) (f felix.Frame, interrupted bool, err error) {
	if err := ctx.Err(); err != nil {
		return felix.Frame{}, false, err
	}
	done := ctxGuard(ctx, d.SetReadDeadline)
	f, err = r.ReadFrame()
	if done() && err != nil {
		return felix.Frame{}, true, ctx.Err()
	}
	return f, false, err
}
