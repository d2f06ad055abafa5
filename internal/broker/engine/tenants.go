package engine

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/flxproto/felix"
)

// tenantUse is what one tenant holds of the engine-wide resources that
// are shared by fair share rather than by a fixed split: the stream logs
// (MaxLogBytes), the subscriber and watch queues (MaxQueuedBytes) and the
// cache write logs (MaxTotalCacheLogBytes); the tables that refuse rather
// than trim are accounted by budgets (below), live cache bytes in cache.go. A
// tenant's share of such a bound is the bound divided by the number of
// tenants holding some of it; the engine trims or refuses the tenants over
// their share first, and never one within it because of another.
type tenantUse struct {
	name     string
	logBytes atomic.Int64 // cost of the tenant's shard logs and rings
	queued   atomic.Int64 // bytes its subscriber and watch queues hold
	readers  atomic.Int64 // open subscriptions and watches
	cacheLog atomic.Int64 // bytes of its caches' write logs
	shards   []*shard     // every shard of the tenant's streams (Engine.mu)
}

// tenant returns the tenant's record, creating it. The caller holds e.mu.
func (e *Engine) tenant(name string) *tenantUse {
	t := e.tenants[name]
	if t == nil {
		t = &tenantUse{name: name}
		e.tenants[name] = t
	}
	return t
}

// addLog changes the log bytes of the tenant and the engine.
func (t *tenantUse) addLog(e *Engine, delta int64) {
	t.logBytes.Add(delta)
	e.logBytes.Add(delta)
}

// addQueued changes the queued bytes of the tenant and the engine.
func (t *tenantUse) addQueued(e *Engine, delta int64) {
	if t != nil {
		t.queued.Add(delta)
	}
	e.queuedBytes.Add(delta)
}

// readerOpened and readerClosed count the tenant's subscriptions and
// watches, and the tenants that have any (the divisor of the queue share).
func (t *tenantUse) readerOpened(e *Engine) {
	if t.readers.Add(1) == 1 {
		e.queueTenants.Add(1)
	}
}

func (t *tenantUse) readerClosed(e *Engine) {
	if t.readers.Add(-1) == 0 {
		e.queueTenants.Add(-1)
	}
}

// queueRoom reports whether c more queued bytes fit the engine-wide bound
// for a queue of tenant t: below the bound anyone's do; at the bound only
// a tenant within its share (MaxQueuedBytes divided by the tenants with an
// open subscription or watch) is still given room, up to a hard cap of
// twice the bound, so one whose reader keeps up is not lagged because
// other tenants' stalled queues hold the budget. Tenants over their share
// fill at most the bound, those within it at most their shares, which add
// up to the bound. When shares shrink (another tenant subscribed), what
// tenants took within their old shares can hold the figure at the hard
// cap: a tenant within its share is then given room at once by lagging
// the queues of the tenants over theirs (Engine.makeQueueRoom), never by
// waiting for them to drain or time out.
func (e *Engine) queueRoom(t *tenantUse, c int64) bool {
	limit := e.cfg.MaxQueuedBytes
	if e.queuedBytes.Load()+c <= limit {
		return true
	}
	if t == nil || t.queued.Load()+c > e.queueShare() {
		return false
	}
	if e.queuedBytes.Load()+c <= 2*limit {
		return true
	}
	e.makeQueueRoom(c)
	return e.queuedBytes.Load()+c <= 2*limit
}

// queueShare is a tenant's share of MaxQueuedBytes: the bound divided by
// the tenants with an open subscription or watch.
func (e *Engine) queueShare() int64 {
	return e.cfg.MaxQueuedBytes / max(e.queueTenants.Load(), 1)
}

// enforceLogBudget trims stream logs while all of them together hold more
// than MaxLogBytes: the oldest records of the tenant holding the most go
// first (of its largest shard), so a tenant holding no more than its share
// (MaxLogBytes divided by the tenants holding records) never loses one
// because another filled the total. Every shard keeps its newest record.
// The caller holds no shard lock.
func (e *Engine) enforceLogBudget() {
	limit := e.cfg.MaxLogBytes
	if limit <= 0 || e.logBytes.Load() <= limit {
		return
	}
	e.logMu.Lock()
	defer e.logMu.Unlock()
	for e.logBytes.Load() > limit {
		if !e.trimLargestTenant(limit) {
			return
		}
	}
}

// trimLargestTenant trims the tenant holding the most log bytes until the
// total fits the limit or the tenant no longer holds more than the next
// one. Only a tenant over its share (the limit over the tenants holding
// records) is trimmed: when the largest cannot be (its shards hold only
// their newest records), nobody is. It reports whether it trimmed
// anything. The caller holds e.logMu.
func (e *Engine) trimLargestTenant(limit int64) bool {
	e.mu.Lock()
	ts := make([]*tenantUse, 0, len(e.tenants))
	for _, t := range e.tenants {
		if t.logBytes.Load() > 0 {
			ts = append(ts, t)
		}
	}
	e.mu.Unlock()
	if len(ts) == 0 {
		return false
	}
	share := limit / int64(len(ts))
	slices.SortFunc(ts, func(a, b *tenantUse) int { return int(min(max(b.logBytes.Load()-a.logBytes.Load(), -1), 1)) })
	t := ts[0]
	if t.logBytes.Load() <= share {
		return false
	}
	floor := share // trim this tenant down to the next one's holding, never below its share
	if len(ts) > 1 {
		floor = max(floor, ts[1].logBytes.Load())
	}
	e.mu.Lock()
	shards := slices.Clone(t.shards)
	e.mu.Unlock()
	slices.SortFunc(shards, func(a, b *shard) int { return int(min(max(b.costSnap.Load()-a.costSnap.Load(), -1), 1)) })
	trimmed := false
	for _, s := range shards {
		s.mu.Lock()
		for n := len(s.recs) - s.head; n > 1; n-- {
			if e.logBytes.Load() <= limit || (trimmed && t.logBytes.Load() <= floor) {
				break
			}
			s.dropOldestLocked()
			s.accountLog()
			trimmed = true
		}
		s.mu.Unlock()
		if trimmed && (e.logBytes.Load() <= limit || t.logBytes.Load() <= floor) {
			break
		}
	}
	return trimmed
}

// budget accounts one table a peer grows, per tenant and engine-wide, in
// units (entries or bytes). A tenant is refused beyond its own limit; at
// the engine-wide limit a tenant over its share (the limit divided by the
// tenants holding some) is refused, one within its share is not, so one
// tenant filling the table never locks another out. The engine-wide
// figure therefore stays below twice its limit. A tenant whose use drops
// to zero is forgotten.
type budget struct {
	what        string // "commit state entries", for refusals
	tenantLimit int64  // ≤ 0: none
	totalLimit  int64  // ≤ 0: none

	mu    sync.Mutex
	total int64
	use   map[string]int64
}

// newBudget returns a budget; a limit ≤ 0 is none.
func newBudget(what string, tenantLimit, totalLimit int64) *budget {
	return &budget{what: what, tenantLimit: tenantLimit, totalLimit: totalLimit, use: make(map[string]int64)}
}

// take charges n units (n may be negative: a release, never refused) to
// tenant, or refuses them with limit_exceeded naming the limit.
func (b *budget) take(tenant string, n int64) error {
	return b.change(tenant, n, true)
}

// give returns n units (n ≥ 0; a negative n charges them unchecked, to
// undo a release).
func (b *budget) give(tenant string, n int64) { _ = b.change(tenant, -n, false) }

func (b *budget) change(tenant string, n int64, check bool) error {
	if n == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.use[tenant]
	after := cur + n
	if n > 0 && check {
		if b.tenantLimit > 0 && after > b.tenantLimit {
			return b.refuse("the tenant's", b.tenantLimit)
		}
		if b.totalLimit > 0 && b.total+n > b.totalLimit {
			holders := int64(len(b.use))
			if cur == 0 {
				holders++
			}
			if after > b.totalLimit/holders {
				return b.refuse("all tenants'", b.totalLimit)
			}
		}
	}
	b.total += n
	if after <= 0 {
		delete(b.use, tenant)
	} else {
		b.use[tenant] = after
	}
	return nil
}

// held returns what tenant holds and what all tenants hold.
func (b *budget) held(tenant string) (int64, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.use[tenant], b.total
}

func (b *budget) refuse(whose string, limit int64) *Error {
	return &Error{Code: felix.CodeLimitExceeded, Retry: felix.RetryFatal,
		Message: b.what + ": " + whose + " limit of " + strconv.FormatInt(limit, 10) + " is reached"}
}
