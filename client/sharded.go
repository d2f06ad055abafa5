package client

import (
	"context"
	"fmt"
	"iter"

	"github.com/flxproto/felix"
)

// ShardEvent is a record of a sharded subscription with its shard.
type ShardEvent struct {
	Shard uint32
	Event
}

// ShardedOptions configures a sharded subscription.
type ShardedOptions struct {
	// Start is where every shard starts that has no entry in From (zero
	// value: latest).
	Start felix.StartPosition
	// From resumes shards from their own offsets (shard → first offset to
	// deliver), e.g. a previous subscription's Offsets.
	From map[uint32]uint64
	// Buffer bounds the records buffered per shard ahead of the consumer
	// (0: DefaultShardEvents).
	Buffer int
}

// ShardedSubscription reads every shard of a stream: one resumable
// Subscription per shard, each following its own owner, merged into one
// iterator (order holds within a shard, not across shards). A shard whose
// subscription ends with an error is reported once as a *ShardLostError
// while the other shards keep delivering; Next returns io.EOF when every
// shard has ended. Next and All are not safe for concurrent use; Close
// may be called from any goroutine.
type ShardedSubscription struct {
	set shardSet[Event, *Subscription]
}

// SubscribeSharded asks the stream's shard count and subscribes to every
// shard. A stream the broker reports with 0 shards (unknown) is refused
// with ErrUnknownStream. A shard that cannot start (e.g. its From offset
// was trimmed: *felix.CursorError) is reported by Next as a lost shard
// while the others deliver; when no shard can start, the last shard's
// error is returned.
func (c *Client) SubscribeSharded(ctx context.Context, t Topic, o ShardedOptions) (*ShardedSubscription, error) {
	if err := c.checkTopic("subscribe_sharded", t); err != nil {
		return nil, err
	}
	v, err := c.StreamShards(ctx, t)
	if err != nil {
		return nil, err
	}
	n := v.Shards
	if n == 0 {
		return nil, fmt.Errorf("%w: %s/%s in tenant %q (check the names, or create the stream)", ErrUnknownStream, t.Namespace, t.Stream, t.TenantID)
	}
	ss := &ShardedSubscription{}
	ss.set.release = Event.Release // the consumer moved past the event
	err = ss.set.start(ctx, c, ss, "subscribe", t.Stream, n, o.Buffer, func(shard uint32) (*Subscription, uint64, bool, error) {
		so := SubscribeOptions{Start: o.Start, Shard: shard, Payloads: PayloadsUntilRelease}
		off, ok := o.From[shard]
		if ok {
			so.Start = felix.StartAt(off)
		}
		s, err := c.subscribe(ctx, t, so)
		if err == nil && !ok {
			off, ok = s.Offset() // where the broker said it starts
		}
		return s, off, ok, err
	})
	if err != nil {
		return nil, err
	}
	return ss, nil
}

// Shards returns the number of shards subscribed.
func (ss *ShardedSubscription) Shards() int { return len(ss.set.shards) }

// Next returns the next record of any shard, a *ShardLostError when a
// shard ended with an error (the others go on), io.EOF when every shard
// has ended. The event's Payload and Publisher are valid until the next
// call (Event.Clone keeps one): each shard's frames are recycled once the
// consumer has moved past their events.
func (ss *ShardedSubscription) Next(ctx context.Context) (ShardEvent, error) {
	shard, ev, err := ss.set.next(ctx, func(ev Event) (uint64, bool) { return ev.Offset, ev.HasOffset })
	if err != nil {
		return ShardEvent{}, err
	}
	return ShardEvent{Shard: shard, Event: ev}, nil
}

// All iterates over the records of every shard; a *ShardLostError is
// yielded and iteration goes on; it stops when every shard ended, ctx
// ends (its error is yielded) or the loop breaks.
func (ss *ShardedSubscription) All(ctx context.Context) iter.Seq2[ShardEvent, error] {
	return all(ctx, ss.Next, shardLost)
}

// Offsets returns, per shard, the offset after the last record Next
// returned (before any, the From offset given or where the broker said
// the shard's subscription starts): pass it as ShardedOptions.From to
// resume without a gap.
func (ss *ShardedSubscription) Offsets() map[uint32]uint64 { return ss.set.resumeOffsets() }

// Close ends every shard's subscription; it is idempotent.
func (ss *ShardedSubscription) Close() error { return ss.set.end(ss) }
