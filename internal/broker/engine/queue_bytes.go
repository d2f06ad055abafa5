package engine

import (
	"cmp"
	"slices"
	"sync"
	"unsafe"
)

// Subscriber queue byte bounds (Config.SubscriberQueueBytes,
// Config.MaxQueuedBytes).
const (
	DefaultSubscriberQueueBytes = 32 << 20
	DefaultMaxQueuedBytes       = 512 << 20
	// batchOverhead is what one queued batch costs beyond its records:
	// the Batch itself, its frame header and modifier sections.
	batchOverhead = int(unsafe.Sizeof(Batch{})) + 64
	// recordOverhead is the per-record cost in an event frame and in the
	// batch (length prefix, timestamp, slice header).
	recordOverhead = 4 + 8 + 24
)

// batchAcct is a queued item's share of the engine-wide queued-bytes
// figure: a Batch's, or a live cache event's (watchEvent). While at least
// one queue holds the item, its bytes and every frame encoded from it (for
// a Batch, one per distinct modifier set) are charged; when the last
// queue lets go, the charge is returned.
type batchAcct struct {
	mu      sync.Mutex
	refs    int32      // queues holding the item
	frames  int64      // bytes of the frames encoded so far
	charged int64      // bytes currently charged to Engine.queuedBytes
	ten     *tenantUse // the tenant charged alongside (the stream's or cache's)
}

// cost is what one queue entry of b costs its subscriber: the records
// and their framing, about the size of the frame it becomes.
func (b *Batch) cost() int64 {
	if b.size == 0 {
		n := int64(batchOverhead + len(b.Publisher))
		for _, p := range b.Payloads {
			n += int64(len(p)) + recordOverhead
		}
		b.size = n
	}
	return b.size
}

// hold charges the item (cost bytes) to the engine when the first queue
// takes it.
func (a *batchAcct) hold(e *Engine, ten *tenantUse, cost int64) {
	a.mu.Lock()
	a.refs++
	if a.refs == 1 {
		a.charged = cost + a.frames
		a.ten = ten
		ten.addQueued(e, a.charged)
	}
	a.mu.Unlock()
}

// release returns the item's charge when the last queue has let it go.
func (a *batchAcct) release(e *Engine) {
	a.mu.Lock()
	a.refs--
	if a.refs == 0 {
		a.ten.addQueued(e, -a.charged)
		a.charged = 0
	}
	a.mu.Unlock()
}

// framed charges a newly encoded frame of n bytes while queues hold the
// item.
func (a *batchAcct) framed(e *Engine, n int) {
	if e == nil {
		return
	}
	a.mu.Lock()
	a.frames += int64(n)
	if a.refs > 0 {
		a.charged += int64(n)
		a.ten.addQueued(e, int64(n))
	}
	a.mu.Unlock()
}

// hold charges b to the engine and the stream's tenant when the first
// queue takes it, and pins its frames (Batch.pin).
func (b *Batch) hold(e *Engine, ten *tenantUse) {
	b.acct.hold(e, ten, b.cost())
	b.pin()
}

// release returns b's charge when the last queue has let it go, and
// unpins its frames.
func (b *Batch) release(e *Engine) {
	b.acct.release(e)
	b.unpin()
}

// admit reports whether a live batch may join s's queue: its bytes must
// fit the subscription's bound and the engine-wide one, which a tenant
// within its share is not refused by (Engine.queueRoom). A subscriber
// whose queue is empty always gets the batch (so one batch larger than
// the bound is not a poison, and a subscriber that keeps up is never
// lagged because others fell behind); the engine-wide figure then
// exceeds its bound by at most one batch per subscriber that keeps up.
// The caller holds sh.mu.
func (s *Subscription) admit(b *Batch) bool {
	q := s.queued.Load()
	if q == 0 {
		return true
	}
	c := b.cost()
	return q+c <= s.maxBytes && s.e.queueRoom(s.sh.st.ten, c)
}

// QueuedBytes returns the bytes held in subscriber queues engine-wide
// (records and encoded frames of every queued batch, each counted once).
func (e *Engine) QueuedBytes() int64 { return e.queuedBytes.Load() }

// makeQueueRoom makes room for c more queued bytes of a tenant within its
// share when the engine-wide figure would pass its hard cap (twice
// MaxQueuedBytes, Engine.queueRoom): it takes back, at once, the queues of
// the tenants over their share — the tenant holding the most first, its
// largest queue first, one queue at a time until c fits. A taken-back
// queue's items are dropped and their bytes returned; its subscriber or
// watch is lagged as if its queue had overflowed, its lag report resuming
// at the first item it did not receive (Subscription.evict, Watch.evict).
// A tenant within its share is never taken back from. The caller holds
// one shard's or cache's lock, never a victim's: eviction takes only the
// victims' channels and atomics, so no lock order between shards arises.
func (e *Engine) makeQueueRoom(c int64) {
	hard := 2 * e.cfg.MaxQueuedBytes
	type victim struct {
		ten       *tenantUse
		tenQueued int64 // snapshots: the figures change meanwhile
		queued    int64
		sub       *Subscription
		watch     *Watch
	}
	var vs []victim
	e.mu.Lock()
	for s := range e.subs {
		if q := s.queued.Load(); q > 0 {
			t := s.sh.st.ten
			vs = append(vs, victim{ten: t, tenQueued: t.queued.Load(), queued: q, sub: s})
		}
	}
	for w := range e.watches {
		if q := w.queued.Load(); q > 0 && w.c.ten != nil {
			t := w.c.ten
			vs = append(vs, victim{ten: t, tenQueued: t.queued.Load(), queued: q, watch: w})
		}
	}
	e.mu.Unlock()
	slices.SortFunc(vs, func(a, b victim) int {
		if a.ten != b.ten {
			if c := cmp.Compare(b.tenQueued, a.tenQueued); c != 0 {
				return c
			}
			return cmp.Compare(a.ten.name, b.ten.name)
		}
		return cmp.Compare(b.queued, a.queued)
	})
	for _, v := range vs {
		if e.queuedBytes.Load()+c <= hard {
			return
		}
		if v.ten.queued.Load() <= e.queueShare() {
			continue
		}
		if v.sub != nil {
			v.sub.evict()
		} else {
			v.watch.evict()
		}
	}
}

// evict takes s's queue back for another tenant's room
// (Engine.makeQueueRoom): the queued batches are dropped and their bytes
// returned. A subscription that reports lags then gets no more live
// batches and ends with its lag report, resuming at the first batch it
// did not receive: Next drops a batch it takes from the queue once s is
// evicted (Subscription.evictedDelivery), so none after a dropped one is
// delivered, whichever of Next and evict took each. One that does not
// report lags just loses the batches, as it loses a batch its full queue
// refuses. Any goroutine may call it (it takes no lock of s's shard).
func (s *Subscription) evict() {
	if s.lagReport && !s.evicted.CompareAndSwap(false, true) {
		return
	}
	for {
		select {
		case b := <-s.q:
			s.dropQueued(b)
		default:
			if s.lagReport {
				s.closeLagged()
			}
			return
		}
	}
}

// dropQueued drops b, taken from s's queue undelivered, and returns its
// bytes.
func (s *Subscription) dropQueued(b *Batch) {
	s.queued.Add(-b.cost())
	s.e.st.droppedBatches.Add(1)
	s.e.st.droppedRecords.Add(uint64(len(b.Payloads)))
	s.dropped.Add(uint64(len(b.Payloads)))
	b.release(s.e)
}

// closeLagged closes s.lagged once (a queue overflow under the shard's
// lock and an eviction without it may both end live delivery) and wakes
// the consumer, which has a lag report to deliver.
func (s *Subscription) closeLagged() {
	s.lagOnce.Do(func() { close(s.lagged) })
	s.wake()
}

// evictedDelivery is what Next returns for a batch it took from the queue
// of an evicted subscription: b is dropped like the rest, and delivery
// ends with the lag report (Next's goroutine).
func (s *Subscription) evictedDelivery(b *Batch) Delivery {
	s.dropQueued(b)
	return s.lagReportDelivery()
}

// evictedResume is where an evicted subscription resumes: the first offset
// it did not receive, history first (Next's goroutine). ok is false when s
// was not evicted.
func (s *Subscription) evictedResume() (resume uint64, ok bool) {
	if !s.evicted.Load() {
		return 0, false
	}
	if s.hist < s.histEnd {
		return s.hist, true
	}
	return s.liveNext, true
}

// evict takes w's queue back for another tenant's room, as
// Subscription.evict does: its events are dropped, and w ends with its
// lag report resuming after the last live event it received (Next drops
// an event it takes from the queue once w is evicted).
func (w *Watch) evict() {
	if !w.evicted.CompareAndSwap(false, true) {
		return
	}
	for {
		select {
		case we := <-w.q:
			w.dropQueued(we)
		default:
			w.closeLagged()
			return
		}
	}
}

// dropQueued drops we, taken from w's queue undelivered, and returns its
// bytes.
func (w *Watch) dropQueued(we *watchEvent) {
	w.queued.Add(-we.cost)
	we.acct.release(w.e)
}

// closeLagged closes w.lagged once and wakes the consumer.
func (w *Watch) closeLagged() {
	w.lagOnce.Do(func() { close(w.lagged) })
	w.wake()
}

// evictedResume is where an evicted watch resumes: after the last live
// event it received (a replay from there skips what its filter does not
// match, so nothing is missed or repeated). ok is false when w was not
// evicted (Next's goroutine).
func (w *Watch) evictedResume() (resume uint64, ok bool) {
	return w.liveNext, w.evicted.Load()
}
