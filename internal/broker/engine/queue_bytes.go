package engine

import (
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
