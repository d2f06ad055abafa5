package engine

import (
	"strconv"
	"unsafe"

	"github.com/flxproto/felix"
)

// Storage bounds (Config fields of the same names; docs/limits.md).
const (
	// DefaultMaxRetainBytes caps the log (or ring) of every shard, records
	// and their bookkeeping together, whatever its StreamConfig says.
	DefaultMaxRetainBytes = 64 << 20
	// DefaultMaxLogBytes caps all shard logs and rings engine-wide: while
	// the total is over it, the oldest records of the tenant holding the
	// most are trimmed (Engine.enforceLogBudget).
	DefaultMaxLogBytes = 1 << 30
	// DefaultMaxStreamsPerTenant / DefaultMaxCachesPerTenant bound what one
	// tenant can make the broker create on first use.
	DefaultMaxStreamsPerTenant = 64
	DefaultMaxCachesPerTenant  = 64
	// DefaultCacheLogRetainBytes caps a cache's write log (kept for watch
	// resume) in bytes, besides CacheLogRetain entries.
	DefaultCacheLogRetainBytes = 16 << 20
	// DefaultMaxCacheBytes caps the live keys and values of one cache; a
	// write beyond it is refused (limit_exceeded).
	DefaultMaxCacheBytes = 64 << 20
	// DefaultMaxTenantCacheBytes caps the live keys, values and counters
	// of all of one tenant's caches, DefaultMaxTotalCacheBytes those of
	// every cache; a write beyond either is refused (limit_exceeded).
	DefaultMaxTenantCacheBytes = 256 << 20
	DefaultMaxTotalCacheBytes  = 1 << 30
	// DefaultMaxTotalCacheLogBytes caps the write logs of every cache
	// together; beyond it a writing cache of a tenant over its share trims
	// its own oldest events.
	DefaultMaxTotalCacheLogBytes = 1 << 30
	// DefaultWatchQueueBytes bounds one cache watch's queue in bytes.
	DefaultWatchQueueBytes = 16 << 20

	logRecordOverhead   = int64(unsafe.Sizeof(record{})) + 4                                // entry, stored length
	logSegmentOverhead  = int64(unsafe.Sizeof(segment{})) + eventFixedMax + felix.HeaderLen // one per appended batch, with its frame head
	cacheEventOverhead  = int64(unsafe.Sizeof(CacheEvent{}))
	cacheEntryOverhead  = int64(unsafe.Sizeof(cacheEntry{})) + 64 // entry, map slot, pointer
	counterSlotOverhead = 64
)

func (c *Config) storageDefaults() {
	if c.MaxRetainBytes == 0 {
		c.MaxRetainBytes = DefaultMaxRetainBytes
	}
	if c.MaxLogBytes == 0 {
		c.MaxLogBytes = DefaultMaxLogBytes
	}
	if c.MaxStreamsPerTenant == 0 {
		c.MaxStreamsPerTenant = DefaultMaxStreamsPerTenant
	}
	if c.MaxCachesPerTenant == 0 {
		c.MaxCachesPerTenant = DefaultMaxCachesPerTenant
	}
	if c.CacheLogRetainBytes == 0 {
		c.CacheLogRetainBytes = DefaultCacheLogRetainBytes
	}
	if c.MaxCacheBytes == 0 {
		c.MaxCacheBytes = DefaultMaxCacheBytes
	}
	if c.MaxTenantCacheBytes == 0 {
		c.MaxTenantCacheBytes = DefaultMaxTenantCacheBytes
	}
	if c.MaxTotalCacheBytes == 0 {
		c.MaxTotalCacheBytes = DefaultMaxTotalCacheBytes
	}
	if c.MaxTotalCacheLogBytes == 0 {
		c.MaxTotalCacheLogBytes = DefaultMaxTotalCacheLogBytes
	}
}

// logCost is what a shard's retained records cost: payload bytes plus
// their bookkeeping (per record, and per segment). The caller holds sh.mu.
func (sh *shard) logCost(n int) int64 {
	return sh.bytes + int64(n)*logRecordOverhead + int64(sh.segs)*logSegmentOverhead
}

// overBudget reports whether a shard holding n records must drop its
// oldest because it is over MaxRetainBytes. The engine-wide MaxLogBytes is
// enforced after the append, on the tenants over their share
// (Engine.enforceLogBudget). The caller holds sh.mu.
func (sh *shard) overBudget(n int) bool {
	e := sh.st.e
	return e.cfg.MaxRetainBytes > 0 && sh.logCost(n) > e.cfg.MaxRetainBytes
}

// accountLog reports the shard's cost change to its tenant's and the
// engine-wide figures. The caller holds sh.mu.
func (sh *shard) accountLog() {
	cost := sh.logCost(len(sh.recs) - sh.head)
	sh.st.ten.addLog(sh.st.e, cost-sh.accounted)
	sh.accounted = cost
	sh.costSnap.Store(cost)
}

// dropOldestLocked discards the shard's oldest retained record; the
// caller holds sh.mu, checks one is left, and calls accountLog.
func (sh *shard) dropOldestLocked() {
	r := sh.recs[sh.head]
	sh.bytes -= int64(r.n)
	if sh.head+1 == len(sh.recs) || sh.recs[sh.head+1].seg != r.seg {
		sh.segs-- // its last retained record
	}
	sh.recs[sh.head] = record{}
	sh.head++
	sh.base++
}

// LogBytes returns what all shard logs and rings hold (records and their
// bookkeeping).
func (e *Engine) LogBytes() int64 { return e.logBytes.Load() }

// autoCreateAllowed counts one more auto-created stream or cache for the
// tenant, or refuses it. The caller holds e.mu.
func (e *Engine) autoCreateAllowed(counts map[string]int, tenant string, limit int, what string) error {
	if limit > 0 && counts[tenant] >= limit {
		return &Error{Code: felix.CodeLimitExceeded, Retry: felix.RetryFatal,
			Message: "too many " + what + " for tenant " + strconv.Quote(tenant) + " (limit " + strconv.Itoa(limit) + ")"}
	}
	counts[tenant]++
	return nil
}

// cacheEventCost is what one cache log event holds.
func cacheEventCost(ev *CacheEvent) int64 {
	return int64(len(ev.Key)+len(ev.Value)) + cacheEventOverhead
}

// cacheValueCost is what one live cache key holds.
func cacheValueCost(key string, value []byte) int64 {
	return int64(len(key)+len(value)) + cacheEntryOverhead
}

// errCacheFull refuses a cache write beyond a live-bytes bound; whose
// names the bound ("this cache's", "the tenant's caches'", "all caches'").
func errCacheFull(whose string, limit int64) *Error {
	return &Error{Code: felix.CodeLimitExceeded, Retry: felix.RetryFatal,
		Message: "cache full: " + whose + " live keys and values would exceed " + strconv.FormatInt(limit, 10) + " bytes"}
}

// CacheBytes returns what all caches hold: their write logs and their live
// keys, values and counters.
func (e *Engine) CacheBytes() (logBytes, liveBytes int64) {
	e.mu.Lock()
	caches := make([]*cacheScope, 0, len(e.caches))
	for _, c := range e.caches {
		caches = append(caches, c)
	}
	e.mu.Unlock()
	for _, c := range caches {
		c.mu.Lock()
		logBytes += c.logBytes
		liveBytes += c.liveBytes
		c.mu.Unlock()
	}
	return logBytes, liveBytes
}

// Counts returns how many streams and caches the engine holds.
func (e *Engine) Counts() (streams, caches int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.streams), len(e.caches)
}
