package api

import (
	"cmp"
	"context"
	"errors"
	"iter"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/grouploop"
)

// GroupRef names a consumer group on one shard of a stream. Group requests
// go to the shard's leader; a broker that does not lead the shard answers
// with a *felix.NotLeaderError naming it (client.Client re-sends there,
// without reporting it).
type GroupRef struct {
	felix.Topic
	Shard uint32
	Group string
}

// Group is a handle on a consumer group: records are pulled (Poll),
// claimed by the caller for a visibility timeout, and settled explicitly
// (Ack, Nack, DeadLetter). Every call is one request on a stream of its
// own. Consumer groups need felix.FeatureConsumerGroup; the dead-letter
// calls, claim control and admin calls need their own features (each call
// says which) and fail with felix.ErrNotAdvertised, without sending, when
// the broker did not advertise them.
//
// Through client.Client, polls, dead-letter listings, describes and seeks
// are re-sent after a lost connection (a record claimed by a poll whose
// answer was lost is redelivered after its visibility timeout, so nothing
// is lost). Settling calls (ack, nack, extend, dead letter, redrive,
// discard) and delete are not: when their outcome is unknown they return
// a *client.AmbiguousError, since a re-sent ack of an applied ack would be
// refused as stale_claim and a re-sent nack could release a later claim.
type Group struct {
	x   Calls
	ref GroupRef
}

// Group returns a handle on the consumer group ref. It sends nothing.
func (x Calls) Group(ref GroupRef) *Group { return &Group{x: x, ref: ref} }

// Ref returns the group's name and place.
func (g *Group) Ref() GroupRef { return g.ref }

// GroupRecord is one record handed out by a poll.
type GroupRecord struct {
	// Offset is the record's offset: the handle to settle it with.
	Offset uint64
	// Payload is the record, byte for byte.
	Payload []byte
	// Attempts counts the deliveries of this record, this one included
	// (0 when the broker did not report it).
	Attempts uint32
	// Publisher is the principal that published the record ("" unless the
	// client offered felix.FeatureGroupPublisher and the broker sent it).
	Publisher string
	// Timestamp is when the record was appended (µs since the epoch),
	// valid when HasTimestamp (the client offered
	// felix.FeatureRecordTimestamps).
	Timestamp    uint64
	HasTimestamp bool
	// SkippedBefore counts offsets just below Offset that hold no record
	// (only with felix.FeatureGroupSkipped).
	SkippedBefore uint64
}

// PollOptions shapes a poll.
type PollOptions struct {
	// Max is the most records to return (0 means 1; brokers cap it, at
	// 1000 upstream).
	Max uint32
	// Wait is how long the broker may wait for a record when none is ready
	// (0 answers at once; brokers cap it).
	Wait time.Duration
	// Visibility is how long the records stay claimed before they are
	// redelivered (0: the broker's default). Needs
	// felix.FeatureGroupClaimControl.
	Visibility time.Duration
	// Consumer names the polling consumer and Reclaim asks for its own
	// earlier claims back. Both need felix.FeatureGroupConsumer.
	Consumer string
	Reclaim  bool
}

// Poll claims up to o.Max records. Each carries its offset (to settle it
// with) and its attempt count. An empty result is an answer, not an error.
// An option whose feature the broker did not advertise fails with
// felix.ErrNotAdvertised and nothing is sent.
func (g *Group) Poll(ctx context.Context, o PollOptions) ([]GroupRecord, error) {
	r := g.ref
	m := &felix.GroupPoll{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream, Shard: r.Shard, Group: r.Group,
		MaxRecords: max(o.Max, 1), WaitMs: durMs(o.Wait), Reclaim: o.Reclaim,
		VisibilityMs: durMs(o.Visibility)}
	if o.Consumer != "" {
		m.Consumer = felix.Some(o.Consumer)
	}
	gr, err := do[*felix.GroupRecords](ctx, g.x, m)
	if err != nil {
		return nil, err
	}
	out := make([]GroupRecord, len(gr.Records))
	for i, r := range gr.Records {
		out[i] = GroupRecord{Offset: r.Offset, Payload: r.Payload, Attempts: r.Attempts, Publisher: r.Publisher.V,
			Timestamp: r.TimestampMicros.V, HasTimestamp: r.TimestampMicros.Set, SkippedBefore: r.SkippedBefore}
	}
	return out, nil
}

// settle sends a request answered by cache_ok.
func (g *Group) settle(ctx context.Context, m felix.Message) error {
	_, err := do[*felix.CacheOK](ctx, g.x, m)
	return err
}

// Ack settles a claimed record: it is not delivered again. An offset the
// group holds no claim on is refused with a *BrokerError of code
// felix.CodeStaleClaim.
func (g *Group) Ack(ctx context.Context, offset uint64) error {
	r := g.ref
	return g.settle(ctx, &felix.GroupAck{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream, Shard: r.Shard,
		Group: r.Group, Offset: offset})
}

// NackOptions shapes a nack. Both fields need
// felix.FeatureGroupClaimControl when set.
type NackOptions struct {
	// Delay postpones the redelivery (0: redeliver at once).
	Delay time.Duration
	// Attempts names the delivery being handed back (GroupRecord.Attempts),
	// so that a nack for a claim that has since timed out and been handed
	// to someone else is refused (stale_claim) instead of releasing their
	// claim. 0 means whatever claim stands.
	Attempts uint32
}

// Nack hands a claimed record back: it is redelivered at once (or after
// o.Delay) with a higher attempt count, or set aside as a dead letter when
// it reached the broker's attempt bound.
func (g *Group) Nack(ctx context.Context, offset uint64, o NackOptions) error {
	r := g.ref
	return g.settle(ctx, &felix.GroupNack{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream, Shard: r.Shard,
		Group: r.Group, Offset: offset, DelayMs: durMs(o.Delay), Attempts: o.Attempts})
}

// Extend keeps a claim for another d (from now) and returns the time the
// broker granted (it may cap it). attempts names the delivery
// (GroupRecord.Attempts). Needs felix.FeatureGroupClaimControl; d must be
// at least a millisecond.
func (g *Group) Extend(ctx context.Context, offset uint64, attempts uint32, d time.Duration) (time.Duration, error) {
	r := g.ref
	m := &felix.GroupExtend{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream, Shard: r.Shard, Group: r.Group,
		Offset: offset, Attempts: attempts, ExtendMs: durMs(d)}
	ge, err := do[*felix.GroupExtended](ctx, g.x, m)
	if err != nil {
		return 0, err
	}
	return msDur(ge.VisibleMs), nil
}

// DeadLetter sets a claimed record aside at once. Needs
// felix.FeatureGroupClaimControl.
func (g *Group) DeadLetter(ctx context.Context, offset uint64) error {
	r := g.ref
	return g.settle(ctx, &felix.GroupDeadLetter{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream,
		Shard: r.Shard, Group: r.Group, Offset: offset})
}

// DeadLetters lists the offsets set aside, lowest first. Needs
// felix.FeatureGroupDeadLetters.
func (g *Group) DeadLetters(ctx context.Context) ([]uint64, error) {
	r := g.ref
	l, err := do[*felix.GroupDeadLetterList](ctx, g.x, &felix.GroupDeadLetters{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream,
		Shard: r.Shard, Group: r.Group})
	if err != nil {
		return nil, err
	}
	return l.Offsets, nil
}

// Redrive puts a dead letter back in the queue with its attempts reset.
// Needs felix.FeatureGroupDeadLetters.
func (g *Group) Redrive(ctx context.Context, offset uint64) error {
	r := g.ref
	return g.settle(ctx, &felix.GroupRedrive{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream,
		Shard: r.Shard, Group: r.Group, Offset: offset})
}

// Discard drops a dead letter for good. Needs felix.FeatureGroupDeadLetters.
func (g *Group) Discard(ctx context.Context, offset uint64) error {
	r := g.ref
	return g.settle(ctx, &felix.GroupDiscard{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream,
		Shard: r.Shard, Group: r.Group, Offset: offset})
}

// GroupPosition is the answer to Seek.
type GroupPosition struct {
	// Offset is the group's position after the call.
	Offset uint64
	// Moved is false when ifNew left an existing group where it was.
	Moved bool
}

// Seek moves the group's cursor to start; with ifNew only a group that
// does not exist yet is placed. Needs felix.FeatureGroupAdmin.
func (g *Group) Seek(ctx context.Context, start felix.StartPosition, ifNew bool) (GroupPosition, error) {
	r := g.ref
	p, err := do[*felix.GroupPosition](ctx, g.x, &felix.GroupSeek{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream,
		Shard: r.Shard, Group: r.Group, Start: start, IfNew: ifNew})
	if err != nil {
		return GroupPosition{}, err
	}
	return GroupPosition{Offset: p.Offset, Moved: p.Moved}, nil
}

// GroupInfo describes a group.
type GroupInfo struct {
	// Committed is the group's committed position, valid when HasCommitted
	// (false: the group has no cursor yet).
	Committed    uint64
	HasCommitted bool
	// Tail is the shard's next offset.
	Tail uint64
	// InFlight counts claimed records, Owed records waiting for delivery,
	// DeadLetters records set aside.
	InFlight, Owed, DeadLetters uint64
}

// Describe reports the group's position and counts. Needs
// felix.FeatureGroupAdmin.
func (g *Group) Describe(ctx context.Context) (GroupInfo, error) {
	r := g.ref
	gi, err := do[*felix.GroupInfo](ctx, g.x, &felix.GroupDescribe{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream,
		Shard: r.Shard, Group: r.Group})
	if err != nil {
		return GroupInfo{}, err
	}
	return GroupInfo{Committed: gi.Committed.V, HasCommitted: gi.Committed.Set, Tail: gi.Tail, InFlight: gi.InFlight,
		Owed: gi.Owed, DeadLetters: gi.DeadLetters}, nil
}

// Delete removes the group and reports whether it existed. Needs
// felix.FeatureGroupAdmin.
func (g *Group) Delete(ctx context.Context) (existed bool, err error) {
	r := g.ref
	d, err := do[*felix.GroupDeleted](ctx, g.x, &felix.GroupDelete{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream,
		Shard: r.Shard, Group: r.Group})
	if err != nil {
		return false, err
	}
	return d.Existed, nil
}

// Delivery is a record handed to the body of a Records loop, with the
// calls to settle it. A delivery the body leaves unsettled is acked when
// the body continues the loop.
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

// Nack hands the record back for redelivery after delay (0: at once). It
// names the delivery's attempt count, so that a nack after the claim timed
// out cannot release someone else's claim; to a broker that did not
// advertise felix.FeatureGroupClaimControl (which refuses the attempt
// count before anything is sent) an immediate nack goes without it.
func (d *Delivery) Nack(ctx context.Context, delay time.Duration) error {
	d.settled = true
	err := d.g.Nack(ctx, d.Offset, NackOptions{Delay: delay, Attempts: d.Attempts})
	if errors.Is(err, felix.ErrNotAdvertised) && delay == 0 && d.Attempts != 0 {
		err = d.g.Nack(ctx, d.Offset, NackOptions{})
	}
	return err
}

// DeadLetter sets the record aside (see Group.DeadLetter).
func (d *Delivery) DeadLetter(ctx context.Context) error {
	d.settled = true
	return d.g.DeadLetter(ctx, d.Offset)
}

// Records is a consumer loop: it polls (with the first of opts, if any:
// o.Max records per poll, default 16; o.Wait per poll, default 1 s, so
// the broker long-polls) and yields every record (pausing briefly after an
// empty poll). A record the loop body leaves unsettled is acked when the
// body continues; when the body breaks out, that record and the records of
// the same poll not yet yielded are nacked, so they are redelivered at
// once instead of after the visibility timeout. A failed poll or ack is
// yielded as an error; after a failed poll the loop ends. The loop ends
// when ctx ends (yielding ctx's error).
//
//	for d, err := range g.Records(ctx) {
//		if err != nil {
//			return err
//		}
//		if err := handle(d.Payload); err != nil {
//			d.Nack(ctx, 0) // redeliver
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
			t := time.NewTimer(grouploop.EmptyPollPause)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	}
	return l.Seq(ctx)
}
