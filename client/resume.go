package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix"
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

// judge is ended without the bound on fruitless resumes: the wait the end
// calls for before a resume, or the error to end with.
func (r *resumer) judge(ctx context.Context, addr string, err error) (time.Duration, error) {
	var (
		moved *felix.ShardMovedError
		lag   *felix.LaggedError
	)
	switch {
	case errors.As(err, &moved):
		r.moved(moved)
		r.c.forgetOwner(r.key, addr)
		r.c.learnOwner(r.key, ownerHint{nodeID: moved.NodeID, addr: moved.Addr, gen: moved.Generation}, "shard_moved from "+addr)
		return 0, nil
	case err == io.EOF:
		// A live broker finishing the stream is a clean end; one that is
		// going away (draining, gone) is a failover.
		if r.c.probe(ctx, addr) == nil {
			return 0, io.EOF
		}
		r.c.forgetOwner(r.key, addr)
		return 0, nil
	case errors.As(err, &lag):
		at := lag.ResumeFrom
		if r.delivered {
			// The durable log still holds what the broker dropped from the
			// subscription's queue: resuming after the last delivered
			// record is gapless.
			at = r.next
		}
		r.next, r.hasNext, r.tail, r.floor = at, true, false, 0
		r.c.emit(Notice{Kind: NoticeLagged, Op: r.op, Addr: addr, Stream: r.key.name, Shard: r.key.shard, Offset: at, Err: err})
		if r.lagAsError {
			used := *lag
			used.ResumeFrom = at
			return 0, &used
		}
		return 0, nil
	case errors.As(err, new(*felix.StreamDeletedError)):
		return 0, err
	}
	v := decide(err, true)
	switch v.act {
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
func (r *resumer) moved(m *felix.ShardMovedError) {
	switch {
	case m.HasResumeFrom && r.delivered:
		if m.ResumeFrom > r.next {
			r.floor = m.ResumeFrom
		}
	case m.HasResumeFrom:
		r.next, r.hasNext, r.tail = m.ResumeFrom, true, false
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
