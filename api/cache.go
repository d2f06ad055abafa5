package api

import (
	"context"
	"time"

	"github.com/flxproto/felix"
)

// Cache and counter calls go to any broker (the broker reached forwards
// them to the cache shard's owner). Puts, gets and deletes are safe to
// re-send (re-applying one has the same effect), so client.Client retries
// them after a lost connection; a counter add or a conditional write whose
// outcome is unknown is not re-sent (*client.AmbiguousError).

// CachePut writes key = value with an optional TTL (0: no expiry) and
// waits for the broker's cache_ok.
func (x Calls) CachePut(ctx context.Context, ref felix.CacheRef, key string, value []byte, ttl time.Duration) error {
	m := &felix.CachePut{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key, Value: value}
	if ttl > 0 {
		m.TTLMs = felix.Some(durMs(ttl))
	}
	_, err := x.r.Request(ctx, m) // cache_ok, or a legacy broker's ok
	return err
}

// CacheGet reads key. A miss (or an expired entry) is found == false with
// a nil error.
func (x Calls) CacheGet(ctx context.Context, ref felix.CacheRef, key string) (value []byte, found bool, err error) {
	it, err := x.CacheGetVersioned(ctx, ref, key)
	return it.Value, it.Found, err
}

// CacheItem is a cache value with its version.
type CacheItem struct {
	Value []byte
	Found bool
	// Version is the entry's version (for CachePutIf / CacheDeleteIf),
	// valid when HasVersion: the broker sends it on a hit to clients that
	// offered felix.FeatureCacheConditional.
	Version    uint64
	HasVersion bool
}

// CacheGetVersioned is CacheGet returning the entry's version too.
func (x Calls) CacheGetVersioned(ctx context.Context, ref felix.CacheRef, key string) (CacheItem, error) {
	cv, err := do[*felix.CacheValue](ctx, x, &felix.CacheGet{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key})
	if err != nil {
		return CacheItem{}, err
	}
	return CacheItem{Value: cv.Value.V, Found: cv.Value.Set, Version: cv.Version.V, HasVersion: cv.Version.Set}, nil
}

// CacheDelete removes key and returns the value it held (found == false
// when there was none). Needs felix.FeatureCacheDelete. A delete is safe
// to re-send, but a re-send's answer says what the re-send found: when an
// earlier attempt may have been applied (its answer was lost) and the
// re-send finds nothing, client.Client returns its ambiguous-outcome
// error (*client.AmbiguousError) rather than found == false, since the
// first attempt may have removed a value.
func (x Calls) CacheDelete(ctx context.Context, ref felix.CacheRef, key string) (old []byte, found bool, err error) {
	cv, err := do[*felix.CacheValue](ctx, x, &felix.CacheDelete{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key})
	if err != nil {
		return nil, false, err
	}
	return cv.Value.V, cv.Value.Set, nil
}

// CondResult is the answer to a conditional cache write.
type CondResult struct {
	// Applied says whether the write happened.
	Applied bool
	// Version is the version written (applied put) or the key's current
	// version (not applied), valid when HasVersion (false: no live entry).
	Version    uint64
	HasVersion bool
}

// IfAbsent is the CachePutIf condition "the key has no live entry".
var IfAbsent = felix.CacheCondition{Kind: felix.CondAbsent}

// IfVersion is the CachePutIf condition "the entry's version is v" (see
// CacheGetVersioned, CondResult.Version).
func IfVersion(v uint64) felix.CacheCondition {
	return felix.CacheCondition{Kind: felix.CondVersion, Version: v}
}

// CachePutIf writes key = value only if cond holds: IfAbsent (no live
// entry) or IfVersion (the entry's version is the one given). ttl 0 means
// no expiry. Needs felix.FeatureCacheConditional; not safe to re-send.
func (x Calls) CachePutIf(ctx context.Context, ref felix.CacheRef, key string, value []byte, cond felix.CacheCondition, ttl time.Duration) (CondResult, error) {
	m := &felix.CachePutIf{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key, Value: value, Condition: cond}
	if ttl > 0 {
		m.TTLMs = felix.Some(durMs(ttl))
	}
	return condResult(do[*felix.CacheConditionResult](ctx, x, m))
}

// CacheDeleteIf removes key only if its version is version. Needs
// felix.FeatureCacheConditional; not safe to re-send.
func (x Calls) CacheDeleteIf(ctx context.Context, ref felix.CacheRef, key string, version uint64) (CondResult, error) {
	return condResult(do[*felix.CacheConditionResult](ctx, x,
		&felix.CacheDeleteIf{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key, Version: version}))
}

func condResult(r *felix.CacheConditionResult, err error) (CondResult, error) {
	if err != nil {
		return CondResult{}, err
	}
	return CondResult{Applied: r.Applied, Version: r.Version.V, HasVersion: r.Version.Set}, nil
}

// CounterAdd adds delta to a counter in one round trip and returns the
// new value (found false when the broker reported none). Counters need
// felix.FeatureCounters and are a keyspace of their own beside the
// cache's values (watches do not see them). An add is not safe to
// re-send: counter_add carries nothing a broker could drop a duplicate
// by, so client.Client reports an unknown outcome as ambiguous instead of
// counting twice.
func (x Calls) CounterAdd(ctx context.Context, ref felix.CacheRef, key string, delta int64) (value int64, found bool, err error) {
	return counter(do[*felix.CounterValue](ctx, x, &felix.CounterAdd{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key, Delta: delta}))
}

// CounterGet reads a counter; found is false when it was never written.
func (x Calls) CounterGet(ctx context.Context, ref felix.CacheRef, key string) (value int64, found bool, err error) {
	return counter(do[*felix.CounterValue](ctx, x, &felix.CounterGet{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key}))
}

func counter(cv *felix.CounterValue, err error) (int64, bool, error) {
	if err != nil {
		return 0, false, err
	}
	return cv.Value.V, cv.Value.Set, nil
}

// durMs converts a duration to whole milliseconds, rounding a positive
// sub-millisecond duration up to 1.
func durMs(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64(max(d/time.Millisecond, 1))
}

// msDur converts a broker's milliseconds to a duration, saturating
// instead of overflowing.
func msDur(ms uint64) time.Duration {
	if ms > uint64(1<<63-1)/uint64(time.Millisecond) {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(ms) * time.Millisecond
}
