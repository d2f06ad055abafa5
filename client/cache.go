package client

import (
	"context"
	"time"

	"github.com/flxproto/felix/conn"
)

// Cache and counter calls go to any broker (the broker reached forwards
// them to the cache shard's owner). Puts, gets and deletes are retried after
// a lost connection (re-applying one has the same effect); a counter add
// whose outcome is unknown is not (it would count twice): it returns an
// *AmbiguousError.

// CachePut writes key = value with an optional TTL (0: no expiry).
func (c *Client) CachePut(ctx context.Context, ref CacheRef, key string, value []byte, ttl time.Duration) error {
	if err := c.checkCache("cache_put", ref); err != nil {
		return err
	}
	return c.run(ctx, call{op: "cache_put", safe: true}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		return cc.CachePut(ctx, ref, key, value, ttl)
	})
}

// CacheGet reads key; a miss is found == false, not an error.
func (c *Client) CacheGet(ctx context.Context, ref CacheRef, key string) (value []byte, found bool, err error) {
	if err := c.checkCache("cache_get", ref); err != nil {
		return nil, false, err
	}
	err = c.run(ctx, call{op: "cache_get", safe: true}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		var err error
		value, found, err = cc.CacheGet(ctx, ref, key)
		return err
	})
	return value, found, err
}

// CacheDelete removes key and returns the value it held (found == false
// when there was none).
func (c *Client) CacheDelete(ctx context.Context, ref CacheRef, key string) (old []byte, found bool, err error) {
	if err := c.checkCache("cache_delete", ref); err != nil {
		return nil, false, err
	}
	err = c.run(ctx, call{op: "cache_delete", safe: true}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		var err error
		old, found, err = cc.CacheDelete(ctx, ref, key)
		return err
	})
	return old, found, err
}

// CounterAdd adds delta in one round trip and returns the new total. It is
// not re-sent when its outcome is unknown (*AmbiguousError).
func (c *Client) CounterAdd(ctx context.Context, ref CacheRef, key string, delta int64) (value int64, found bool, err error) {
	if err := c.checkCache("counter_add", ref); err != nil {
		return 0, false, err
	}
	err = c.run(ctx, call{op: "counter_add"}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		var err error
		value, found, err = cc.CounterAdd(ctx, ref, key, delta)
		return err
	})
	return value, found, err
}

// CounterGet reads a counter; found is false when it was never written.
func (c *Client) CounterGet(ctx context.Context, ref CacheRef, key string) (value int64, found bool, err error) {
	if err := c.checkCache("counter_get", ref); err != nil {
		return 0, false, err
	}
	err = c.run(ctx, call{op: "counter_get", safe: true}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		var err error
		value, found, err = cc.CounterGet(ctx, ref, key)
		return err
	})
	return value, found, err
}
