package conn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix"
)

// frameWriter writes whole frames to a stream, one Write per frame, under a
// lock so that several goroutines may answer on one stream. It reuses one
// encoding buffer.
//
// The lock is a one-slot channel so that waiting for it honours a context.
// When d is set (server streams), a write also honours its context: the
// stream's write deadline is moved to now when the context ends, and a
// write interrupted that way calls abort before the lock is released, so
// no other writer can append to a partial frame.
type frameWriter struct {
	// limit, when set, refuses frames whose payload exceeds it before
	// writing (a client's Config.MaxFrameBytes).
	limit uint32
	sem   chan struct{}
	w     io.Writer
	d     writeDeadliner // nil: writes are not interruptible here
	abort func()         // resets the stream after an interrupted write
	fire  func()         // fw.interrupt, bound once so a write allocates less
	fired chan struct{}  // interrupt has run
	buf   []byte
	// own holds the contexts that end only together with the stream's
	// write side: the send stream's context and the connection's. When
	// one of them ends, quic-go itself fails a blocked Write, so a write
	// under it needs no interrupt (and none of the per-write
	// context.AfterFunc registration, the top per-frame cost of a
	// broker's subscription pumps and publish answers).
	own [2]context.Context
	// waiting counts the goroutines blocked in lock, for tests that need
	// to know a writer is queued behind another.
	waiting atomic.Int32
	// ab bounds the frames of a server stream's answers (nil: unbounded;
	// see answerBound).
	ab *answerBound
	// hk observes every frame written (nil: no hooks; see observe).
	hk     *Hooks
	side   Side
	sid    int64
	remote net.Addr
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{sem: make(chan struct{}, 1), w: w}
}

// interruptible makes the writer's writes honour their context through d,
// calling abort when a write is interrupted.
func (fw *frameWriter) interruptible(d writeDeadliner, abort func(), own ...context.Context) {
	fw.d, fw.abort = d, abort
	copy(fw.own[:], own)
	fw.fire = fw.interrupt
	fw.fired = make(chan struct{}, 1)
}

// interrupt runs when a write's context ends: it makes the blocked Write
// return at once.
func (fw *frameWriter) interrupt() {
	_ = fw.d.SetWriteDeadline(time.Now())
	fw.fired <- struct{}{}
}

// lock takes the writer's lock, or returns ctx's error (nothing written)
// when ctx ends first.
func (fw *frameWriter) lock(ctx context.Context) error {
	select {
	case fw.sem <- struct{}{}:
		return nil
	default:
	}
	fw.waiting.Add(1)
	defer fw.waiting.Add(-1)
	select {
	case fw.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (fw *frameWriter) unlock() { <-fw.sem }

// put writes b, one whole frame, with the lock held. A write that ctx
// interrupted returns an error matching ctx's error and errWriteInterrupted
// after the stream was reset. A frame written whole is reported to the
// writer's hooks.
func (fw *frameWriter) put(ctx context.Context, b []byte) error {
	if n := len(b) - felix.HeaderLen; fw.limit > 0 && n > int(fw.limit) {
		return &felix.FrameLimitError{Size: n, Limit: fw.limit}
	}
	err := fw.write(ctx, b)
	if err == nil && fw.hk != nil {
		fw.hk.frame(false, fw.side, fw.sid, fw.remote, b)
	}
	return err
}

// write is put without the hooks.
func (fw *frameWriter) write(ctx context.Context, b []byte) error {
	if fw.d == nil {
		_, err := fw.w.Write(b)
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if ctx.Done() == nil {
		_, err := fw.w.Write(b)
		return err
	}
	if ctx == fw.own[0] || ctx == fw.own[1] {
		_, err := fw.w.Write(b)
		if err != nil && ctx.Err() != nil {
			// The stream or the connection ended under the write: reset
			// as after an interrupted write, and match ctx's error.
			fw.abort()
			return fmt.Errorf("%w (%w: %w)", ctx.Err(), errWriteInterrupted, err)
		}
		return err
	}
	// Like ctxGuard, without its per-call state: the lock is held, so at
	// most one interrupt is pending, and it is waited for before the
	// deadline is restored.
	stop := context.AfterFunc(ctx, fw.fire)
	_, err := fw.w.Write(b)
	if stop() {
		return err
	}
	<-fw.fired
	_ = fw.d.SetWriteDeadline(time.Time{})
	if err != nil {
		fw.abort()
		return fmt.Errorf("%w (%w)", ctx.Err(), errWriteInterrupted)
	}
	return nil
}

// writeMessage encodes m as a JSON frame and writes it.
func (fw *frameWriter) writeMessage(ctx context.Context, m felix.Message) error {
	return fw.encode(ctx, func(dst []byte) ([]byte, error) { return felix.AppendMessageFrame(dst, m) })
}

// writeFrame writes a frame with the given flags and payload.
func (fw *frameWriter) writeFrame(ctx context.Context, flags felix.Flags, payload []byte) error {
	return fw.encode(ctx, func(dst []byte) ([]byte, error) { return felix.AppendFrame(dst, flags, payload) })
}

// writeEncoded writes an already encoded whole frame.
func (fw *frameWriter) writeEncoded(ctx context.Context, frame []byte) error {
	if err := fw.lock(ctx); err != nil {
		return err
	}
	defer fw.unlock()
	if fw.ab == nil {
		return fw.put(ctx, frame)
	}
	n, err := fw.holdAnswer(ctx, len(frame))
	if err != nil {
		return err
	}
	defer fw.ab.budget.release(n)
	return fw.putBounded(ctx, frame)
}

// encode runs enc on the writer's buffer and writes the resulting frame,
// all under the lock, so that a frame is encoded in place without
// allocating. With an answer bound, a frame that does not fit the
// connection's answer budget is dropped while it waits for room and
// encoded again once it fits (the same size), so that waiting answers hold
// no memory.
func (fw *frameWriter) encode(ctx context.Context, enc func(dst []byte) ([]byte, error)) error {
	if err := fw.lock(ctx); err != nil {
		return err
	}
	defer fw.unlock()
	b, err := enc(fw.buf[:0])
	if err != nil {
		return err
	}
	fw.buf = keepSmall(b)
	if fw.ab == nil {
		return fw.put(ctx, b)
	}
	n, ok := fw.ab.budget.tryAcquire(int64(len(b)))
	if !ok {
		size := len(b)
		b, fw.buf = nil, nil
		if n, err = fw.holdAnswer(ctx, size); err != nil {
			return err
		}
		if b, err = enc(nil); err != nil {
			fw.ab.budget.release(n)
			return err
		}
	}
	defer fw.ab.budget.release(n)
	return fw.putBounded(ctx, b)
}

// keepSmall returns b for reuse unless it grew beyond 1 MiB, so that one
// huge frame does not pin its buffer forever.
func keepSmall(b []byte) []byte {
	if cap(b) > 1<<20 {
		return nil
	}
	return b[:0]
}

// isTimeout reports whether err is a deadline error.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// answerBound bounds the answers written on the streams of one server
// connection: the bytes of the frames being written count against the
// connection's answer budget (MaxConnInFlightBytes), and each write,
// waiting for room included, must end within timeout; one that does not
// resets the stream (a client that does not read its answers cannot hold
// them, nor the stream's handler, for longer).
type answerBound struct {
	budget   *byteBudget
	timeout  time.Duration // ≤ 0: no time bound
	timeouts *atomic.Uint64
	waiting  *atomic.Int64 // answers of the listener waiting for room
}

// hold waits for n bytes of the budget, at most until the write bound.
func (ab *answerBound) hold(ctx context.Context, n int) (int64, error) {
	if got, ok := ab.budget.tryAcquire(int64(n)); ok {
		return got, nil
	}
	if ab.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, ab.timeout, ErrAnswerTimeout)
		defer cancel()
	}
	ab.waiting.Add(1)
	got, err := ab.budget.acquire(ctx, int64(n))
	ab.waiting.Add(-1)
	if err != nil && context.Cause(ctx) == ErrAnswerTimeout {
		ab.timeouts.Add(1)
		return 0, fmt.Errorf("%w: waited %v for room in the connection's answer budget", ErrAnswerTimeout, ab.timeout)
	}
	return got, err
}

// holdAnswer is ab.hold; an answer that found no room within the bound
// resets the stream, as one cut during its write does (its client is not
// reading).
func (fw *frameWriter) holdAnswer(ctx context.Context, n int) (int64, error) {
	got, err := fw.ab.hold(ctx, n)
	if errors.Is(err, ErrAnswerTimeout) {
		fw.abort()
	}
	return got, err
}

// putBounded is put under the write bound: a write still blocked when it
// expires is cut and the stream reset.
func (fw *frameWriter) putBounded(ctx context.Context, b []byte) error {
	if fw.ab.timeout <= 0 {
		return fw.put(ctx, b)
	}
	_ = fw.d.SetWriteDeadline(time.Now().Add(fw.ab.timeout))
	err := fw.put(ctx, b)
	if err != nil && isTimeout(err) && ctx.Err() == nil {
		fw.ab.timeouts.Add(1)
		fw.abort()
		return fmt.Errorf("%w: a %d-byte frame not taken within %v; stream reset", ErrAnswerTimeout, len(b), fw.ab.timeout)
	}
	return err
}
