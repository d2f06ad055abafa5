package engine

import (
	"context"
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
}

// Watch is one cache watch. Next must be called from a single goroutine.
type Watch struct {
	e    *Engine
	c    *cacheScope
	info WatchInfo
	key  string
	pfx  bool

	catchup []CacheEvent
	q       chan CacheEvent
	lagged  chan struct{}
	done    chan struct{}
	once    sync.Once

	// guarded by c.mu
	stopped    bool
	resumeFrom uint64

	terminal bool

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
		q: make(chan CacheEvent, e.cfg.WatchQueueCapacity), lagged: make(chan struct{}), done: make(chan struct{}),
		drained: make(chan struct{})}
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
	w.catchupN.Store(int64(len(w.catchup)))
	c.watches[w] = struct{}{}
	c.mu.Unlock()
	e.st.activeWatches.Add(1)
	return w, w.info, nil
}

// Info returns what Watch returned.
func (w *Watch) Info() WatchInfo { return w.info }

// offer queues a live event without blocking; a full queue ends the watch
// with a lag report. The caller holds c.mu.
func (w *Watch) offer(ev CacheEvent) {
	if w.stopped {
		return
	}
	cost := cacheEventCost(&ev)
	if q := w.queued.Load(); q == 0 || q+cost <= w.e.cfg.WatchQueueBytes {
		w.queued.Add(cost)
		select {
		case w.q <- ev:
			return
		default:
		}
		w.queued.Add(-cost)
	}
	w.stopped = true
	w.resumeFrom = ev.Offset
	delete(w.c.watches, w)
	close(w.lagged)
}

// Next returns the next event: catch-up (replay or retained values) first,
// then live events in log order, then, for a watcher that fell behind, the
// lag report. After that or Close it returns ErrClosed.
func (w *Watch) Next(ctx context.Context) (WatchDelivery, error) {
	w.handedOut.Store(false)
	d, err := w.next(ctx)
	if err == nil && !d.Lagged {
		w.handedOut.Store(true)
	}
	w.catchupN.Store(int64(len(w.catchup)))
	return d, err
}

func (w *Watch) next(ctx context.Context) (WatchDelivery, error) {
	if w.terminal {
		return WatchDelivery{}, ErrClosed
	}
	select {
	case <-w.done:
		return WatchDelivery{}, ErrClosed
	default:
	}
	select {
	case <-w.drained:
		return w.drainDelivery(), nil
	default:
	}
	if len(w.catchup) > 0 {
		ev := w.catchup[0]
		w.catchup = w.catchup[1:]
		return w.deliver(ev), nil
	}
	select {
	case ev := <-w.q:
		return w.dequeued(ev), nil
	default:
	}
	select {
	case ev := <-w.q:
		return w.dequeued(ev), nil
	case <-w.lagged:
		select {
		case ev := <-w.q:
			return w.dequeued(ev), nil
		default:
		}
		w.terminal = true
		w.e.st.laggedWatches.Add(1)
		w.c.mu.Lock()
		resume := w.resumeFrom
		w.c.mu.Unlock()
		w.Close()
		return WatchDelivery{Lagged: true, ResumeFrom: resume}, nil
	case <-w.drained:
		return w.drainDelivery(), nil
	case <-w.done:
		return WatchDelivery{}, ErrClosed
	case <-ctx.Done():
		return WatchDelivery{}, ctx.Err()
	}
}

// dequeued delivers an event taken from the queue and returns its bytes.
func (w *Watch) dequeued(ev CacheEvent) WatchDelivery {
	w.queued.Add(-cacheEventCost(&ev))
	return w.deliver(ev)
}

func (w *Watch) deliver(ev CacheEvent) WatchDelivery {
	w.e.st.watchEvents.Add(1)
	return WatchDelivery{Event: ev}
}

// Close ends the watch. It is idempotent.
func (w *Watch) Close() {
	w.once.Do(func() {
		close(w.done)
		w.c.mu.Lock()
		w.stopped = true
		delete(w.c.watches, w)
		w.c.mu.Unlock()
		w.e.unregisterWatch(w)
		w.e.st.activeWatches.Add(^uint64(0))
	})
}

// Done is closed when the watch has been closed.
func (w *Watch) Done() <-chan struct{} { return w.done }
