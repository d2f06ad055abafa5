package conn

import (
	"context"

	"github.com/flxproto/felix"
)

// CounterAdd adds delta to a counter and returns the broker's answer
// value (found false when the broker reported none). Counters need
// FeatureCounters. The add is sent once and never re-sent: counter_add
// carries nothing a broker could drop a duplicate by, so a caller that
// re-sends after a lost answer may count twice (the protocol's adds are
// at-least-once for whoever re-sends). Counters are a keyspace of their
// own beside the cache's values, and watches do not see them.
func (c *Client) CounterAdd(ctx context.Context, ref CacheRef, key string, delta int64) (value int64, found bool, err error) {
	m := &felix.CounterAdd{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key, Delta: delta}
	ans, err := c.cacheRequest(ctx, "counter_add", func(id uint64) felix.Message { m.RequestID = id; return m })
	if err != nil {
		return 0, false, err
	}
	cv, ok := ans.(*felix.CounterValue)
	if !ok {
		return 0, false, answerError(ans, m.RequestID)
	}
	return cv.Value.V, cv.Value.Set, nil
}

// CounterGet reads a counter; found is false when it was never written.
func (c *Client) CounterGet(ctx context.Context, ref CacheRef, key string) (value int64, found bool, err error) {
	m := &felix.CounterGet{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key}
	ans, err := c.cacheRequest(ctx, "counter_get", func(id uint64) felix.Message { m.RequestID = id; return m })
	if err != nil {
		return 0, false, err
	}
	cv, ok := ans.(*felix.CounterValue)
	if !ok {
		return 0, false, answerError(ans, m.RequestID)
	}
	return cv.Value.V, cv.Value.Set, nil
}
