package client

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"
	"sync/atomic"

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
}

// Subscription is a resumable subscription to one shard of a stream. When
// its event stream ends because the connection was lost, the broker shut
// down or the shard moved (shard_moved), it resubscribes on the shard's
// owner at the offset after the last record it delivered (no gap, no
// duplicate: records below that offset are dropped should a broker resend
// them). After shard_moved it resumes at max(last delivered + 1,
// resume_from), at resume_from before any delivery, and at the new owner's
// live tail when the broker sent no resume_from (an in-memory stream) and
// no offset is known, whatever Start said. After subscription_lagged it
// resumes gaplessly at the last delivered + 1 (resume_from before any
// delivery) and reports NoticeLagged with that offset; LagAsError ends it
// instead. A delivered record beyond the previous + 1 + its
// SkippedBefore is reported as NoticeDropped with the missing range, and
// counted (Dropped).
//
// Resumes in a row that deliver nothing (a broker ending every event
// stream at once) are bounded by Config.MaxAttempts, with backoff; then
// it ends with the last cause. A start position that cannot be served
// (*felix.CursorError), a deleted stream and terminal broker errors end it
// with that typed error; it never ends quietly on a dead connection. It ends with io.EOF (All just
// stops) only when a live broker finished the event stream.
//
// Next and All are not safe for concurrent use; Close may be called from
// any goroutine.
type Subscription struct {
	c     *Client
	topic Topic
	o     SubscribeOptions
	pos   resumer
	addr  string

	mu     sync.Mutex
	cur    *conn.Subscription
	info   *felix.Subscribed
	closed atomic.Bool
	err    error
}

// Subscribe subscribes to one shard of a stream (see Subscription). The
// request goes to the shard's owner: redirects are followed with the
// original request, so an explicit start offset survives every hop.
func (c *Client) Subscribe(ctx context.Context, t Topic, o SubscribeOptions) (*Subscription, error) {
	if err := c.checkTopic("subscribe", t); err != nil {
		return nil, err
	}
	s := &Subscription{c: c, topic: t, o: o}
	s.pos = resumer{c: c, op: "subscribe", lagAsError: o.LagAsError, detectDrops: true,
		key: ownerKey{kind: felix.ShardKindStream, tenant: t.TenantID, namespace: t.Namespace, name: t.Stream, shard: o.Shard}}
	if err := s.open(ctx, o.Start, nil); err != nil {
		return nil, err
	}
	if !c.track(s) {
		s.Close()
		return nil, ErrClosed
	}
	return s, nil
}

// open subscribes from start on the shard owner.
func (s *Subscription) open(ctx context.Context, start felix.StartPosition, cause error) error {
	k := s.pos.key
	co := conn.SubscribeOptions{Start: start, QueueCapacity: s.o.QueueCapacity}
	if s.o.Shard != 0 {
		co.Shard = felix.Some(s.o.Shard)
	}
	var sub *conn.Subscription
	var addr string
	err := s.c.run(ctx, call{op: "subscribe", key: &k, safe: true}, func(ctx context.Context, cc *conn.Client, b *broker) error {
		var err error
		sub, err = cc.Subscribe(ctx, s.topic, co)
		addr = b.addr
		return err
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		sub.Close()
		return ErrClosed
	}
	s.cur, s.addr, s.info = sub, addr, sub.Info()
	s.mu.Unlock()
	s.pos.began(s.info.StartOffset.V, s.info.StartOffset.Set)
	if cause != nil {
		s.c.emit(Notice{Kind: NoticeResumed, Op: "subscribe", Addr: addr, Stream: s.topic.Stream, Shard: s.o.Shard, Offset: start.Offset, Err: cause})
	}
	return nil
}

// Info returns the broker's subscribed answer to the latest subscribe of
// this subscription (the first one until it resumes): its start_offset
// says where delivery began (for earliest, the oldest retained record),
// live_offset where the live tail was.
func (s *Subscription) Info() *felix.Subscribed {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// Offset returns the offset the subscription would resume at (the one
// after the last delivered record, or the broker's resume_from after a
// shard_moved or subscription_lagged before any); ok is false while it has
// no position of its own.
func (s *Subscription) Offset() (next uint64, ok bool) { return s.pos.at() }

// Dropped returns how many offsets were found missing between delivered
// records (see NoticeDropped). It is safe to call from any goroutine.
func (s *Subscription) Dropped() uint64 { return s.pos.dropped.Load() }

// Next returns the next record. See Subscription for how it ends.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		if s.err != nil {
			return Event{}, s.err
		}
		if s.closed.Load() {
			return Event{}, ErrClosed
		}
		s.mu.Lock()
		cur := s.cur
		s.mu.Unlock()
		if cur == nil {
			if err := s.resume(ctx, nil); err != nil {
				return Event{}, err
			}
			continue
		}
		ev, err := cur.Next(ctx)
		if err == nil {
			if ev.HasOffset {
				if !s.pos.deliver(s.addr, ev.Offset, ev.SkippedBefore) {
					continue // already delivered (a resend after a resume)
				}
			} else {
				s.pos.noOff = true
			}
			return ev, nil
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return Event{}, err
		}
		if s.closed.Load() {
			return Event{}, ErrClosed
		}
		if err := s.handleEnd(ctx, cur, err); err != nil {
			if ctx.Err() == nil {
				s.err = err
			}
			return Event{}, err
		}
	}
}

// handleEnd decides, after cur ended with err, whether to resume (nil) or
// end the subscription with an error (the resumer judges).
func (s *Subscription) handleEnd(ctx context.Context, cur *conn.Subscription, err error) error {
	cur.Close()
	s.mu.Lock()
	s.cur = nil
	addr := s.addr
	s.mu.Unlock()
	if end := s.pos.ended(ctx, addr, err); end != nil {
		return end
	}
	return s.resume(ctx, err)
}

// resume resubscribes where the resumer says.
func (s *Subscription) resume(ctx context.Context, cause error) error {
	start, err := s.pos.start(s.o.Start, cause)
	if err != nil {
		return err
	}
	return s.open(ctx, start, cause)
}

// All iterates over the records until the subscription ends, ctx ends or
// the loop breaks; a clean end (io.EOF) just stops, any other error is
// yielded once, last.
func (s *Subscription) All(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			ev, err := s.Next(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(Event{}, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// Close ends the subscription; it is idempotent. A Next blocked in another
// goroutine returns ErrClosed.
func (s *Subscription) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur != nil {
		cur.Close()
	}
	s.c.untrack(s)
	return nil
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
