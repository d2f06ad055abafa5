package conn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
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
	bound := 0
	if fw.ab != nil {
		bound = messageFrameBound(m)
	}
	return fw.encodeBounded(ctx, bound, func(dst []byte) ([]byte, error) { return felix.AppendMessageFrame(dst, m) })
}

// writeFrame writes a frame with the given flags and payload.
func (fw *frameWriter) writeFrame(ctx context.Context, flags felix.Flags, payload []byte) error {
	return fw.encodeBounded(ctx, felix.HeaderLen+len(payload), func(dst []byte) ([]byte, error) { return felix.AppendFrame(dst, flags, payload) })
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
	h, err := fw.holdAnswer(ctx, len(frame))
	if err != nil {
		return err
	}
	defer fw.ab.release(h)
	return fw.putBounded(ctx, frame)
}

// encode is encodeBounded for a frame of unknown size: with an answer
// bound, its bytes are asked for once it is encoded (for small frames only,
// such as publish acks).
func (fw *frameWriter) encode(ctx context.Context, enc func(dst []byte) ([]byte, error)) error {
	return fw.encodeBounded(ctx, 0, enc)
}

// encodeBounded runs enc on the writer's buffer and writes the resulting
// frame, all under the lock, so that a frame is encoded in place without
// allocating. With an answer bound, bound (an upper bound of the frame's
// size) is taken from the answer budgets BEFORE the frame is encoded, and
// what the encoding did not use is given back at once: an answer waiting
// for room holds no encoding, and the encodings that exist at any moment
// fit the budgets.
func (fw *frameWriter) encodeBounded(ctx context.Context, bound int, enc func(dst []byte) ([]byte, error)) error {
	if err := fw.lock(ctx); err != nil {
		return err
	}
	defer fw.unlock()
	if fw.ab == nil {
		b, err := enc(fw.buf[:0])
		if err != nil {
			return err
		}
		fw.buf = keepSmall(b)
		return fw.put(ctx, b)
	}
	var h answerHold
	if bound > 0 {
		var err error
		if h, err = fw.holdAnswer(ctx, bound); err != nil {
			return err
		}
	}
	defer func() { fw.ab.release(h) }()
	b, err := enc(fw.buf[:0])
	if err != nil {
		return err
	}
	fw.buf = keepSmall(b)
	if h, err = fw.fitAnswer(ctx, h, len(b)); err != nil {
		return err
	}
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
// connection's answer budget (MaxConnInFlightBytes), the stream's
// tenant's (MaxTenantAnswerBytes, shared by every connection of the
// tenant) and the listener's (MaxAnswerBytes, shared by every
// connection), taken in that order, and each write, waiting for room
// included, must end within timeout; one that does not resets the stream
// (a client that does not read its answers cannot hold them, nor the
// stream's handler, for longer).
type answerBound struct {
	budget   *byteBudget
	tenants  *tenantBudgets // nil: no per-tenant bound
	tenant   string         // the stream's tenant (set per stream at auth)
	shared   *byteBudget    // the listener's, nil: none
	timeout  time.Duration  // ≤ 0: no time bound
	timeouts *atomic.Uint64
	waiting  *atomic.Int64 // answers of the listener waiting for room
}

// forTenant returns a copy of ab for a stream authenticated for tenant.
func (ab *answerBound) forTenant(tenant string) *answerBound {
	c := *ab
	c.tenant = tenant
	return &c
}

// answerHold is what an answer holds of the answer budgets.
type answerHold struct {
	conn, ten, all int64
	tb             *tenantBudget // nil: none taken
}

// release gives h back to the budgets.
func (ab *answerBound) release(h answerHold) {
	ab.budget.release(h.conn)
	if h.tb != nil {
		ab.tenants.put(h.tb, h.ten)
	}
	if ab.shared != nil {
		ab.shared.release(h.all)
	}
}

// hold waits for n bytes of the connection's budget, then of the tenant's,
// then of the listener's (always in that order), at most until the write
// bound.
func (ab *answerBound) hold(ctx context.Context, n int) (answerHold, error) {
	var h answerHold
	if ab.tenants != nil {
		h.tb = ab.tenants.get(ab.tenant)
	}
	var connOK, tenOK, allOK bool
	h.conn, connOK = ab.budget.tryAcquire(int64(n))
	if connOK && h.tb != nil {
		h.ten, tenOK = h.tb.b.tryAcquire(int64(n))
	} else {
		tenOK = connOK
	}
	if tenOK && ab.shared != nil {
		h.all, allOK = ab.shared.tryAcquire(int64(n))
	} else {
		allOK = tenOK
	}
	if allOK {
		return h, nil
	}
	if ab.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, ab.timeout, ErrAnswerTimeout)
		defer cancel()
	}
	ab.waiting.Add(1)
	var err error
	if !connOK {
		h.conn, err = ab.budget.acquire(ctx, int64(n))
	}
	if err == nil && !tenOK && h.tb != nil {
		h.ten, err = h.tb.b.acquire(ctx, int64(n))
	}
	if err == nil && !allOK && ab.shared != nil {
		h.all, err = ab.shared.acquire(ctx, int64(n))
	}
	ab.waiting.Add(-1)
	if err != nil {
		ab.release(h)
		if context.Cause(ctx) == ErrAnswerTimeout {
			ab.timeouts.Add(1)
			return answerHold{}, fmt.Errorf("%w: waited %v for room in the answer budget", ErrAnswerTimeout, ab.timeout)
		}
		return answerHold{}, err
	}
	return h, nil
}

// tenantBudgets are the answer budgets of the tenants with answers being
// written or waiting: an entry lives while it has users, so the table
// holds at most one entry per answer in flight, whatever tenant names
// clients authenticate with.
type tenantBudgets struct {
	size int64
	mu   sync.Mutex
	m    map[string]*tenantBudget
}

type tenantBudget struct {
	b      *byteBudget
	tenant string
	users  int // guarded by tenantBudgets.mu
}

// get returns tenant's budget, counting one more user of it.
func (t *tenantBudgets) get(tenant string) *tenantBudget {
	t.mu.Lock()
	defer t.mu.Unlock()
	tb := t.m[tenant]
	if tb == nil {
		if t.m == nil {
			t.m = make(map[string]*tenantBudget)
		}
		tb = &tenantBudget{b: newByteBudget(t.size), tenant: tenant}
		t.m[tenant] = tb
	}
	tb.users++
	return tb
}

// put returns n bytes to tb and drops its user; the entry goes once
// unused.
func (t *tenantBudgets) put(tb *tenantBudget, n int64) {
	tb.b.release(n)
	t.mu.Lock()
	defer t.mu.Unlock()
	if tb.users--; tb.users == 0 {
		delete(t.m, tb.tenant)
	}
}

// inUse returns the bytes tenant holds (tests).
func (t *tenantBudgets) inUse(tenant string) int64 {
	t.mu.Lock()
	tb := t.m[tenant]
	t.mu.Unlock()
	if tb == nil {
		return 0
	}
	return tb.b.inUse()
}

// holdAnswer is ab.hold; an answer that found no room within the bound
// resets the stream, as one cut during its write does (its client is not
// reading).
func (fw *frameWriter) holdAnswer(ctx context.Context, n int) (answerHold, error) {
	h, err := fw.ab.hold(ctx, n)
	if errors.Is(err, ErrAnswerTimeout) {
		fw.abort()
	}
	return h, err
}

// fitAnswer adjusts h, taken for an upper bound of a frame's size, to the
// frame's size n once it is encoded: what the bound overestimated is given
// back. Should the frame be larger than the bound said, the difference is
// waited for (the budgets never count less than the frames being
// written).
func (fw *frameWriter) fitAnswer(ctx context.Context, h answerHold, n int) (answerHold, error) {
	fit := func(b *byteBudget, got *int64) {
		if b == nil {
			return
		}
		if want := min(int64(n), b.size); *got > want {
			b.release(*got - want)
			*got = want
		}
	}
	fit(fw.ab.budget, &h.conn)
	short := min(int64(n), fw.ab.budget.size) - h.conn
	if h.tb != nil {
		fit(h.tb.b, &h.ten)
		short = max(short, min(int64(n), h.tb.b.size)-h.ten)
	}
	if fw.ab.shared != nil {
		fit(fw.ab.shared, &h.all)
		short = max(short, min(int64(n), fw.ab.shared.size)-h.all)
	}
	if short > 0 {
		// No bound was given (encode), or it was short (a bug): hold
		// the difference too.
		more, err := fw.holdAnswer(ctx, int(short))
		if err != nil {
			return h, err
		}
		if h.tb == nil {
			h.tb = more.tb // nothing was held before (bound 0)
		} else if more.tb != nil {
			fw.ab.tenants.put(more.tb, 0) // the same entry as h.tb: one user is enough
		}
		h.conn += more.conn
		h.ten += more.ten
		h.all += more.all
	}
	return h, nil
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
