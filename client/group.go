package client

import (
	"cmp"
	"context"
	"iter"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/grouploop"
)

// GroupRef names a consumer group on one shard of a stream.
type GroupRef = conn.GroupRef

// GroupRecord is one record handed out by a poll: its offset (to settle it
// with), payload and attempt count.
type GroupRecord = conn.GroupRecord

// PollOptions shapes a poll (see conn.PollOptions).
type PollOptions = conn.PollOptions

// NackOptions shapes a nack (see conn.NackOptions).
type NackOptions = conn.NackOptions

// GroupPosition is the answer to Seek.
type GroupPosition = conn.GroupPosition

// GroupInfo describes a group (see Group.Describe).
type GroupInfo = conn.GroupInfo

// Group is a handle on a consumer group of the cluster. Every call goes to
// the leader of the group's shard (learnt from redirects and shard_owners,
// followed without being reported), over the client's healing
// connections; each call is gated on what that broker advertised
// (conn.ErrNotAdvertised, nothing sent, otherwise), exactly as conn.Group.
//
// Retries: polls, dead-letter listings, describes and seeks are re-sent
// after a lost connection (a record claimed by a poll whose answer was
// lost is redelivered after its visibility timeout, so nothing is lost).
// Settling calls (ack, nack, extend, dead letter, redrive, discard) and
// delete are not: when their outcome is unknown they return an
// *AmbiguousError, since a re-sent ack of an applied ack would be refused
// as stale_claim and a re-sent nack could release a later claim.
type Group struct {
	c   *Client
	ref GroupRef
}

// Group returns a handle on the consumer group ref. It sends nothing.
func (c *Client) Group(ref GroupRef) *Group { return &Group{c: c, ref: ref} }

// Ref returns the group's name and place.
func (g *Group) Ref() GroupRef { return g.ref }

// key is the owner key of the group's shard (nil on a standalone broker:
// no routing needed).
func (g *Group) key() *ownerKey {
	if !g.c.clustered.Load() {
		return nil
	}
	return &ownerKey{kind: felix.ShardKindStream, tenant: g.ref.TenantID, namespace: g.ref.Namespace, name: g.ref.Stream, shard: g.ref.Shard}
}

// do runs fn on a conn.Group handle on the shard leader's connection.
func (g *Group) do(ctx context.Context, op string, safe bool, fn func(ctx context.Context, cg *conn.Group) error) error {
	return g.c.run(ctx, call{op: op, key: g.key(), safe: safe}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		return fn(ctx, cc.Group(g.ref))
	})
}

// Poll claims up to o.Max records on the shard leader. An empty result is
// an answer, not an error. See conn.Group.Poll.
func (g *Group) Poll(ctx context.Context, o PollOptions) (recs []GroupRecord, err error) {
	err = g.do(ctx, "group_poll", true, func(ctx context.Context, cg *conn.Group) error {
		var err error
		recs, err = cg.Poll(ctx, o)
		return err
	})
	return recs, err
}

// Ack settles a claimed record: it is not delivered again. An offset the
// group holds no claim on is a *conn.BrokerError of code
// felix.CodeStaleClaim.
func (g *Group) Ack(ctx context.Context, offset uint64) error {
	return g.do(ctx, "group_ack", false, func(ctx context.Context, cg *conn.Group) error { return cg.Ack(ctx, offset) })
}

// Nack hands a claimed record back for redelivery (at once, or after
// o.Delay). See conn.Group.Nack.
func (g *Group) Nack(ctx context.Context, offset uint64, o NackOptions) error {
	return g.do(ctx, "group_nack", false, func(ctx context.Context, cg *conn.Group) error { return cg.Nack(ctx, offset, o) })
}

// Extend keeps a claim for another d and returns the time granted. See
// conn.Group.Extend.
func (g *Group) Extend(ctx context.Context, offset uint64, attempts uint32, d time.Duration) (granted time.Duration, err error) {
	err = g.do(ctx, "group_extend", false, func(ctx context.Context, cg *conn.Group) error {
		var err error
		granted, err = cg.Extend(ctx, offset, attempts, d)
		return err
	})
	return granted, err
}

// DeadLetter sets a claimed record aside at once. Needs
// felix.FeatureGroupClaimControl.
func (g *Group) DeadLetter(ctx context.Context, offset uint64) error {
	return g.do(ctx, "group_dead_letter", false, func(ctx context.Context, cg *conn.Group) error { return cg.DeadLetter(ctx, offset) })
}

// DeadLetters lists the offsets set aside, lowest first. Needs
// felix.FeatureGroupDeadLetters.
func (g *Group) DeadLetters(ctx context.Context) (offsets []uint64, err error) {
	err = g.do(ctx, "group_dead_letters", true, func(ctx context.Context, cg *conn.Group) error {
		var err error
		offsets, err = cg.DeadLetters(ctx)
		return err
	})
	return offsets, err
}

// Redrive puts a dead letter back in the queue with its attempts reset.
// Needs felix.FeatureGroupDeadLetters.
func (g *Group) Redrive(ctx context.Context, offset uint64) error {
	return g.do(ctx, "group_redrive", false, func(ctx context.Context, cg *conn.Group) error { return cg.Redrive(ctx, offset) })
}

// Discard drops a dead letter for good. Needs felix.FeatureGroupDeadLetters.
func (g *Group) Discard(ctx context.Context, offset uint64) error {
	return g.do(ctx, "group_discard", false, func(ctx context.Context, cg *conn.Group) error { return cg.Discard(ctx, offset) })
}

// Seek moves the group's cursor to start (with ifNew, only a group that
// does not exist yet). Needs felix.FeatureGroupAdmin.
func (g *Group) Seek(ctx context.Context, start felix.StartPosition, ifNew bool) (pos GroupPosition, err error) {
	err = g.do(ctx, "group_seek", true, func(ctx context.Context, cg *conn.Group) error {
		var err error
		pos, err = cg.Seek(ctx, start, ifNew)
		return err
	})
	return pos, err
}

// Describe reports the group's position and counts. Needs
// felix.FeatureGroupAdmin.
func (g *Group) Describe(ctx context.Context) (info GroupInfo, err error) {
	err = g.do(ctx, "group_describe", true, func(ctx context.Context, cg *conn.Group) error {
		var err error
		info, err = cg.Describe(ctx)
		return err
	})
	return info, err
}

// Delete removes the group and reports whether it existed. Needs
// felix.FeatureGroupAdmin.
func (g *Group) Delete(ctx context.Context) (existed bool, err error) {
	err = g.do(ctx, "group_delete", false, func(ctx context.Context, cg *conn.Group) error {
		var err error
		existed, err = cg.Delete(ctx)
		return err
	})
	return existed, err
}

// Delivery is a record handed to the body of a Records loop, with the
// calls to settle it (each goes to the shard leader).
type Delivery struct {
	GroupRecord
	g       *Group
	settled bool
}

// Ack settles the record (see Group.Ack).
func (d *Delivery) Ack(ctx context.Context) error {
	d.settled = true
	return d.g.Ack(ctx, d.Offset)
}

// Nack hands the record back for redelivery after delay (0: at once),
// naming the delivery's attempt count so that a nack after the claim
// timed out cannot release someone else's claim, when the leader
// advertised felix.FeatureGroupClaimControl (without it a non-zero delay
// is conn.ErrNotAdvertised, nothing sent).
func (d *Delivery) Nack(ctx context.Context, delay time.Duration) error {
	d.settled = true
	g := d.g
	return g.c.run(ctx, call{op: "group_nack", key: g.key()}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		o := NackOptions{Delay: delay}
		if cc.Capabilities().CanClaimControl() {
			o.Attempts = d.Attempts
		}
		return cc.Group(g.ref).Nack(ctx, d.Offset, o)
	})
}

// DeadLetter sets the record aside (see Group.DeadLetter).
func (d *Delivery) DeadLetter(ctx context.Context) error {
	d.settled = true
	return d.g.DeadLetter(ctx, d.Offset)
}

// Records is a consumer loop over the group: it polls the shard leader
// (with the first of opts, if any: o.Max records per poll, default 16;
// o.Wait per poll, default 1 s, so the broker long-polls) and yields every record. A record the loop body
// leaves unsettled is acked when the body continues; when the body breaks
// out, that record and the records of the same poll not yet yielded are
// nacked, so they are redelivered at once instead of after the visibility
// timeout. A failed ack is yielded as an error (the loop goes on if the
// body continues); a failed poll (after the client's retries) is yielded
// and ends the loop. The loop ends when ctx ends, yielding ctx's error.
//
//	for d, err := range g.Records(ctx) {
//		if err != nil {
//			return err
//		}
//		if err := handle(d.Payload); err != nil {
//			_ = d.Nack(ctx, 0) // redeliver
//		}
//	}
func (g *Group) Records(ctx context.Context, opts ...PollOptions) iter.Seq2[*Delivery, error] {
	o := grouploop.Options(opts)
	o.Max = cmp.Or(o.Max, grouploop.DefaultMax)
	o.Wait = cmp.Or(o.Wait, grouploop.DefaultWait)
	l := grouploop.Loop[GroupRecord, *Delivery]{
		Poll:    func(ctx context.Context) ([]GroupRecord, error) { return g.Poll(ctx, o) },
		Deliver: func(r GroupRecord) *Delivery { return &Delivery{GroupRecord: r, g: g} },
		Settled: func(d *Delivery) bool { return d.settled },
		Idle: func(ctx context.Context) error {
			if sleep(ctx, g.c.ctx, grouploop.EmptyPollPause) {
				return nil
			}
			return cmp.Or(ctx.Err(), ErrClosed)
		},
	}
	return l.Seq(ctx)
}
