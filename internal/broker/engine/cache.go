package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// CacheEvent is one write in a cache's log, as delivered to watchers
// (cache_event).
type CacheEvent struct {
	// Key is the cache key.
	Key string
	// Value is the value written; nil with Deleted for a delete.
	Value   []byte
	Deleted bool
	// Offset is the cache-log offset of the write (also the value's
	// version).
	Offset uint64
	// ExpiresAtMillis is the absolute expiry in Unix ms (0 = never, and 0
	// for deletes).
	ExpiresAtMillis uint64
}

type cacheEntry struct {
	value     []byte
	expiresAt uint64 // Unix ms, 0 = never
	version   uint64
}

// cacheScope is one cache (one shard): its entries, its write log for
// watches, its watchers and its counters.
type cacheScope struct {
	e *Engine

	mu       sync.Mutex
	entries  map[string]*cacheEntry
	log      []CacheEvent // log[head:] retained; log[head] has offset base
	head     int
	base     uint64
	next     uint64 // offset of the next write; offsets start at 0
	watches  map[*Watch]struct{}
	counters map[string]int64

	logBytes  int64         // cost of log[head:] (retention.go)
	liveBytes int64         // cost of entries and counters (retention.go)
	tenant    *atomic.Int64 // live bytes of all the tenant's caches
	ten       *tenantUse    // the tenant's fair-share accounting (tenants.go)
}

// newCacheScope makes a cache of tenant. The caller holds e.mu.
func newCacheScope(e *Engine, tenant string) *cacheScope {
	tb := e.tenantCache[tenant]
	if tb == nil {
		tb = new(atomic.Int64)
		e.tenantCache[tenant] = tb
	}
	return &cacheScope{e: e, tenant: tb, ten: e.tenant(tenant), entries: make(map[string]*cacheEntry), base: 0, next: 0,
		watches: make(map[*Watch]struct{}), counters: make(map[string]int64)}
}

// live returns the key's entry if present and not expired, removing an
// expired one (lazy expiry). The caller holds c.mu.
func (c *cacheScope) live(key string, now uint64) *cacheEntry {
	ent := c.entries[key]
	if ent == nil {
		return nil
	}
	if ent.expiresAt != 0 && now >= ent.expiresAt {
		c.addLive(-cacheValueCost(key, ent.value))
		delete(c.entries, key)
		c.e.st.cacheExpired.Add(1)
		return nil
	}
	return ent
}

// appendLog records a write, trims the log and fans the event out to the
// matching watchers. The caller holds c.mu.
func (c *cacheScope) appendLog(ev CacheEvent) {
	ev.Offset = c.next
	c.next++
	c.log = append(c.log, ev)
	cost := cacheEventCost(&ev)
	c.logBytes += cost
	e := c.e
	c.addLogBytes(cost)
	maxBytes, total := e.cfg.CacheLogRetainBytes, e.cfg.MaxTotalCacheLogBytes
	for n := len(c.log) - c.head; n > 1 && (n > e.cfg.CacheLogRetain || (maxBytes > 0 && c.logBytes > maxBytes) ||
		(total > 0 && c.overLogShare(total))); n-- {
		old := cacheEventCost(&c.log[c.head])
		c.logBytes -= old
		c.addLogBytes(-old)
		c.log[c.head] = CacheEvent{}
		c.head++
		c.base++
	}
	if c.head > 1024 && c.head > len(c.log)/2 {
		n := copy(c.log, c.log[c.head:])
		clear(c.log[n:])
		c.log = c.log[:n]
		c.head = 0
	}
	var we *watchEvent // shared by the watches it matches
	for w := range c.watches {
		if w.match(ev.Key) {
			if we == nil {
				we = newWatchEvent(c.e, ev)
			}
			w.offer(we)
		}
	}
}

// addLogBytes changes the write-log bytes of the cache's tenant and of
// the engine, counting the tenants that hold some.
func (c *cacheScope) addLogBytes(delta int64) {
	if after := c.ten.cacheLog.Add(delta); after > 0 && after == delta {
		c.e.cacheLogTenants.Add(1)
	} else if after == 0 && delta < 0 {
		c.e.cacheLogTenants.Add(-1)
	}
	c.e.cacheLogBytes.Add(delta)
}

// overLogShare reports whether the cache must drop its oldest event for
// the engine-wide bound on write logs: the total is over it and the
// tenant over its share (the bound over the tenants holding write logs),
// or the total is over twice the bound. A tenant within its share keeps
// its watchers' replay whoever filled the total.
func (c *cacheScope) overLogShare(total int64) bool {
	all := c.e.cacheLogBytes.Load()
	if all <= total {
		return false
	}
	return all > 2*total || c.ten.cacheLog.Load() > total/max(c.e.cacheLogTenants.Load(), 1)
}

// put writes key and returns the version written. The caller holds c.mu.
func (c *cacheScope) put(key string, value []byte, ttl *time.Duration, now uint64) uint64 {
	v := append([]byte(nil), value...)
	if v == nil {
		v = []byte{}
	}
	var exp uint64
	if ttl != nil {
		exp = now + uint64(max(*ttl, 0)/time.Millisecond)
	}
	version := c.next
	delta := cacheValueCost(key, v)
	if old := c.entries[key]; old != nil {
		delta -= cacheValueCost(key, old.value)
	}
	c.addLive(delta)
	c.entries[key] = &cacheEntry{value: v, expiresAt: exp, version: version}
	c.appendLog(CacheEvent{Key: key, Value: v, ExpiresAtMillis: exp})
	c.e.st.cachePuts.Add(1)
	return version
}

// CachePut writes key = value (cache_put). ttl nil means no expiry; a TTL
// expires at now + ttl (whole milliseconds). It returns the version written.
func (e *Engine) CachePut(r CacheRef, key string, value []byte, ttl *time.Duration) (uint64, error) {
	if err := e.checkCacheValue(r, key, value); err != nil {
		return 0, err
	}
	c, err := e.cacheKey(r, key)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := e.nowMillis()
	if err := c.fits(key, value, now); err != nil {
		return 0, err
	}
	return c.put(key, value, ttl, now), nil
}

// fits refuses a write of key = value that would take the live bytes over
// a bound (see grow). The caller holds c.mu.
func (c *cacheScope) fits(key string, value []byte, now uint64) error {
	delta := cacheValueCost(key, value)
	if old := c.live(key, now); old != nil {
		delta -= cacheValueCost(key, old.value)
	}
	return c.grow(delta)
}

// grow refuses growing the cache's live bytes by delta beyond
// MaxCacheBytes, the tenant's caches beyond MaxTenantCacheBytes or all
// caches beyond MaxTotalCacheBytes when the tenant is over its share of
// it (limit_exceeded, nothing written).
// Writes to other caches in flight may overshoot the tenant and total
// bounds by their own size. The caller holds c.mu.
func (c *cacheScope) grow(delta int64) error {
	if delta <= 0 {
		return nil
	}
	cfg := &c.e.cfg
	if l := cfg.MaxCacheBytes; l > 0 && c.liveBytes+delta > l {
		return errCacheFull("this cache's", l)
	}
	if l := cfg.MaxTenantCacheBytes; l > 0 && c.tenant.Load()+delta > l {
		return errCacheFull("the tenant's caches'", l)
	}
	if l := cfg.MaxTotalCacheBytes; l > 0 && c.e.cacheLive.Load()+delta > l {
		// At the engine-wide bound only a tenant over its share (the
		// bound over the tenants holding live bytes) is refused.
		holders, held := c.e.cacheTenants.Load(), c.tenant.Load()
		if held == 0 {
			holders++
		}
		if held+delta > l/max(holders, 1) {
			return errCacheFull("all caches'", l)
		}
	}
	return nil
}

// addLive changes the live bytes of the cache, its tenant and the
// engine. The caller holds c.mu.
func (c *cacheScope) addLive(delta int64) {
	c.liveBytes += delta
	if after := c.tenant.Add(delta); after > 0 && after == delta {
		c.e.cacheTenants.Add(1)
	} else if after == 0 && delta < 0 {
		c.e.cacheTenants.Add(-1)
	}
	c.e.cacheLive.Add(delta)
}

// CacheGet reads key (cache_get). found is false for a missing or expired
// key. The returned value must not be modified.
func (e *Engine) CacheGet(r CacheRef, key string) (value []byte, version uint64, found bool, err error) {
	c, err := e.cacheKey(r, key)
	if err != nil {
		return nil, 0, false, err
	}
	e.st.cacheGets.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	ent := c.live(key, e.nowMillis())
	if ent == nil {
		return nil, 0, false, nil
	}
	e.st.cacheHits.Add(1)
	return ent.value, ent.version, true, nil
}

// CacheDelete removes key and returns the removed value (cache_delete);
// found is false when there was no live value.
func (e *Engine) CacheDelete(r CacheRef, key string) (old []byte, found bool, err error) {
	c, err := e.cacheKey(r, key)
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ent := c.live(key, e.nowMillis())
	if ent == nil {
		return nil, false, nil
	}
	c.addLive(-cacheValueCost(key, ent.value))
	delete(c.entries, key)
	c.appendLog(CacheEvent{Key: key, Deleted: true})
	e.st.cacheDeletes.Add(1)
	return ent.value, true, nil
}

// Condition is a cache_put_if condition: Absent (no live entry) or the
// entry's current Version.
type Condition struct {
	Absent  bool
	Version uint64
}

// CondResult is the outcome of a conditional write
// (cache_condition_result).
type CondResult struct {
	// Applied says whether the write happened.
	Applied bool
	// Version is the version written (applied put) or the key's current
	// version; HasVersion is false when the key has no live entry.
	Version    uint64
	HasVersion bool
}

// CachePutIf writes key only if cond holds (cache_put_if).
func (e *Engine) CachePutIf(r CacheRef, key string, value []byte, ttl *time.Duration, cond Condition) (CondResult, error) {
	if err := e.checkCacheValue(r, key, value); err != nil {
		return CondResult{}, err
	}
	c, err := e.cacheKey(r, key)
	if err != nil {
		return CondResult{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := e.nowMillis()
	ent := c.live(key, now)
	ok := (cond.Absent && ent == nil) || (!cond.Absent && ent != nil && ent.version == cond.Version)
	if !ok {
		e.st.condFailures.Add(1)
		if ent == nil {
			return CondResult{}, nil
		}
		return CondResult{Version: ent.version, HasVersion: true}, nil
	}
	if err := c.fits(key, value, now); err != nil {
		return CondResult{}, err
	}
	v := c.put(key, value, ttl, now)
	return CondResult{Applied: true, Version: v, HasVersion: true}, nil
}

// CacheDeleteIf deletes key only if its current version is version
// (cache_delete_if). After an applied delete the key has no version.
func (e *Engine) CacheDeleteIf(r CacheRef, key string, version uint64) (CondResult, error) {
	c, err := e.cacheKey(r, key)
	if err != nil {
		return CondResult{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ent := c.live(key, e.nowMillis())
	if ent == nil {
		e.st.condFailures.Add(1)
		return CondResult{}, nil
	}
	if ent.version != version {
		e.st.condFailures.Add(1)
		return CondResult{Version: ent.version, HasVersion: true}, nil
	}
	c.addLive(-cacheValueCost(key, ent.value))
	delete(c.entries, key)
	c.appendLog(CacheEvent{Key: key, Deleted: true})
	e.st.cacheDeletes.Add(1)
	return CondResult{Applied: true}, nil
}

// CounterAdd adds delta to a counter (counter_add) and returns the new
// value. Counters live beside the cache's keys, in a separate space.
func (e *Engine) CounterAdd(r CacheRef, key string, delta int64) (int64, error) {
	c, err := e.cacheKey(r, key)
	if err != nil {
		return 0, err
	}
	e.st.counterAdds.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	old, exists := c.counters[key]
	if !exists {
		cost := int64(len(key)) + counterSlotOverhead
		if err := c.grow(cost); err != nil {
			return 0, err
		}
		c.addLive(cost)
	}
	v := old + delta
	c.counters[key] = v
	return v, nil
}

// CounterGet reads a counter (counter_get); ok is false for a counter
// never written (distinct from 0).
func (e *Engine) CounterGet(r CacheRef, key string) (value int64, ok bool, err error) {
	c, err := e.cacheKey(r, key)
	if err != nil {
		return 0, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	value, ok = c.counters[key]
	return value, ok, nil
}

// cacheKey is cache after checking the names and the key.
func (e *Engine) cacheKey(r CacheRef, key string) (*cacheScope, error) {
	if err := e.checkCache(r, key); err != nil {
		return nil, err
	}
	return e.cache(r)
}

// CacheOffsets returns a cache's oldest retained log offset and the offset
// of its next write.
func (e *Engine) CacheOffsets(r CacheRef) (oldest, next uint64, err error) {
	c, err := e.cacheKey(r, "")
	if err != nil {
		return 0, 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base, c.next, nil
}
