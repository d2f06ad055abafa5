package engine

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/flxproto/felix"
)

// StartKind says where a subscription starts.
type StartKind uint8

// Start kinds (StartPosition on the wire).
const (
	StartLatest StartKind = iota
	StartEarliest
	StartOffset
)

// Start is a subscription start position.
type Start struct {
	Kind   StartKind
	Offset uint64 // for StartOffset
}

// SubscribeRequest opens a subscription on one shard of a stream.
type SubscribeRequest struct {
	Topic
	// Shard selects the shard (0 when the request named none).
	Shard uint32
	// Start is where delivery starts (the zero value is latest).
	Start Start
	// QueueCapacity is the queue_capacity asked for, in published batches;
	// 0 takes the default, larger values are clamped to the maximum.
	QueueCapacity int
	// Mods are the event-batch modifier flags the client offered; each
	// delivered frame carries only those that apply.
	Mods felix.Flags
	// LagReport ends the subscription with a Lagged delivery at its first
	// queue drop (the client negotiated subscription_lagged and offsets).
	// It only has an effect on durable streams (live batches of ephemeral
	// streams have no offset to resume from).
	LagReport bool
	// ID is a client-chosen subscription id; 0 lets the engine assign one.
	ID uint64
	// Notify, when set, is called each time the subscription may have
	// become ready (a batch queued, a lag report, a drain, Close), from
	// the goroutine that made it so, possibly under an engine lock: it must
	// not block nor call back into the engine. A consumer driven by it
	// calls TryNext until that says nothing is ready, instead of holding a
	// goroutine in Next.
	Notify func()
}

// SubscribeInfo describes an opened subscription (the subscribed answer).
type SubscribeInfo struct {
	// ID is the subscription id.
	ID uint64
	// Durable is true when the stream is durable (every delivery carries
	// offsets); on an ephemeral stream only replayed batches do.
	Durable bool
	// StartOffset is the first offset that will be delivered; LiveOffset is
	// the tail when the subscription was opened (history ends there). On
	// an ephemeral stream they are ring sequence numbers (the subscribed
	// answer carries them for durable streams only, as upstream's does).
	StartOffset, LiveOffset uint64
	// QueueCapacity is the granted queue capacity.
	QueueCapacity int
}

// Delivery is what Subscription.Next returns: a batch, or the terminal lag
// report.
type Delivery struct {
	// Batch is the delivered batch (nil for a lag report). It is shared:
	// do not modify it.
	Batch *Batch
	// Frame is Batch encoded as the 0x0004 event frame with this
	// subscriber's modifiers, shared with other subscribers: do not modify.
	Frame []byte
	// Lagged is true for the terminal lag report; ResumeFrom is then the
	// first offset the subscriber did not receive.
	Lagged     bool
	ResumeFrom uint64
	// Drained is true for the terminal delivery of a subscription that
	// Engine.Drain ended with records undelivered; ResumeFrom is then the
	// first undelivered offset when HasResume (durable streams).
	Drained   bool
	HasResume bool

	pinned *Batch // Batch, pinned until Release (nil: nothing to release)
}

// Release says the caller is done with d.Frame (written, or abandoned):
// once every subscriber holding the batch released it, the frame's buffer
// is reused for a later batch, so d.Frame and d.Batch must not be used
// after Release. It is idempotent. A delivery never released only keeps
// its frame from being reused (the collector frees it).
func (d *Delivery) Release() {
	if b := d.pinned; b != nil {
		d.pinned, d.Frame = nil, nil
		b.unpin()
	}
}

// Subscription is one subscriber of one shard. Next and TryNext must be
// called by one goroutine at a time; Close may be called from any.
type Subscription struct {
	e         *Engine
	sh        *shard
	info      SubscribeInfo
	mods      felix.Flags
	lagReport bool
	notify    func() // SubscribeRequest.Notify, or nil

	q        chan *Batch
	queued   atomic.Int64  // bytes of the batches in q (queue_bytes.go)
	dropped  atomic.Uint64 // records dropped from this subscription's queue
	maxBytes int64
	lagged   chan struct{}
	lagOnce  sync.Once   // closes lagged (closeLagged)
	evicted  atomic.Bool // its queue was taken back for another tenant (queue_bytes.go)
	// closedFull: Close gave back queued batches (set before done is
	// closed), so the end of delivery lost records.
	closedFull atomic.Bool
	done       chan struct{}
	once       sync.Once

	// guarded by sh.mu
	stopped    bool
	resumeFrom uint64

	// consumer side (Next's goroutine only)
	hist, histEnd uint64
	histPage      *Batch // the last history page, refilled once released
	terminal      bool
	liveNext      uint64 // offset after the last live batch delivered

	// drain state (drain.go)
	drained     chan struct{}
	handedOut   atomic.Bool // Next returned a batch and was not called again yet
	histPending atomic.Bool // history not fully read
}

// Subscribe opens a subscription. Start positions outside a shard's
// retained range (a durable log, or an ephemeral shard's replay ring) fail
// with *CursorError; an unknown shard or an unknown stream with *Error.
func (e *Engine) Subscribe(req SubscribeRequest) (*Subscription, SubscribeInfo, error) {
	sh, err := e.shard(req.Topic, req.Shard)
	if err != nil {
		return nil, SubscribeInfo{}, err
	}
	durable := sh.st.cfg.Durable
	capacity := req.QueueCapacity
	if capacity <= 0 {
		capacity = e.cfg.DefaultQueueCapacity
	}
	capacity = min(capacity, e.cfg.MaxQueueCapacity)
	id := req.ID
	if id == 0 {
		id = e.newID()
	}
	s := &Subscription{
		e: e, sh: sh, mods: req.Mods & felix.EventModifierMask, lagReport: req.LagReport && durable,
		q: make(chan *Batch, capacity), lagged: make(chan struct{}), done: make(chan struct{}),
		maxBytes: e.cfg.SubscriberQueueBytes, drained: make(chan struct{}), notify: req.Notify,
	}
	sh.mu.Lock()
	oldest, tail := sh.bounds()
	start := tail
	switch req.Start.Kind { // a durable log or an ephemeral replay ring
	case StartEarliest:
		start = oldest
	case StartOffset:
		start = req.Start.Offset
		if start < oldest {
			sh.mu.Unlock()
			return nil, SubscribeInfo{}, &CursorError{Reason: CursorTooOld, Requested: start, Available: oldest}
		}
		if start > tail {
			sh.mu.Unlock()
			return nil, SubscribeInfo{}, &CursorError{Reason: CursorInFuture, Requested: start, Available: tail}
		}
	}
	if !e.register(s) {
		sh.mu.Unlock()
		return nil, SubscribeInfo{}, errorf(felix.CodeDraining, "broker shutting down")
	}
	s.hist, s.histEnd, s.liveNext = start, tail, tail
	s.histPending.Store(start < tail)
	s.info = SubscribeInfo{ID: id, Durable: durable, StartOffset: start, LiveOffset: tail, QueueCapacity: capacity}
	sh.subs[s] = struct{}{}
	sh.mu.Unlock()
	sh.st.ten.readerOpened(e)
	e.st.activeSubs.Add(1)
	e.st.totalSubs.Add(1)
	return s, s.info, nil
}

// Info returns what Subscribe returned.
func (s *Subscription) Info() SubscribeInfo { return s.info }

// ID returns the subscription id.
func (s *Subscription) ID() uint64 { return s.info.ID }

// Topic returns the subscribed stream's names, as the engine holds them:
// keep these rather than the request's, so that a subscription holds no
// copy of names the stream already has.
func (s *Subscription) Topic() Topic { return s.sh.st.topic }

// offer queues a live batch without blocking. The caller holds sh.mu.
func (s *Subscription) offer(b *Batch) {
	if s.stopped || s.evicted.Load() {
		return
	}
	if s.admit(b) {
		b.hold(s.e, s.sh.st.ten)
		s.queued.Add(b.cost())
		select {
		case s.q <- b:
			s.wake()
			return
		default:
		}
		s.queued.Add(-b.cost())
		b.release(s.e)
	}
	s.e.st.droppedBatches.Add(1)
	s.e.st.droppedRecords.Add(uint64(len(b.Payloads)))
	s.dropped.Add(uint64(len(b.Payloads)))
	if s.lagReport && b.HasOffsets {
		s.stopLocked(b.BaseOffset)
	}
}

// stopLocked ends live delivery with a lag report resuming at resume. The
// caller holds sh.mu.
func (s *Subscription) stopLocked(resume uint64) {
	s.stopped = true
	s.resumeFrom = resume
	delete(s.sh.subs, s)
	s.closeLagged()
}

// wake calls the consumer's Notify, if any, once s may have become ready.
func (s *Subscription) wake() {
	if s.notify != nil {
		s.notify()
	}
}

// Next returns the next delivery: history first (for subscriptions that
// started before the tail), then live batches in order. After a lag report
// or Close it returns ErrClosed; it returns ctx.Err() if ctx ends first.
func (s *Subscription) Next(ctx context.Context) (Delivery, error) {
	s.handedOut.Store(false)
	d, err := s.next(ctx)
	s.handed(d, err)
	return d, err
}

// TryNext is Next without waiting: ok is false when nothing is ready now
// (err is then nil, or ErrClosed once the subscription ended). A consumer
// that set SubscribeRequest.Notify calls it after each notification until
// ok is false, and holds no goroutine in between.
func (s *Subscription) TryNext() (d Delivery, ok bool, err error) {
	s.handedOut.Store(false)
	d, ok, err = s.poll()
	s.handed(d, err)
	return d, ok, err
}

// handed records that Next or TryNext handed out d (drain.go).
func (s *Subscription) handed(d Delivery, err error) {
	if err == nil && d.Batch != nil {
		s.handedOut.Store(true)
		if s.hist >= s.histEnd {
			s.histPending.Store(false)
		}
	}
}

func (s *Subscription) next(ctx context.Context) (Delivery, error) {
	for {
		if d, ok, err := s.poll(); ok || err != nil {
			return d, err
		}
		select {
		case b := <-s.q:
			return s.dequeued(b), nil
		case <-s.lagged: // poll gives the lag report (after the queue)
		case <-s.drained:
		case <-s.done:
		case <-ctx.Done():
			return Delivery{}, ctx.Err()
		}
	}
}

// poll returns what is ready now, in Next's order: the end, a drain,
// history, the queue, then a lag report once the queue is empty.
func (s *Subscription) poll() (Delivery, bool, error) {
	if s.terminal {
		return Delivery{}, false, ErrClosed
	}
	select {
	case <-s.done:
		if s.closedWithBacklog() {
			// The drained end: its resume is the first offset not
			// delivered (the queue Close gave back holds nothing now).
			return s.drainDelivery(), true, nil
		}
		return Delivery{}, false, ErrClosed
	default:
	}
	select {
	case <-s.drained:
		return s.drainDelivery(), true, nil
	default:
	}
	if s.hist < s.histEnd {
		if d, ok := s.nextHistory(); ok {
			return d, true, nil
		}
	}
	select {
	case b := <-s.q:
		return s.dequeued(b), true, nil
	default:
	}
	select {
	case <-s.lagged:
		// Batches queued before the lag go first (one may have joined
		// since the queue was looked at above; none joins after).
		select {
		case b := <-s.q:
			return s.dequeued(b), true, nil
		default:
		}
		return s.lagReportDelivery(), true, nil
	default:
	}
	return Delivery{}, false, nil
}

func (s *Subscription) nextHistory() (Delivery, bool) {
	sh := s.sh
	sh.mu.Lock()
	if s.hist < sh.base {
		if s.lagReport {
			if !s.stopped {
				s.stopLocked(s.hist)
			}
			sh.mu.Unlock()
			return s.lagReportDelivery(), true
		}
		s.hist = sh.base // retention overtook the reader: a gap
	}
	b := sh.history(s.hist, s.histEnd, s.mods, s.histPage.reusable())
	sh.mu.Unlock()
	if b == nil {
		s.hist = s.histEnd
		s.histPending.Store(false)
		return Delivery{}, false
	}
	s.hist = b.EndOffset()
	s.histPage = b
	b.pin()
	return s.deliver(b), true
}

func (s *Subscription) lagReportDelivery() Delivery {
	s.terminal = true
	s.e.st.laggedSubs.Add(1)
	s.sh.mu.Lock()
	resume := s.resumeFrom
	s.sh.mu.Unlock()
	if r, ok := s.evictedResume(); ok {
		resume = r
	}
	s.Close()
	return Delivery{Lagged: true, ResumeFrom: resume}
}

// deliver delivers b, pinned by the caller: the pin is the Delivery's,
// dropped by Release.
func (s *Subscription) deliver(b *Batch) Delivery {
	s.e.st.deliveredBatches.Add(1)
	s.e.st.deliveredRecords.Add(uint64(len(b.Payloads)))
	return Delivery{Batch: b, Frame: b.encode(b.Mods(s.mods)).frame, pinned: b}
}

// dequeued delivers a batch taken from the queue and returns its bytes;
// the queue's pin becomes the delivery's.
func (s *Subscription) dequeued(b *Batch) Delivery {
	if s.evicted.Load() {
		return s.evictedDelivery(b)
	}
	s.liveNext = b.EndOffset()
	d := s.deliver(b) // encode first: a frame is charged while queues hold b
	s.queued.Add(-b.cost())
	b.acct.release(s.e)
	return d
}

// Close ends the subscription: it stops receiving batches and Next returns
// ErrClosed. It is idempotent.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.sh.mu.Lock()
		s.stopped = true
		delete(s.sh.subs, s)
		s.sh.mu.Unlock()
		// No batch joins the queue any more: give back what it holds,
		// noting that it held some, before the consumer sees the end.
		for drained := false; !drained; {
			select {
			case b := <-s.q:
				s.closedFull.Store(true)
				s.queued.Add(-b.cost())
				b.release(s.e)
			default:
				drained = true
			}
		}
		close(s.done)
		s.e.unregister(s)
		s.sh.st.ten.readerClosed(s.e)
		s.e.st.activeSubs.Add(^uint64(0))
		s.wake() // the consumer sees the end
	})
}

// closedWithBacklog reports whether s was closed (by the engine, not after
// its own terminal delivery) with records it had not delivered: batches
// given back from its queue, history not read, or a pending lag report
// (Next's goroutine).
func (s *Subscription) closedWithBacklog() bool {
	select {
	case <-s.lagged:
		return true // it lost records; its lag report was not delivered
	default:
	}
	return s.closedFull.Load() || s.hist < s.histEnd
}

// QueueStats is a snapshot of a subscription's live queue.
type QueueStats struct {
	// Depth is the number of batches queued, Capacity the queue's bound
	// (both in published batches).
	Depth, Capacity int
	// Dropped counts the records this subscription lost to a full queue.
	Dropped uint64
}

// QueueStats returns a snapshot of the subscription's live queue; it may be
// called from any goroutine.
func (s *Subscription) QueueStats() QueueStats {
	return QueueStats{Depth: len(s.q), Capacity: cap(s.q), Dropped: s.dropped.Load()}
}

// Done is closed when the subscription has been closed.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Dropped reports whether the subscription has stopped receiving live
// batches because of a lag (its lag report is pending or delivered).
func (s *Subscription) Dropped() bool {
	select {
	case <-s.lagged:
		return true
	default:
		return false
	}
}
