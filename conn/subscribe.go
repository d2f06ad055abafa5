package conn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"iter"
	"sync"

	"github.com/flxproto/felix"
)

// SubscribeOptions configures a subscription.
type SubscribeOptions struct {
	// Start is where delivery starts (the zero value is latest). Earliest
	// or an offset need flag 0x0020 (event offsets): an older broker would
	// silently ignore the start position, so without the bit
	// ErrNotAdvertised is returned.
	Start felix.StartPosition
	// Shard selects one shard of the stream (absent = 0).
	Shard felix.Opt[uint32]
	// QueueCapacity asks for a broker-side queue of that many published
	// batches (FeatureSubscribeQueue); 0 leaves the broker's default.
	QueueCapacity uint32
}

// Event is one delivered record.
type Event struct {
	// Payload is the record. The client never reuses its memory (each
	// batch is copied once off the stream), so it may be kept.
	Payload []byte
	// Offset is the record's log offset, valid when HasOffset (durable
	// streams, flag 0x0020 negotiated).
	Offset    uint64
	HasOffset bool
	// SkippedBefore counts offsets just below this record that hold no
	// deliverable event (flag 0x0800); set on the first record of a batch.
	SkippedBefore uint64
	// Publisher is the principal that published the record (flag 0x2000),
	// nil when not sent.
	Publisher []byte
	// TimestampMicros is the append time in µs since the Unix epoch, valid
	// when HasTimestamp (flag 0x4000).
	TimestampMicros uint64
	HasTimestamp    bool
}

// Subscription delivers the events of one subscribe. Next and All are not
// safe for concurrent use; Close may be called from any goroutine.
type Subscription struct {
	es   *eventSub
	info *felix.Subscribed
}

// ID returns the broker-assigned subscription id.
func (s *Subscription) ID() uint64 { return s.info.SubscriptionID }

// Info returns the broker's subscribed answer (start_offset, live_offset,
// queue_capacity when sent).
func (s *Subscription) Info() *felix.Subscribed { return s.info }

// Next returns the next event. It returns io.EOF when the broker ended the
// subscription cleanly; a terminal frame is returned as a typed error:
// *ShardMovedError, *LaggedError, *StreamDeletedError or *BrokerError.
// After Close it returns ErrClosed. The terminal error is sticky.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		if len(s.es.events) > 0 {
			ev := s.es.events[0]
			s.es.events = s.es.events[1:]
			return ev, nil
		}
		if err := s.es.fill(ctx); err != nil {
			return Event{}, err
		}
	}
}

// All iterates over the events until the subscription ends, ctx is
// cancelled or the loop breaks. A clean end (io.EOF) ends the loop without
// an error; any other error is yielded once, last.
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

// Close unsubscribes (stops reading the event stream, which the broker
// sees as the end of the subscription) and waits for the subscription's
// goroutine. It is idempotent.
func (s *Subscription) Close() error {
	s.es.close()
	return nil
}

// Subscribe subscribes to a stream on a new control stream: auth,
// subscribe, then the broker's subscribed and the event stream it opened
// (matched by event_stream_hello in either order). Errors from the broker
// are typed: *CursorError, *NotLeaderError, *BrokerError.
func (c *Client) Subscribe(ctx context.Context, t Topic, o SubscribeOptions) (*Subscription, error) {
	cs, err := c.openStream(ctx)
	if err != nil {
		return nil, err
	}
	if o.Start.Kind != felix.StartLatest && !cs.caps.CanFlags(felix.FlagEventBatchOffsets) {
		cs.abort()
		return nil, notAdvertised("subscribe start position (flag 0x0020)")
	}
	if o.QueueCapacity != 0 && !cs.caps.CanQueueCapacity() {
		cs.abort()
		return nil, notAdvertised("queue_capacity (FEATURE_SUBSCRIBE_QUEUE)")
	}
	m := subscribeMessage(t, o)
	ans, err := cs.oneShot(ctx, m)
	if err != nil {
		return nil, err
	}
	sub, ok := ans.(*felix.Subscribed)
	if !ok {
		return nil, answerError(ans, 0)
	}
	es, err := c.router.claim(ctx, sub.SubscriptionID)
	if err != nil {
		return nil, err
	}
	return &Subscription{es: c.startEventSub(es, false), info: sub}, nil
}

// oneShot writes req, finishes the send side, reads the single answer and
// stops reading (the broker ends such a stream after its answer). On error
// the stream is torn down.
func (cs *clientStream) oneShot(ctx context.Context, req felix.Message) (felix.Message, error) {
	if err := writeCtx(ctx, cs.s, func() error { return cs.w.writeMessage(req) }); err != nil {
		cs.abort()
		return nil, err
	}
	cs.s.Close()
	f, _, err := readFrameCtx(ctx, cs.r, cs.s)
	if err != nil {
		cs.s.CancelRead(0)
		if err == io.EOF {
			return nil, protocolErr("stream ended without an answer to %s", req.MessageType())
		}
		return nil, transportErr("read answer", err)
	}
	if f.Flags != 0 {
		cs.s.CancelRead(0)
		return nil, protocolErr("binary frame %s in answer to %s", f.Flags, req.MessageType())
	}
	m, err := felix.DecodeMessage(f.Payload)
	cs.s.CancelRead(0)
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (cs *clientStream) abort() {
	cs.s.CancelWrite(0)
	cs.s.CancelRead(0)
}

// eventSub reads one event stream in its own goroutine and hands decoded
// batches to Next through a bounded channel: when the reader is slow the
// channel fills, the goroutine stops reading and QUIC flow control slows
// the broker; nothing is dropped.
type eventSub struct {
	c     *Client
	es    *eventStream
	watch bool
	ch    chan item
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	// Owned by the reader of Next.
	events  []Event
	cevents []CacheEvent
	err     error
}

type item struct {
	events  []Event
	cevents []CacheEvent
	err     error
}

func (c *Client) startEventSub(es *eventStream, watch bool) *eventSub {
	s := &eventSub{c: c, es: es, watch: watch, ch: make(chan item, c.cfg.SubscriptionBuffer),
		stop: make(chan struct{}), done: make(chan struct{})}
	c.subMu.Lock()
	if c.closed.Load() {
		c.subMu.Unlock()
		es.s.CancelRead(0)
		close(s.done)
		s.once.Do(func() { close(s.stop) })
		s.err = ErrClosed
		return s
	}
	c.subs[s] = struct{}{}
	c.subMu.Unlock()
	c.wg.Add(1)
	go s.read()
	return s
}

// fill waits for the next batch (or the terminal error).
func (s *eventSub) fill(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	select {
	case it := <-s.ch:
		if it.err != nil {
			s.err = it.err
			return it.err
		}
		s.events, s.cevents = it.events, it.cevents
		return nil
	case <-s.stop:
		s.err = ErrClosed
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *eventSub) close() {
	s.once.Do(func() { close(s.stop) })
	s.es.s.CancelRead(0)
	<-s.done
}

// read is the goroutine that reads the event stream.
func (s *eventSub) read() {
	defer s.c.wg.Done()
	defer close(s.done)
	defer func() {
		s.es.s.CancelRead(0)
		s.c.subMu.Lock()
		delete(s.c.subs, s)
		s.c.subMu.Unlock()
	}()
	for {
		it, last := s.readItem()
		select {
		case s.ch <- it:
		case <-s.stop:
			return
		}
		if last {
			return
		}
	}
}

// readItem reads and decodes one frame. last reports a terminal item.
func (s *eventSub) readItem() (it item, last bool) {
	f, err := s.es.r.ReadFrame()
	if err != nil {
		if err == io.EOF {
			return item{err: io.EOF}, true
		}
		select {
		case <-s.stop:
			return item{err: ErrClosed}, true
		default:
		}
		var fe *felix.Error
		if errors.As(err, &fe) {
			return item{err: err}, true
		}
		return item{err: transportErr("read event stream", err)}, true
	}
	if f.Flags != 0 {
		if s.watch || f.Flags.Layout() != felix.LayoutEventBatch {
			return item{err: protocolErr("unexpected frame %s on an event stream", f.Flags)}, true
		}
		// The batch is copied once so its events can outlive the reader's
		// buffer; the views alias the copy.
		v, err := felix.ParseEventBatch(f.Flags, bytes.Clone(f.Payload))
		if err != nil {
			return item{err: err}, true
		}
		if v.Legacy() && v.SubscriptionID != s.es.id {
			return item{err: protocolErr("legacy batch for subscription %d on the stream of %d", v.SubscriptionID, s.es.id)}, true
		}
		evs := make([]Event, 0, v.Len())
		for e := range v.Events() {
			evs = append(evs, Event{Payload: e.Payload, Offset: e.Offset, HasOffset: v.HasBaseOffset(),
				Publisher: v.Publisher, TimestampMicros: e.TimestampMicros, HasTimestamp: v.HasTimestamps()})
		}
		if len(evs) > 0 {
			evs[0].SkippedBefore = v.SkippedBefore
		}
		return item{events: evs}, false
	}
	m, err := felix.DecodeMessage(f.Payload)
	if err != nil {
		return item{err: err}, true
	}
	return s.jsonItem(m)
}
