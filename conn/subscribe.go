package conn

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix"
)

// SubscribeOptions configures a subscription.
type SubscribeOptions struct {
	// Start is where delivery starts (the zero value is latest). Earliest
	// or an offset need flag 0x0020 (event offsets): an older broker would
	// silently ignore the start position, so without the bit
	// felix.ErrNotAdvertised is returned.
	Start felix.StartPosition
	// Shard selects one shard of the stream (absent = 0).
	Shard felix.Opt[uint32]
	// QueueCapacity asks for a broker-side queue of that many published
	// batches (FeatureSubscribeQueue); 0 leaves the broker's default.
	QueueCapacity uint32
	// Payloads says how long an Event's Payload and Publisher stay valid:
	// by default (PayloadsUntilNext) until the next Next call, with
	// nothing allocated per frame; Event.Clone keeps one.
	Payloads PayloadMode
}

// Event is one delivered record.
type Event struct {
	// Payload is the record. It aliases the subscription's recycled frame
	// buffer: by default it is valid until the next Next call (the next
	// iteration of All); Clone copies an event to keep it (see
	// PayloadMode).
	Payload []byte
	// Offset is the record's log offset, valid when HasOffset (durable
	// streams, flag 0x0020 negotiated).
	Offset uint64
	// SkippedBefore counts offsets just below this record that hold no
	// deliverable event (flag 0x0800); set on the first record of a batch.
	SkippedBefore uint64
	// Publisher is the principal that published the record (flag 0x2000),
	// nil when not sent; valid as long as Payload.
	Publisher []byte
	// TimestampMicros is the append time in µs since the Unix epoch, valid
	// when HasTimestamp (flag 0x4000).
	TimestampMicros uint64
	// HasOffset says Offset is set, HasTimestamp that TimestampMicros is.
	// (The two flags are side by side so that an Event, returned by value
	// on every Next, is 96 bytes rather than 104.)
	HasOffset    bool
	HasTimestamp bool

	// rel and seq: the recycler of a PayloadsUntilRelease subscription
	// and the event's sequence number in it (Release).
	rel *recycler
	seq uint64
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
// *felix.ShardMovedError, *felix.LaggedError, *felix.StreamDeletedError or *felix.BrokerError.
// When the broker shut down and closed the connection before Next read the
// end of the event stream, the error matches ErrBrokerShutdown (events it
// had sent but Next had not read are lost; resume from the last offset on
// a new connection). After Close it returns ErrClosed. The terminal error
// is sticky.
//
// The event's Payload and Publisher are valid until the next call, unless
// SubscribeOptions.Payloads says otherwise; Event.Clone keeps one.
func (s *Subscription) Next(ctx context.Context) (ev Event, err error) {
	es := s.es
	if es.last != nil {
		poison(es.last) // poison mode: the previous payload is no longer valid
		es.last = nil
	}
	for {
		// A binary batch is taken apart one event per call (see pend):
		// no slice of events to fill per frame and copy out of again.
		if es.pending {
			ev = es.pend
			es.pending = es.nextEvent(&es.pend)
			if es.poison && es.mode == PayloadsUntilNext {
				es.last = ev.Payload
			}
			return ev, nil
		}
		if len(es.events) > 0 {
			ev = es.events[0]
			es.events = es.events[1:]
			if es.poison && es.mode == PayloadsUntilNext {
				es.last = ev.Payload
			}
			return ev, nil
		}
		if err := es.fill(ctx); err != nil {
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

// Close unsubscribes: it stops reading the event stream, which the broker
// sees as the end of the subscription. A Next blocked in another goroutine
// returns ErrClosed. It is idempotent.
func (s *Subscription) Close() error {
	s.es.close()
	return nil
}

// Subscribe subscribes to a stream on a new control stream: auth,
// subscribe, then the broker's subscribed and the event stream it opened
// (matched by event_stream_hello in either order). Errors from the broker
// are typed: *felix.CursorError, *felix.NotLeaderError, *felix.BrokerError.
func (c *Client) Subscribe(ctx context.Context, t felix.Topic, o SubscribeOptions) (*Subscription, error) {
	if o.Payloads > PayloadsUntilRelease {
		return nil, &felix.Error{Class: felix.ErrInvalidValue, Layout: "subscribe", Field: "payloads", Offset: -1, Detail: "unknown PayloadMode"}
	}
	cs, err := c.openStream(ctx)
	if err != nil {
		return nil, err
	}
	if o.Start.Kind != felix.StartLatest && !cs.caps.CanFlags(felix.FlagEventBatchOffsets) {
		cs.abort()
		return nil, notAdvertised("subscribe start position (flag 0x0020)")
	}
	m := subscribeMessage(t, o)
	if what := cs.caps.Unadvertised(m); what != "" { // the request table's gates
		cs.abort()
		return nil, notAdvertised(what)
	}
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
	s := c.startEventSub(es, false)
	s.mode = o.Payloads
	s.fr.SetFreshPayloads(o.Payloads == PayloadsOwned)
	if o.Payloads == PayloadsUntilRelease {
		s.rec = new(recycler)
	}
	return &Subscription{es: s, info: sub}, nil
}

// oneShot writes req, finishes the send side, reads the single answer and
// stops reading (the broker ends such a stream after its answer). On error
// the stream is torn down.
func (cs *clientStream) oneShot(ctx context.Context, req felix.Message) (felix.Message, error) {
	if err := writeCtx(ctx, func(ctx context.Context) error { return cs.w.writeMessage(ctx, req) }); err != nil {
		cs.abort()
		return nil, err
	}
	cs.s.Close()
	f, _, err := readFrameCtx(ctx, cs.r, cs.s)
	cs.seen(f, err)
	if err != nil {
		cs.s.CancelRead(0)
		if err == io.EOF {
			return nil, protocolErr("stream ended without an answer to %s", req.MessageType())
		}
		return nil, clientErr("read answer", err)
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

// eventSub is the client side of one event stream (a subscription or a
// cache watch). It has no goroutine: Next reads the stream itself, so a
// reader that stops calling Next stops reading and QUIC flow control slows
// the broker; nothing is dropped by the client. A read interrupted by ctx
// keeps its progress (felix.Reader), so the stream stays on a frame
// boundary.
type eventSub struct {
	c     *Client
	es    *eventStream
	fr    *felix.Reader
	watch bool

	closed atomic.Bool
	once   sync.Once

	// The read interrupt of the context Next was last called with: armed
	// once per context rather than once per frame (see arm).
	gmu    sync.Mutex
	gctx   context.Context
	gstop  func() bool
	gfired chan struct{} // capacity 1: the interrupt ran

	// Owned by the caller of Next.
	events  []Event // the events of a JSON frame not yet returned
	evbuf   []Event // backing array of NextFrame's events, reused
	cevents []CacheEvent
	err     error
	// view is the last binary event batch read (read), NextBatch's; cur
	// walks it for Next (fill), skipped is the SkippedBefore of its first
	// event until that is taken, and seq is the PayloadsUntilRelease
	// sequence number of the event taken last.
	view    felix.EventBatchView
	cur     felix.EventCursor
	skipped uint64
	seq     uint64
	// pend is the batch's next event, taken from cur one call ahead
	// (pending): Next returns a copy of an Event written during the
	// previous call rather than one it has just written field by field,
	// which the caller's copy of the result would read back at once with
	// wider loads than the stores (BenchmarkNextDecoded 20 -> 16 ns).
	pend    Event
	pending bool

	// Frame buffers (PayloadMode). A watch's events own their bytes (the
	// JSON decoder copies them), so it reads into one recycled buffer as
	// a PayloadsUntilNext subscription does.
	mode    PayloadMode
	rec     *recycler // PayloadsUntilRelease
	poison  bool      // poisonBuffers when the stream opened
	held    []byte    // poison mode: the last frame's buffer, out of the reader
	last    []byte    // poison mode: the payload Next returned last
	partial bool      // the last read was interrupted inside a frame
}

func (c *Client) startEventSub(es *eventStream, watch bool) *eventSub {
	s := &eventSub{c: c, es: es, watch: watch}
	// One recycled buffer unless the subscriber asks for another
	// PayloadMode (Subscribe).
	s.fr = felix.NewReader(es.s)
	s.fr.SetMaxPayload(c.cfg.MaxFrameBytes)
	s.poison = poisonBuffers.Load()
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.closed.Load() {
		s.closeStream()
		return s
	}
	c.subs[s] = struct{}{}
	return s
}

// fill reads the next frame (or the terminal error) into the buffers:
// Next's and Watch.Next's way to read, through read.
func (s *eventSub) fill(ctx context.Context) error {
	_, batch, err := s.read(ctx)
	if err != nil {
		return err
	}
	if batch {
		s.cur = s.view.Cursor()
		s.skipped = s.view.SkippedBefore
		if s.rec != nil {
			s.seq = s.rec.seq - uint64(s.view.Len()) // read counted the batch
		}
		s.pending = s.nextEvent(&s.pend)
	}
	return nil
}

// read is the one read path of an event stream (fill for Next and
// Watch.Next; NextFrame and NextBatch). It reads the next frame f, honouring
// the sticky end, Close and ctx (an interrupted read keeps its progress),
// and reports it to the hooks. A binary event batch is parsed into s.view
// and left whole (batch true); the events of a JSON frame go to s.events or
// s.cevents. A failed read, an invalid frame or a terminal frame ends the
// subscription: the error is returned, and sticky.
func (s *eventSub) read(ctx context.Context) (f felix.Frame, batch bool, err error) {
	if s.err != nil {
		return f, false, s.err
	}
	if s.closed.Load() {
		s.err = ErrClosed
		return f, false, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return f, false, err
	}
	s.arm(ctx)
	if !s.partial {
		s.recycle()
	}
	f, err = s.fr.ReadFrame()
	s.partial = false
	if err != nil {
		if s.closed.Load() {
			s.err = ErrClosed
			return f, false, ErrClosed
		}
		if ctx.Err() != nil && isTimeout(err) {
			s.disarm() // waits for the interrupt, clears the deadline
			s.partial = true
			return f, false, ctx.Err() // progress is kept; the next call resumes
		}
		s.end(err)
		return f, false, s.err
	}
	if h := s.c.cfg.Hooks; h != nil {
		h.frameRead(SideClient, int64(s.es.s.StreamID()), s.c.qc.RemoteAddr(), f)
	}
	if s.poison && s.rec == nil && s.mode != PayloadsOwned {
		s.held = s.fr.SwapBuffer(nil)
	}
	if f.Flags != 0 {
		if err := s.parseBatch(f); err != nil {
			s.end(err)
			return f, false, s.err
		}
		if s.rec != nil {
			s.rec.seq += uint64(s.view.Len())
			s.rec.hold(s.fr.SwapBuffer(nil), s.rec.seq)
		}
		return f, true, nil
	}
	m, err := felix.DecodeMessage(f.Payload)
	if err != nil {
		s.end(err)
		return f, false, s.err
	}
	it, last := s.jsonItem(m)
	if it.err != nil || last {
		if it.err == nil {
			it.err = protocolErr("terminal frame without error")
		}
		s.end(it.err)
		return f, false, s.err
	}
	s.events, s.cevents = it.events, it.cevents
	return f, false, nil
}

// recycle prepares the buffer the next frame is read into, between
// frames: in poison mode the previous frame's buffer is poisoned (its
// validity ended with this call) and a new one is read into; with
// PayloadsUntilRelease, a buffer the consumer has released is reused.
func (s *eventSub) recycle() {
	switch {
	case s.rec != nil:
		if b := s.rec.next(s.poison); b != nil {
			if old := s.fr.SwapBuffer(b); cap(old) > 0 && len(s.rec.spare) < maxSpare {
				s.rec.spare = append(s.rec.spare, old)
			}
		}
	case s.held != nil:
		poison(s.held)
		s.held = nil
	}
}

// parseBatch validates the binary frame f of the event stream and parses it
// into s.view: an event batch (no other binary frame is sent on an event
// stream, none on a cache watch's), whose legacy layout names this stream's
// subscription.
func (s *eventSub) parseBatch(f felix.Frame) error {
	if s.watch || f.Flags.Layout() != felix.LayoutEventBatch {
		return protocolErr("unexpected frame %s on an event stream", f.Flags)
	}
	v, err := felix.ParseEventBatch(f.Flags, f.Payload)
	if err != nil {
		return err
	}
	if v.Legacy() && v.SubscriptionID != s.es.id {
		return protocolErr("legacy batch for subscription %d on the stream of %d", v.SubscriptionID, s.es.id)
	}
	s.view = v
	return nil
}

// nextEvent writes the next event of the binary batch being walked (s.cur)
// into ev and returns true, or returns false when the batch has no more:
// the one place a binary batch's event becomes a conn Event (Next, rest).
// The fields of ev are written one by one: no Event-sized temporary is
// built and copied (a measurable share of Next at 100 B records).
func (s *eventSub) nextEvent(ev *Event) bool {
	var e felix.Event
	if !s.cur.Next(&e) {
		return false
	}
	v := &s.view
	ev.Payload, ev.Offset, ev.HasOffset = e.Payload, e.Offset, v.HasBaseOffset()
	ev.SkippedBefore, ev.Publisher = s.skipped, v.Publisher
	ev.TimestampMicros, ev.HasTimestamp = e.TimestampMicros, v.HasTimestamps()
	s.skipped = 0
	if s.rec != nil { // rel and seq are set in this mode only, on every event
		s.seq++
		ev.rel, ev.seq = s.rec, s.seq
	}
	return true
}

// rest takes the events of the batch that Next has not returned (pend,
// then s.cur), in a slice reused across calls (NextFrame encodes them
// anew). The events alias the frame's buffer (see PayloadMode).
func (s *eventSub) rest() []Event {
	evs := s.evbuf[:0]
	if s.pending {
		evs = append(evs, s.pend)
		s.pending = false
	}
	var ev Event
	for s.nextEvent(&ev) {
		evs = append(evs, ev)
	}
	s.evbuf = evs
	return evs
}

// arm makes reads honour ctx: when ctx ends, the stream's read deadline
// moves to now and the blocked read returns a timeout (ctxGuard's
// mechanism). The registration stays armed across calls with the same
// context, so a subscriber that passes one context to every Next pays one
// context.AfterFunc per subscription, not one per frame; a new context, a
// ctx interruption and the end of the subscription disarm it.
func (s *eventSub) arm(ctx context.Context) {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	if ctx == s.gctx {
		return
	}
	s.disarmLocked()
	if ctx.Done() == nil {
		return
	}
	if s.gfired == nil {
		s.gfired = make(chan struct{}, 1)
	}
	s.gctx = ctx
	s.gstop = context.AfterFunc(ctx, s.interrupt)
}

func (s *eventSub) interrupt() {
	_ = s.es.s.SetReadDeadline(time.Now())
	s.gfired <- struct{}{}
}

// disarm removes the armed interrupt; if it already ran, it waits for it
// and clears the read deadline, so the stream reads normally again.
func (s *eventSub) disarm() {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	s.disarmLocked()
}

func (s *eventSub) disarmLocked() {
	if s.gstop == nil {
		return
	}
	if !s.gstop() {
		<-s.gfired
		_ = s.es.s.SetReadDeadline(time.Time{})
	}
	s.gctx, s.gstop = nil, nil
}

// unregister drops the armed interrupt without waiting for it (Close may
// run beside a Next), so a long-lived context does not keep a closed
// subscription reachable.
func (s *eventSub) unregister() {
	s.gmu.Lock()
	defer s.gmu.Unlock()
	if s.gstop != nil {
		s.gstop()
		s.gctx, s.gstop = nil, nil
	}
}

// end records the terminal error and releases the stream.
func (s *eventSub) end(err error) {
	switch {
	case err == io.EOF:
	case errors.As(err, new(*felix.Error)), errors.Is(err, felix.ErrProtocol):
	case errors.As(err, new(*felix.BrokerError)), errors.As(err, new(*felix.ShardMovedError)), errors.As(err, new(*felix.LaggedError)),
		errors.As(err, new(*felix.StreamDeletedError)):
	default:
		if cause := context.Cause(s.c.Context()); isRemoteShutdown(cause) {
			// The broker reset the stream as it shut down, and its close
			// has arrived: the end is the shutdown, not a bare reset.
			err = cause
		}
		err = clientErr("read event stream", err)
	}
	s.err = err
	s.c.cfg.Hooks.lagged(err)
	s.closeStream()
}

// close is Close: stop reading (the broker sees the subscription end).
func (s *eventSub) close() {
	s.closed.Store(true)
	s.closeStream()
}

func (s *eventSub) closeStream() {
	s.once.Do(func() {
		s.unregister()
		s.es.s.CancelRead(0)
		s.c.subMu.Lock()
		delete(s.c.subs, s)
		s.c.subMu.Unlock()
	})
}

// item is what one JSON frame of an event stream carries (jsonItem).
type item struct {
	events  []Event
	cevents []CacheEvent
	err     error
}
