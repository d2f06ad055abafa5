// Package grouploop is the consumer loop behind api.Group.Records: poll,
// yield every record, ack what the loop body leaves unsettled, and hand
// back (nack) what it will not process. How a poll and a settlement reach
// the broker (one connection, or the cluster's shard leader) is the
// Requestor's business; the loop gets them as functions, and the record
// and delivery types are api's.
package grouploop

import (
	"context"
	"iter"
	"time"
)

// Defaults of a loop's polls: records per poll and how long the broker may
// wait for one (a long poll).
const (
	DefaultMax  = 16
	DefaultWait = time.Second
)

// EmptyPollPause is how long a loop waits after an empty poll before the
// next one, so that a broker that answers at once (no long poll) is not
// polled in a tight loop.
const EmptyPollPause = 50 * time.Millisecond

// giveBackTimeout bounds the nacks of the records a loop gives back (on a
// context that outlives the loop's cancellation).
const giveBackTimeout = 5 * time.Second

// Delivery is a record handed to the body of a loop, with the calls that
// settle it (conn.Delivery, client.Delivery): a pointer type, whose zero
// value (nil) goes with an error.
type Delivery interface {
	comparable
	// Ack settles the record for good.
	Ack(ctx context.Context) error
	// Nack hands it back for redelivery after delay (0: at once).
	Nack(ctx context.Context, delay time.Duration) error
}

// Loop is a consumer loop over records R handed to the body as deliveries
// D. Every field is required.
type Loop[R any, D Delivery] struct {
	// Poll claims the next records; an empty result is not an error.
	Poll func(ctx context.Context) ([]R, error)
	// Deliver wraps a record for the body.
	Deliver func(R) D
	// Settled reports whether d was settled (by the body or the loop).
	Settled func(d D) bool
	// Idle runs after an empty poll (a pause): a non-nil error is yielded
	// and ends the loop.
	Idle func(ctx context.Context) error
}

// Options returns the first of opts (the zero O when there is none): the
// variadic options of a Records call.
func Options[O any](opts []O) O {
	var o O
	if len(opts) > 0 {
		o = opts[0]
	}
	return o
}

// Seq returns the loop as an iterator. It polls and yields every record.
// A delivery the body leaves unsettled is acked when the body continues;
// when the body breaks out, that delivery and the records of the same poll
// not yet yielded are nacked. A failed ack is yielded (the loop goes on if
// the body continues); a failed poll is yielded and ends the loop, as does
// the end of ctx (its error is yielded; records not yet yielded are
// nacked).
func (l *Loop[R, D]) Seq(ctx context.Context) iter.Seq2[D, error] {
	return func(yield func(D, error) bool) {
		var none D
		for {
			recs, err := l.Poll(ctx)
			if err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				}
				yield(none, err)
				return
			}
			if len(recs) == 0 {
				if err := l.Idle(ctx); err != nil {
					yield(none, err)
					return
				}
				continue
			}
			for i, r := range recs {
				if ctx.Err() != nil {
					l.giveBack(ctx, none, recs[i:])
					yield(none, ctx.Err())
					return
				}
				d := l.Deliver(r)
				if !yield(d, nil) {
					l.giveBack(ctx, d, recs[i+1:])
					return
				}
				if l.Settled(d) {
					continue
				}
				if err := d.Ack(ctx); err != nil && !yield(none, err) {
					l.giveBack(ctx, none, recs[i+1:])
					return
				}
			}
			if ctx.Err() != nil {
				yield(none, ctx.Err())
				return
			}
		}
	}
}

// giveBack nacks d (unless it is the zero D or settled) and the records
// not yet yielded, on a context that outlives ctx's cancellation, bounded
// by giveBackTimeout: records the loop will not process are redelivered
// at once instead of after their visibility timeout. Failures are ignored
// (the visibility timeout redelivers them anyway).
func (l *Loop[R, D]) giveBack(ctx context.Context, d D, rest []R) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackTimeout)
	defer cancel()
	var none D
	if d != none && !l.Settled(d) {
		_ = d.Nack(ctx, 0)
	}
	for _, r := range rest {
		_ = l.Deliver(r).Nack(ctx, 0)
	}
}
