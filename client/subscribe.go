package client

import (
	"context"
	"fmt"
	"iter"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// Event is one delivered record (Offset valid when HasOffset).
type Event = conn.Event

// SubscribeOptions configures a resumable subscription.
type SubscribeOptions struct {
	// Start is where delivery starts (zero value: latest). It is carried
	// unchanged through every redirect hop.
	Start felix.StartPosition
	// Shard selects the shard (0 by default).
	Shard uint32
	// QueueCapacity asks for a broker-side queue (0: broker default).
	QueueCapacity uint32
	// LagAsError ends the subscription with the *felix.LaggedError when the
	// broker reports it fell behind (subscription_lagged), instead of
	// resuming; its ResumeFrom is then the offset to resume at without a
	// gap (the one after the last delivered record).
	LagAsError bool
	// Payloads says how long an Event's Payload and Publisher stay valid:
	// by default until the next Next call (frames are read into a
	// recycled buffer); Event.Clone keeps one (see PayloadMode).
	Payloads PayloadMode
}

// Subscription is a resumable subscription to one shard of a stream. When
// its event stream ends because the connection was lost, the broker shut
// down or the shard moved (shard_moved), it resubscribes on the shard's
// owner at the offset after the last record it delivered (no gap, no
// duplicate: records below that offset are dropped should a broker resend
// them); before any delivery, at the start_offset the broker answered
// (so an idle subscription misses nothing written while it reconnects).
// After shard_moved it resumes at max(last delivered + 1, resume_from)
// (the offsets in between are reported as dropped, like any other gap),
// at resume_from before any delivery, and at the new owner's live tail
// when the broker sent no resume_from (an in-memory stream) and no offset
// is known, whatever Start said. After subscription_lagged it resumes
// gaplessly at the last delivered + 1 (resume_from before any delivery)
// and reports NoticeLagged with that offset; LagAsError ends it instead.
// A delivered record beyond the previous + 1 + its SkippedBefore is
// reported as NoticeDropped with the missing range, and counted
// (Dropped).
//
// An event stream ended by an error with retry_after is resubscribed
// only after that wait. Resumes in a row that deliver nothing (a broker
// ending every event stream at once) back off from the second one, each
// wait reported as a NoticeRetry, and are bounded by Config.MaxAttempts;
// then it ends with an error that says so and wraps the last cause. A
// start position that cannot be served (*felix.CursorError), a deleted
// stream and terminal broker errors end it with that typed error; it
// never ends quietly on a dead connection. It ends with io.EOF (All just
// stops) only when a live broker finished the event stream. How each end
// is judged is the client's decision table (see RetryClassOf).
//
// Next and All are not safe for concurrent use; Close may be called from
// any goroutine.
type Subscription struct {
	st    stream[Event, *conn.Subscription]
	topic Topic
	o     SubscribeOptions
	info  *felix.Subscribed // the latest subscribed answer, under st.mu
}

// Subscribe subscribes to ONE shard of a stream, o.Shard (0 by default;
// see Subscription). A stream with more than one shard spreads keyed
// records over its shards: to read every record use SubscribeSharded.
// Subscribe of shard 0 of such a stream says so loudly: it emits a
// NoticeOneShard (logged at Warn) naming the stream and its shard count
// (the count is asked once per stream and cached; a broker that does not
// advertise stream_shards is not asked). The request goes to the shard's
// owner: redirects are followed with the original request, so an explicit
// start offset survives every hop.
func (c *Client) Subscribe(ctx context.Context, t Topic, o SubscribeOptions) (*Subscription, error) {
	s, err := c.subscribe(ctx, t, o)
	if err == nil && o.Shard == 0 {
		c.warnOneShard(ctx, t)
	}
	return s, err
}

// warnOneShard emits NoticeOneShard when t has more than one shard; the
// look-up is bounded by one dial timeout and its failure ignored.
func (c *Client) warnOneShard(ctx context.Context, t Topic) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	info, ok := c.shardInfo(ctx, t)
	if !ok || info.shards <= 1 {
		return
	}
	c.emit(Notice{Kind: NoticeOneShard, Op: "subscribe", Stream: t.Stream, Count: uint64(info.shards),
		Detail: fmt.Sprintf("stream %s/%s has %d shards: this subscription reads shard 0 only (use SubscribeSharded to read every shard, or set SubscribeOptions.Shard)", t.Namespace, t.Stream, info.shards)})
}

// subscribe is Subscribe without the one-shard warning (a sharded
// subscription reads every shard).
func (c *Client) subscribe(ctx context.Context, t Topic, o SubscribeOptions) (*Subscription, error) {
	if err := c.checkTopic("subscribe", t); err != nil {
		return nil, err
	}
	s := &Subscription{topic: t, o: o}
	s.st = stream[Event, *conn.Subscription]{c: c, prepare: s.prepare, offset: eventOffset,
		pos: resumer{c: c, op: "subscribe", lagAsError: o.LagAsError, detectDrops: true,
			key: ownerKey{kind: felix.ShardKindStream, tenant: t.TenantID, namespace: t.Namespace, name: t.Stream, shard: o.Shard}},
		opened: func(sub *conn.Subscription) (uint64, bool) {
			s.info = sub.Info()
			return s.info.StartOffset.V, s.info.StartOffset.Set
		}}
	if err := s.st.begin(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

// prepare returns how to subscribe at the resumer's position (o.Start
// while it knows none).
func (s *Subscription) prepare(_ bool, cause error) (func(context.Context, *conn.Client) (*conn.Subscription, error), error) {
	start, err := s.st.pos.start(s.o.Start, cause)
	if err != nil {
		return nil, err
	}
	co := conn.SubscribeOptions{Start: start, QueueCapacity: s.o.QueueCapacity, Payloads: s.o.Payloads}
	if s.o.Shard != 0 {
		co.Shard = felix.Some(s.o.Shard)
	}
	return func(ctx context.Context, cc *conn.Client) (*conn.Subscription, error) {
		return cc.Subscribe(ctx, s.topic, co)
	}, nil
}

// eventOffset returns a record's offset, if it has one.
func eventOffset(ev Event) (off, skipped uint64, ok bool) {
	return ev.Offset, ev.SkippedBefore, ev.HasOffset
}

// Info returns the broker's subscribed answer to the latest subscribe of
// this subscription (the first one until it resumes): its start_offset
// says where delivery began (for earliest, the oldest retained record),
// live_offset where the live tail was.
func (s *Subscription) Info() *felix.Subscribed {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.info
}

// Offset returns the offset the subscription would resume at (the one
// after the last delivered record; before any, where the broker said the
// subscription starts, or its resume_from after a shard_moved or
// subscription_lagged); ok is false while it has no position of its own.
func (s *Subscription) Offset() (next uint64, ok bool) { return s.st.pos.at() }

// Dropped returns how many offsets were found missing between delivered
// records (see NoticeDropped). It is safe to call from any goroutine.
func (s *Subscription) Dropped() uint64 { return s.st.pos.dropped.Load() }

// Next returns the next record. See Subscription for how it ends.
func (s *Subscription) Next(ctx context.Context) (Event, error) { return s.st.next(ctx) }

// All iterates over the records until the subscription ends, ctx ends or
// the loop breaks; a clean end (io.EOF) just stops, any other error is
// yielded once, last.
func (s *Subscription) All(ctx context.Context) iter.Seq2[Event, error] { return all(ctx, s.Next, nil) }

// Close ends the subscription; it is idempotent. A Next blocked in another
// goroutine returns ErrClosed.
func (s *Subscription) Close() error {
	return s.st.end(s)
}

// brokerAt returns the known broker at addr, nil when none.
func (c *Client) brokerAt(addr string) *broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[addr]
}

// probe reports whether the broker at addr still takes new streams (nil)
// on the client's current connection to it.
func (c *Client) probe(ctx context.Context, addr string) error {
	b := c.brokerAt(addr)
	if b == nil {
		return ErrClosed
	}
	b.mu.Lock()
	cc := b.cc
	b.mu.Unlock()
	if cc == nil || cc.Context().Err() != nil {
		return conn.ErrClosed
	}
	return cc.Probe(ctx)
}

// where returns the broker the current event stream is on.
func (x *Subscription) where() string { return x.st.where() }
