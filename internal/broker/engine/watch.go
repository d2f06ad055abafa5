package engine

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/flxproto/felix"
)

// WatchRequest opens a cache watch (cache_watch).
type WatchRequest struct {
	CacheRef
	// Key watches one key; with IsPrefix, Prefix watches every key that
	// starts with it ("" = every key). Exactly one of the two.
	Key      string
	IsPrefix bool
	Prefix   string
	// Shard must be 0 (caches have one shard here).
	Shard uint32
	// HasFrom resumes at FromOffset: every matching write from that offset
	// on is replayed before live events.
	HasFrom    bool
	FromOffset uint64
	// Retained first delivers the current value of every matching key
	// (refused together with HasFrom).
	Retained bool
	// ID is a client-chosen subscription id; 0 lets the engine assign one.
	ID uint64
	// Notify, when set, is called each time the watch may have become
	// ready, as SubscribeRequest.Notify is (same rules): the consumer then
	// calls TryNext.
	Notify func()
}

// WatchInfo describes an opened watch (cache_watch_started).
type WatchInfo struct {
	// ID is the watch's subscription id.
	ID uint64
	// ResumeOffset is where live delivery starts (the log's next offset).
	ResumeOffset uint64
	// RetainedCount is the number of retained values delivered first
	// (meaningful when the request asked for them).
	RetainedCount uint64
}

// WatchDelivery is what Watch.Next returns: one event, or the terminal lag
// report.
type WatchDelivery struct {
	Event CacheEvent
	// Lagged is true for the terminal lag report (cache_watch_lagged);
	// ResumeFrom is the offset to resume from.
	Lagged     bool
	ResumeFrom uint64

	shared *watchEvent // a live event: its frame is shared by its watches
}

// Frame returns the event's whole cache_event frame (JSON). A live event's
// frame is encoded once and shared by every watch it reaches: the caller
// must not modify it. A catch-up event (replay, retained value) is encoded
// for its watch alone.
func (d WatchDelivery) Frame() []byte {
	if d.shared != nil {
		return d.shared.frame()
	}
	return encodeCacheEvent(&d.Event, nil)
}

// watchEvent is one live cache write as the watch queues hold it: shared
// by every watch it matched, encoded once (on first delivery), and
// charged once to the engine-wide queued bytes while a queue holds it.
// Its cost counts the frame it becomes from the start (an upper bound),
// so that what a queue admits includes the frame.
type watchEvent struct {
	ev    CacheEvent
	cost  int64
	e     *Engine
	once  sync.Once
	bytes []byte
	acct  batchAcct
}

func (we *watchEvent) frame() []byte {
	we.once.Do(func() {
		we.bytes = encodeCacheEvent(&we.ev, &we.e.st.watchEncodes)
	})
	return we.bytes
}

// newWatchEvent wraps a live event for the watch queues.
func newWatchEvent(e *Engine, ev CacheEvent) *watchEvent {
	frame := int64(base64.StdEncoding.EncodedLen(len(ev.Value))) + jsonEscapeMax*int64(len(ev.Key)) + jsonPageFixed
	return &watchEvent{ev: ev, cost: cacheEventCost(&ev) + frame, e: e}
}

// encodeCacheEvent encodes ev as a cache_event frame, counting it in n.
func encodeCacheEvent(ev *CacheEvent, n *atomic.Uint64) []byte {
	m := &felix.CacheEvent{Key: ev.Key, Offset: ev.Offset, ExpiresAtMillis: ev.ExpiresAtMillis}
	if !ev.Deleted {
		m.Value = felix.Some(ev.Value)
	}
	// Keys and values were checked against the frame limit when written
	// (checkCacheValue), so encoding cannot fail.
	b, _ := felix.AppendMessageFrame(nil, m)
	if n != nil {
		n.Add(1)
	}
	return b
}

// Watch is one cache watch. Next and TryNext must be called by one
// goroutine at a time; Close may be called from any.
type Watch struct {
	e      *Engine
	c      *cacheScope
	info   WatchInfo
	key    string
	pfx    bool
	notify func() // WatchRequest.Notify, or nil

	catchup []CacheEvent
	q       chan *watchEvent
	lagged  chan struct{}
	lagOnce sync.Once   // closes lagged (closeLagged)
	evicted atomic.Bool // its queue was taken back for another tenant (queue_bytes.go)
	done    chan struct{}
	once    sync.Once

	// guarded by c.mu
	stopped    bool
	resumeFrom uint64

	terminal bool
	liveNext uint64 // offset after the last live event delivered (Next's goroutine)

	// closedFull: Close gave back queued events (set before done is
	// closed), so the end lost events.
	closedFull atomic.Bool

	// drain state (drain.go)
	drained   chan struct{}
	handedOut atomic.Bool  // Next returned an event and was not called again yet
	queued    atomic.Int64 // bytes of the events in q (bounded by WatchQueueBytes)
	catchupN  atomic.Int64
}

func (w *Watch) match(key string) bool {
	if w.pfx {
		return strings.HasPrefix(key, w.key)
	}
	return key == w.key
}

// Watch opens a cache watch. A from offset outside the retained log fails
// with *CursorError; a bad filter with *Error (invalid_request).
func (e *Engine) Watch(req WatchRequest) (*Watch, WatchInfo, error) {
	if req.Shard != 0 {
		return nil, WatchInfo{}, errorf(felix.CodeInvalidRequest, "cache has one shard: shard must be 0")
	}
	if req.HasFrom && req.Retained {
		return nil, WatchInfo{}, errorf(felix.CodeInvalidRequest, "retained cannot be combined with from_offset")
	}
	filter := req.Key
	if req.IsPrefix {
		filter = req.Prefix
	}
	c, err := e.cacheKey(req.CacheRef, filter)
	if err != nil {
		return nil, WatchInfo{}, err
	}
	w := &Watch{e: e, c: c, key: req.Key, pfx: req.IsPrefix,
		q: make(chan *watchEvent, e.cfg.WatchQueueCapacity), lagged: make(chan struct{}), done: make(chan struct{}),
		drained: make(chan struct{}), notify: req.Notify}
	if req.IsPrefix {
		w.key = req.Prefix
	}
	id := req.ID
	if id == 0 {
		id = e.newID()
	}
	c.mu.Lock()
	if req.HasFrom {
		if req.FromOffset < c.base {
			c.mu.Unlock()
			return nil, WatchInfo{}, &CursorError{Reason: CursorTooOld, Requested: req.FromOffset, Available: c.base}
		}
		if req.FromOffset > c.next {
			c.mu.Unlock()
			return nil, WatchInfo{}, &CursorError{Reason: CursorInFuture, Requested: req.FromOffset, Available: c.next}
		}
		for i := c.head + int(req.FromOffset-c.base); i < len(c.log); i++ {
			if w.match(c.log[i].Key) {
				w.catchup = append(w.catchup, c.log[i])
			}
		}
	}
	if req.Retained {
		now := e.nowMillis()
		for k := range c.entries {
			if !w.match(k) {
				continue
			}
			if ent := c.live(k, now); ent != nil {
				w.catchup = append(w.catchup, CacheEvent{Key: k, Value: ent.value, Offset: ent.version, ExpiresAtMillis: ent.expiresAt})
			}
		}
		slices.SortFunc(w.catchup, func(a, b CacheEvent) int {
			if a.Offset < b.Offset {
				return -1
			}
			if a.Offset > b.Offset {
				return 1
			}
			return 0
		})
		w.info.RetainedCount = uint64(len(w.catchup))
	}
	if !e.registerWatch(w) {
		c.mu.Unlock()
		return nil, WatchInfo{}, errorf(felix.CodeDraining, "broker shutting down")
	}
	w.info.ID = id
	w.info.ResumeOffset = c.next
	w.liveNext = c.next
	w.catchupN.Store(int64(len(w.catchup)))
	c.watches[w] = struct{}{}
	c.mu.Unlock()
	c.ten.readerOpened(e)
	e.st.activeWatches.Add(1)
	return w, w.info, nil
}

// Info returns what Watch returned.
func (w *Watch) Info() WatchInfo { return w.info }

// offer queues a live event without blocking; a queue over its bounds
// (events, bytes, or the engine-wide queued bytes, which subscriber queues
// share) ends the watch with a lag report. An empty queue always takes
// the event, as a subscriber's does. The caller holds c.mu.
func (w *Watch) offer(we *watchEvent) {
	if w.stopped || w.evicted.Load() {
		return
	}
	e := w.e
	if q := w.queued.Load(); q == 0 || (q+we.cost <= e.cfg.WatchQueueBytes && e.queueRoom(w.c.ten, we.cost)) {
		w.queued.Add(we.cost)
		we.acct.hold(e, w.c.ten, we.cost)
		select {
		case w.q <- we:
			w.wake()
			return
		default:
		}
		we.acct.release(e)
		w.queued.Add(-we.cost)
	}
	w.stopped = true
	w.resumeFrom = we.ev.Offset
	delete(w.c.watches, w)
	w.closeLagged()
}

// wake calls the consumer's Notify, if any, once w may have become ready.
func (w *Watch) wake() {
	if w.notify != nil {
		w.notify()
	}
}

// Next returns the next event: catch-up (replay or retained values) first,
// then live events in log order, then, for a watcher that fell behind, the
// lag report. After that or Close it returns ErrClosed.
func (w *Watch) Next(ctx context.Context) (WatchDelivery, error) {
	w.handedOut.Store(false)
	d, err := w.next(ctx)
	w.handed(d, err == nil)
	return d, err
}

// TryNext is Next without waiting: ok is false when nothing is ready now
// (err is then nil, or ErrClosed once the watch ended). See
// WatchRequest.Notify.
func (w *Watch) TryNext() (d WatchDelivery, ok bool, err error) {
	w.handedOut.Store(false)
	d, ok, err = w.poll()
	w.handed(d, ok)
	return d, ok, err
}

// handed records what Next or TryNext handed out (drain.go).
func (w *Watch) handed(d WatchDelivery, ok bool) {
	if ok && !d.Lagged {
		w.handedOut.Store(true)
	}
	w.catchupN.Store(int64(len(w.catchup)))
}

func (w *Watch) next(ctx context.Context) (WatchDelivery, error) {
	for {
		if d, ok, err := w.poll(); ok || err != nil {
			return d, err
		}
		select {
		case ev := <-w.q:
			return w.dequeued(ev), nil
		case <-w.lagged: // poll gives the lag report (after the queue)
		case <-w.drained:
		case <-w.done:
		case <-ctx.Done():
			return WatchDelivery{}, ctx.Err()
		}
	}
}

// poll returns what is ready now, in Next's order: the end, a drain,
// catch-up, the queue, then a lag report once the queue is empty.
func (w *Watch) poll() (WatchDelivery, bool, error) {
	if w.terminal {
		return WatchDelivery{}, false, ErrClosed
	}
	select {
	case <-w.done:
		if w.closedWithBacklog() {
			return w.closedDelivery(), true, nil
		}
		return WatchDelivery{}, false, ErrClosed
	default:
	}
	select {
	case <-w.drained:
		return w.drainDelivery(), true, nil
	default:
	}
	if len(w.catchup) > 0 {
		ev := w.catchup[0]
		w.catchup = w.catchup[1:]
		return w.deliver(ev), true, nil
	}
	select {
	case ev := <-w.q:
		return w.dequeued(ev), true, nil
	default:
	}
	select {
	case <-w.lagged:
		// Events queued before the lag go first (none joins after).
		select {
		case ev := <-w.q:
			return w.dequeued(ev), true, nil
		default:
		}
		return w.lagDelivery(), true, nil
	default:
	}
	return WatchDelivery{}, false, nil
}

// dequeued delivers an event taken from the queue and returns its bytes.
func (w *Watch) dequeued(we *watchEvent) WatchDelivery {
	if w.evicted.Load() {
		w.dropQueued(we) // taken back with the rest: none after a dropped one is delivered
		return w.lagDelivery()
	}
	w.liveNext = we.ev.Offset + 1
	w.queued.Add(-we.cost)
	we.acct.release(w.e)
	d := w.deliver(we.ev)
	d.shared = we
	return d
}

// lagDelivery is the terminal lag report (cache_watch_lagged), resuming
// at the first event w did not receive.
func (w *Watch) lagDelivery() WatchDelivery {
	w.terminal = true
	w.e.st.laggedWatches.Add(1)
	w.c.mu.Lock()
	resume := w.resumeFrom
	w.c.mu.Unlock()
	if r, ok := w.evictedResume(); ok {
		resume = r
	}
	w.Close()
	return WatchDelivery{Lagged: true, ResumeFrom: resume}
}

func (w *Watch) deliver(ev CacheEvent) WatchDelivery {
	w.e.st.watchEvents.Add(1)
	return WatchDelivery{Event: ev}
}

// Close ends the watch: it stops receiving events and Next returns
// ErrClosed, or, when events were not delivered (queued, catch-up not read,
// a lag report not taken), a lag report (closedDelivery). It is
// idempotent.
func (w *Watch) Close() {
	w.once.Do(func() {
		w.c.mu.Lock()
		w.stopped = true
		delete(w.c.watches, w)
		w.c.mu.Unlock()
		// Nothing is offered once stopped: give back what the queue
		// holds, noting that it held some, before the consumer sees the
		// end.
		for empty := false; !empty; {
			select {
			case we := <-w.q:
				w.closedFull.Store(true)
				w.queued.Add(-we.cost)
				we.acct.release(w.e)
			default:
				empty = true
			}
		}
		close(w.done)
		w.e.unregisterWatch(w)
		w.c.ten.readerClosed(w.e)
		w.e.st.activeWatches.Add(^uint64(0))
		w.wake() // the consumer sees the end
	})
}

// closedWithBacklog reports whether w was closed (by the engine, not after
// its own terminal delivery) with events it had not delivered: events given
// back from its queue, catch-up not read, or a lag report not taken
// (Next's goroutine).
func (w *Watch) closedWithBacklog() bool {
	select {
	case <-w.lagged:
		return true
	default:
	}
	return w.closedFull.Load() || len(w.catchup) > 0
}

// closedDelivery is the terminal delivery of a watch closed with events
// undelivered: a lag report resuming at its first catch-up event not
// delivered, else after the last live event it delivered (where live
// delivery started if none): a replay from there skips what the watch's
// filter does not match, so nothing is missed or repeated, whatever Close
// took from the queue meanwhile (Next's goroutine).
func (w *Watch) closedDelivery() WatchDelivery {
	w.terminal = true
	resume := w.liveNext
	if len(w.catchup) > 0 {
		resume = w.catchup[0].Offset
	}
	return WatchDelivery{Lagged: true, ResumeFrom: resume}
}

// Done is closed when the watch has been closed.
func (w *Watch) Done() <-chan struct{} { return w.done }
