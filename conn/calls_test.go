package conn

import (
	"context"
	"fmt"
	"time"

	"github.com/flxproto/felix"
)

// The cache and counter calls of the internal tests, sent with
// Client.Request and read off its answers (package api, which has the
// typed calls, imports conn).

func cachePut(ctx context.Context, c *Client, ref felix.CacheRef, key string, value []byte, ttl time.Duration) error {
	m := &felix.CachePut{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key, Value: value}
	if ttl > 0 {
		m.TTLMs = felix.Some(uint64(max(ttl/time.Millisecond, 1)))
	}
	_, err := c.Request(ctx, m) // cache_ok (or a legacy ok)
	return err
}

func cacheGet(ctx context.Context, c *Client, ref felix.CacheRef, key string) (value []byte, found bool, err error) {
	cv, err := requestAs[*felix.CacheValue](ctx, c, &felix.CacheGet{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key})
	if err != nil {
		return nil, false, err
	}
	return cv.Value.V, cv.Value.Set, nil
}

func cacheDelete(ctx context.Context, c *Client, ref felix.CacheRef, key string) (old []byte, found bool, err error) {
	cv, err := requestAs[*felix.CacheValue](ctx, c, &felix.CacheDelete{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key})
	if err != nil {
		return nil, false, err
	}
	return cv.Value.V, cv.Value.Set, nil
}

func counterAdd(ctx context.Context, c *Client, ref felix.CacheRef, key string, delta int64) (int64, bool, error) {
	cv, err := requestAs[*felix.CounterValue](ctx, c, &felix.CounterAdd{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key, Delta: delta})
	if err != nil {
		return 0, false, err
	}
	return cv.Value.V, cv.Value.Set, nil
}

func counterGet(ctx context.Context, c *Client, ref felix.CacheRef, key string) (int64, bool, error) {
	cv, err := requestAs[*felix.CounterValue](ctx, c, &felix.CounterGet{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key})
	if err != nil {
		return 0, false, err
	}
	return cv.Value.V, cv.Value.Set, nil
}

// requestAs sends req with c.Request and returns its answer as a T.
func requestAs[T felix.Message](ctx context.Context, c *Client, req felix.Message) (T, error) {
	var zero T
	ans, err := c.Request(ctx, req)
	if err != nil {
		return zero, err
	}
	a, ok := ans.(T)
	if !ok {
		return zero, fmt.Errorf("%w: %s answered with %s, not %T", felix.ErrProtocol, req.MessageType(), ans.MessageType(), zero)
	}
	return a, nil
}
