package client

import (
	"cmp"
	"context"
	"errors"
	"io"
	"sync/atomic"

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

	next      uint64 // the offset to resume at, valid when hasNext
	hasNext   bool
	delivered bool // a record with an offset was returned
	noOff     bool // records without offsets were returned
	tail      bool // resume at the live tail (a move without resume_from)
	// fruitless counts the resumes in a row that delivered nothing: a
	// broker ending every event stream at once must not spin the client.
	fruitless int
	dropped   atomic.Uint64
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
	r.next, r.hasNext, r.delivered, r.tail, r.fruitless = off+1, true, true, false, 0
	return true
}

// resumeOrEnd is ended's verdict for a resumable end: nil to resume after
// the backoff that resumes in a row without a delivery call for, err once
// they spent the retry budget (or ctx ended).
func (r *resumer) resumeOrEnd(ctx context.Context, err error) error {
	r.fruitless++
	if r.fruitless > max(r.c.cfg.MaxAttempts, 1) {
		return err
	}
	if r.fruitless > 1 && !sleep(ctx, r.c.ctx, r.c.cfg.backoff(r.fruitless-1, 0)) {
		return cmp.Or(ctx.Err(), ErrClosed)
	}
	return nil
}

// ended judges how the event stream from addr ended with err: nil to
// resume (at the position it leaves), else the error to end with (io.EOF
// for a clean end by a live broker).
func (r *resumer) ended(ctx context.Context, addr string, err error) error {
	if end := r.judge(ctx, addr, err); end != nil {
		return end
	}
	return r.resumeOrEnd(ctx, err)
}

// judge is ended without the bound on fruitless resumes.
func (r *resumer) judge(ctx context.Context, addr string, err error) error {
	var (
		moved *felix.ShardMovedError
		lag   *felix.LaggedError
	)
	switch {
	case errors.As(err, &moved):
		r.moved(moved)
		r.c.forgetOwner(r.key, addr)
		r.c.learnOwner(r.key, ownerHint{nodeID: moved.NodeID, addr: moved.Addr, gen: moved.Generation}, "shard_moved from "+addr)
		return nil
	case err == io.EOF:
		// A live broker finishing the stream is a clean end; one that is
		// going away (draining, gone) is a failover.
		if r.c.probe(ctx, addr) == nil {
			return io.EOF
		}
		r.c.forgetOwner(r.key, addr)
		return nil
	case errors.As(err, &lag):
		at := lag.ResumeFrom
		if r.delivered {
			// The durable log still holds what the broker dropped from the
			// subscription's queue: resuming after the last delivered
			// record is gapless.
			at = r.next
		}
		r.next, r.hasNext, r.tail = at, true, false
		r.c.emit(Notice{Kind: NoticeLagged, Op: r.op, Addr: addr, Stream: r.key.name, Shard: r.key.shard, Offset: at, Err: err})
		if r.lagAsError {
			used := *lag
			used.ResumeFrom = at
			return &used
		}
		return nil
	case errors.As(err, new(*felix.StreamDeletedError)):
		return err
	}
	switch decide(err, true).act {
	case actRetry, actRedirect:
		r.c.forgetOwner(r.key, addr)
		return nil
	case actFailover:
		r.c.forgetOwner(r.key, addr)
		if b := r.c.brokerAt(addr); b != nil {
			r.c.markFailed(b, nil)
		}
		return nil
	}
	return err
}

// moved sets the position after shard_moved: max(last delivered + 1,
// resume_from); resume_from before any delivery; the new owner's tail when
// the broker sent none (an in-memory stream) and no offset is known.
func (r *resumer) moved(m *felix.ShardMovedError) {
	switch {
	case m.HasResumeFrom:
		if !r.delivered || m.ResumeFrom > r.next {
			r.next = m.ResumeFrom
		}
		r.hasNext, r.tail = true, false
	case !r.delivered:
		r.tail = true
	}
}

// start returns where a subscription resumes; ErrCannotResume (joined
// with cause) when it delivered records without offsets and nothing says
// where to go on.
func (r *resumer) start(orig felix.StartPosition, cause error) (felix.StartPosition, error) {
	switch {
	case r.tail:
		return felix.StartPosition{Kind: felix.StartLatest}, nil
	case r.hasNext:
		return felix.StartAt(r.next), nil
	case r.noOff:
		return felix.StartPosition{}, errors.Join(ErrCannotResume, cause)
	}
	return orig, nil
}
