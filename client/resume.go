package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// resumer is what a Subscription and a Watch share: the position to
// resume at and the judgement of how an event stream ended (resume, or
// end with an error).
type resumer struct {
	c   *Client
	op  string // "subscribe" or "cache_watch"
	key ownerKey
	// lagAsError ends on a lag instead of resuming.
	lagAsError bool
	// detectDrops reports offsets missing between delivered records (not
	// for cache watches, whose offsets are sparse).
	detectDrops bool

	next      uint64 // the offset expected next, valid when hasNext
	hasNext   bool
	floor     uint64 // resume at no lower than this (a shard_moved resume_from beyond next); 0: none
	delivered bool   // a record with an offset was returned
	noOff     bool   // records without offsets were returned
	tail      bool   // resume at the live tail (a move without resume_from)
	// fruitless counts the resumes in a row that delivered nothing: a
	// broker ending every event stream at once must not spin the client.
	fruitless int
	dropped   atomic.Uint64
}

// began records where the broker said a new event stream starts (a
// subscribed start_offset, a cache watch's resume_offset), ok when it
// said: until a record is delivered, a resume starts there, so an idle
// stream that loses its connection misses nothing written meanwhile.
func (r *resumer) began(off uint64, ok bool) {
	if ok && !r.hasNext {
		r.next, r.hasNext, r.tail = off, true, false
	}
}

// deliver accounts for a record at off (skipped: the undeliverable
// offsets just below it); false when it was delivered already (a resend
// after a resume), which the caller drops.
func (r *resumer) deliver(addr string, off, skipped uint64) bool {
	if r.delivered && off < r.next {
		return false
	}
	if r.detectDrops && r.hasNext && off > r.next+skipped {
		missing := off - skipped - r.next
		r.dropped.Add(missing)
		r.c.emit(Notice{Kind: NoticeDropped, Op: r.op, Addr: addr, Stream: r.key.name, Shard: r.key.shard, Offset: r.next, Count: missing})
	}
	r.next, r.hasNext, r.delivered, r.tail, r.floor, r.fruitless = off+1, true, true, false, 0, 0
	return true
}

// at returns the offset a resume starts at, ok when one is known.
func (r *resumer) at() (uint64, bool) {
	if !r.hasNext || r.tail {
		return 0, false
	}
	return max(r.next, r.floor), true
}

// ended judges how the event stream from addr ended with err: nil to
// resume (at the position it leaves, after waiting what the end and the
// resumes in a row without a delivery call for), else the error to end
// with (io.EOF for a clean end by a live broker).
func (r *resumer) ended(ctx context.Context, addr string, err error) error {
	wait, end := r.judge(ctx, addr, err)
	if end != nil {
		return end
	}
	return r.again(ctx, addr, err, wait)
}

// again bounds the resumes in a row that deliver nothing by
// Config.MaxAttempts, and waits before each one: the end's retry_after,
// and from the second fruitless resume on at least the backoff. Each wait
// is reported (NoticeRetry); the give-up names the bound and wraps err.
func (r *resumer) again(ctx context.Context, addr string, err error, retryAfter time.Duration) error {
	r.fruitless++
	if limit := max(r.c.cfg.MaxAttempts, 1); r.fruitless > limit {
		return fmt.Errorf("client: %s of %s shard %d on %s: gave up after %d resumes in a row that delivered nothing (Config.MaxAttempts): %w",
			r.op, r.key.name, r.key.shard, addr, limit, err)
	}
	d := retryAfter
	if r.fruitless > 1 {
		d = r.c.cfg.backoff(r.fruitless-1, retryAfter)
	}
	if d <= 0 {
		return nil
	}
	r.c.emit(Notice{Kind: NoticeRetry, Op: r.op, Addr: addr, Stream: r.key.name, Shard: r.key.shard, Attempt: r.fruitless, Delay: d, Err: err})
	if !resumeWait(ctx, r.c.ctx, d) {
		return cmp.Or(ctx.Err(), ErrClosed)
	}
	return nil
}

// waitHook replaces the resumer's waits when set (tests: see
// export_test.go).
var waitHook atomic.Pointer[func(ctx context.Context, d time.Duration) bool]

// resumeWait waits d before a resume; false when ctx or the client ended
// first.
func resumeWait(ctx, cctx context.Context, d time.Duration) bool {
	if h := waitHook.Load(); h != nil {
		return (*h)(ctx, d) && cctx.Err() == nil
	}
	return sleep(ctx, cctx, d)
}

// judge acts on the decision table's verdict about how the event stream
// from addr ended with err (decide reads the end through endOfStream):
// the wait the end calls for before a resume, or the error to end with.
func (r *resumer) judge(ctx context.Context, addr string, err error) (time.Duration, error) {
	v := decide(endOfStream(err), true)
	switch v.act {
	case actMoved:
		r.moved(v.resumeFrom, v.hasResumeFrom)
		r.c.forgetOwner(r.key, addr)
		r.c.learnOwner(r.key, *v.hint, "shard_moved from "+addr)
		return 0, nil
	case actEndLive:
		// A live broker finishing the stream is a clean end; one that is
		// going away (draining, gone) is a failover.
		if r.c.probe(ctx, addr) == nil {
			return 0, io.EOF
		}
		r.c.forgetOwner(r.key, addr)
		return 0, nil
	case actLagged:
		at := v.resumeFrom
		if r.delivered {
			// The durable log still holds what the broker dropped from the
			// subscription's queue: resuming after the last delivered
			// record is gapless.
			at = r.next
		}
		r.next, r.hasNext, r.tail, r.floor = at, true, false, 0
		r.c.emit(Notice{Kind: NoticeLagged, Op: r.op, Addr: addr, Stream: r.key.name, Shard: r.key.shard, Offset: at, Err: err})
		if r.lagAsError {
			var lag *felix.LaggedError
			errors.As(err, &lag)
			used := *lag
			used.ResumeFrom = at
			return 0, &used
		}
		return 0, nil
	case actRetry, actRedirect:
		r.c.forgetOwner(r.key, addr)
		return v.retryAfter, nil
	case actFailover:
		r.c.forgetOwner(r.key, addr)
		if b := r.c.brokerAt(addr); b != nil {
			r.c.markFailed(b, nil)
		}
		return v.retryAfter, nil
	}
	return 0, err
}

// moved sets the position after shard_moved: max(last delivered + 1,
// resume_from), the offsets in between reported as dropped when the next
// record arrives (the broker offered them and the subscription's queue
// dropped them); resume_from before any delivery; where the stream began
// when the broker sent none and no record was delivered; the new owner's
// tail when no offset is known at all (an in-memory stream).
func (r *resumer) moved(resumeFrom uint64, hasResumeFrom bool) {
	switch {
	case hasResumeFrom && r.delivered:
		if resumeFrom > r.next {
			r.floor = resumeFrom
		}
	case hasResumeFrom:
		r.next, r.hasNext, r.tail = resumeFrom, true, false
	case !r.hasNext:
		r.tail = true
	}
}

// start returns where a subscription resumes; ErrCannotResume (joined
// with cause) when it delivered records without offsets and nothing says
// where to go on.
func (r *resumer) start(orig felix.StartPosition, cause error) (felix.StartPosition, error) {
	if r.tail {
		return felix.StartPosition{Kind: felix.StartLatest}, nil
	}
	if off, ok := r.at(); ok {
		return felix.StartAt(off), nil
	}
	if r.noOff {
		return felix.StartPosition{}, errors.Join(ErrCannotResume, cause)
	}
	return orig, nil
}

// cursor is one event stream of a resumable stream: a *conn.Subscription
// or a *conn.Watch.
type cursor[E any] interface {
	comparable
	Next(ctx context.Context) (E, error)
	Close() error
}

// stream is the one state machine under Subscription and Watch (and, one
// per shard, ShardedSubscription and ShardedWatch). Next reads the
// current event stream, drops what was delivered already and accounts
// for the rest (resumer.deliver); when the event stream ends, the
// resumer judges the end (decide) and the stream either opens a new one
// on the owner at the resumer's position or ends with a sticky error.
// What differs between a subscription and a watch is given at
// construction: how to open an event stream, where it begins, and an
// event's offset.
type stream[E any, C cursor[E]] struct {
	c   *Client
	pos resumer
	// open opens an event stream on cc at pos's position (resume: not the
	// first one); prepare runs before any broker is asked, and its error
	// (e.g. ErrCannotResume) ends the stream.
	prepare func(resume bool, cause error) (open func(ctx context.Context, cc *conn.Client) (C, error), err error)
	// opened is told of each new event stream (under mu) and returns
	// where it begins, ok when the broker said.
	opened func(cur C) (begins uint64, ok bool)
	// offset returns an event's offset and the undeliverable offsets just
	// below it; ok is false for an event without an offset.
	offset func(ev E) (off, skipped uint64, ok bool)

	// mu guards cur and addr for the goroutines other than the one
	// calling next, which is the only one that writes them (under mu)
	// and so reads them without it.
	mu     sync.Mutex
	cur    C
	addr   string
	closed atomic.Bool
	err    error
}

// open opens an event stream on the owner of pos.key (cause: the end
// that made this a resume, nil for the first one).
func (st *stream[E, C]) open(ctx context.Context, cause error) error {
	resume := cause != nil
	at, _ := st.pos.at()
	fn, err := st.prepare(resume, cause)
	if err != nil {
		return err
	}
	k := st.pos.key
	var cur C
	var addr string
	err = st.c.run(ctx, call{op: st.pos.op, key: &k, safe: true}, func(ctx context.Context, cc *conn.Client, b *broker) error {
		var err error
		cur, err = fn(ctx, cc)
		addr = b.addr
		return err
	})
	if err != nil {
		return err
	}
	st.mu.Lock()
	if st.closed.Load() {
		st.mu.Unlock()
		cur.Close()
		return ErrClosed
	}
	st.cur, st.addr = cur, addr
	begins, ok := st.opened(cur)
	st.mu.Unlock()
	st.pos.began(begins, ok)
	if resume {
		st.c.emit(Notice{Kind: NoticeResumed, Op: st.pos.op, Addr: addr, Stream: st.pos.key.name, Shard: st.pos.key.shard, Offset: at, Err: cause})
	}
	return nil
}

// begin opens the first event stream and has the client track x (the
// Subscription or Watch st is under) until it closes.
func (st *stream[E, C]) begin(ctx context.Context, x closer) error {
	if err := st.open(ctx, nil); err != nil {
		return err
	}
	if !st.c.track(x) {
		st.close()
		return ErrClosed
	}
	return nil
}

// end closes the stream and the client stops tracking x; it is
// idempotent.
func (st *stream[E, C]) end(x closer) error {
	if st.close() {
		st.c.untrack(x)
	}
	return nil
}

// where returns the broker the current event stream is on.
func (st *stream[E, C]) where() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.addr
}

// next returns the next event (see Subscription for how it ends).
func (st *stream[E, C]) next(ctx context.Context) (E, error) {
	var zero E
	for {
		if st.err != nil {
			return zero, st.err
		}
		if st.closed.Load() {
			return zero, ErrClosed
		}
		// cur and addr are written only by this goroutine (open, ended;
		// begin's open happens before the first Next), under mu for the
		// readers on other goroutines (close, where): this one reads
		// them without the lock, which was one Lock/Unlock per event.
		cur, addr := st.cur, st.addr
		if cur == *new(C) {
			// The last resume did not open one (the caller's context ended).
			if err := st.resume(ctx, nil); err != nil {
				return zero, err
			}
			continue
		}
		ev, err := cur.Next(ctx)
		if err == nil {
			off, skipped, ok := st.offset(ev)
			if !ok {
				st.pos.noOff = true
				return ev, nil
			}
			if !st.pos.deliver(addr, off, skipped) {
				continue // delivered already (a resend after a resume)
			}
			return ev, nil
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return zero, err
		}
		if st.closed.Load() {
			return zero, ErrClosed
		}
		if err := st.ended(ctx, cur, addr, err); err != nil {
			if ctx.Err() == nil {
				st.err = err
			}
			return zero, err
		}
	}
}

// ended closes cur, which ended with err, and resumes (nil) or returns
// the error to end with, as the resumer judges.
func (st *stream[E, C]) ended(ctx context.Context, cur C, addr string, err error) error {
	cur.Close()
	st.mu.Lock()
	st.cur = *new(C)
	st.mu.Unlock()
	if end := st.pos.ended(ctx, addr, err); end != nil {
		return end
	}
	return st.resume(ctx, err)
}

// resume opens a new event stream where the resumer says.
func (st *stream[E, C]) resume(ctx context.Context, cause error) error {
	if cause == nil {
		cause = errResumeRetried
	}
	return st.open(ctx, cause)
}

// errResumeRetried is the cause of a resume retried by a later Next after
// the caller's context ended the previous attempt.
var errResumeRetried = errors.New("client: resume retried after the caller's context ended")

// close ends the stream; false when it was closed already.
func (st *stream[E, C]) close() bool {
	if st.closed.Swap(true) {
		return false
	}
	st.mu.Lock()
	cur := st.cur
	st.mu.Unlock()
	if cur != *new(C) {
		cur.Close()
	}
	return true
}
