package client

import (
	"context"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// streamKey returns the owner key of the shard a publish with key lands
// on, or nil when the client cannot tell (standalone brokers need no
// routing; a keyed publish to a stream whose shard count is unknown goes
// to any broker, which forwards it).
func (c *Client) streamKey(ctx context.Context, t Topic, key []byte) *ownerKey {
	if !c.clustered.Load() {
		return nil
	}
	k := &ownerKey{kind: felix.ShardKindStream, tenant: t.TenantID, namespace: t.Namespace, name: t.Stream}
	if key == nil {
		return k
	}
	info, ok := c.shardInfo(ctx, t)
	if !ok {
		return nil
	}
	k.shard = info.routing.ShardOf(key, true, info.shards)
	return k
}

// shardInfo returns the cached shard count of t, asking a broker once.
func (c *Client) shardInfo(ctx context.Context, t Topic) (shardInfo, bool) {
	c.mu.Lock()
	info, ok := c.shards[t]
	c.mu.Unlock()
	if ok {
		return info, true
	}
	n, routing, err := c.StreamShards(ctx, t)
	if err != nil || n == 0 {
		return shardInfo{}, false
	}
	return shardInfo{shards: n, routing: routing}, true
}

// StreamShards asks a stream's shard count (0 for an unknown stream) and
// how it maps keys to shards. The answer is cached for routing keyed
// publishes (felix.Routing) to their shard's owner.
func (c *Client) StreamShards(ctx context.Context, t Topic) (shards uint32, routing felix.Routing, err error) {
	if err := c.checkTopic("stream_shards", t); err != nil {
		return 0, routing, err
	}
	err = c.run(ctx, call{op: "stream_shards", safe: true}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		v, err := cc.StreamShards(ctx, t)
		if err != nil {
			return err
		}
		shards, routing = v.Shards, v.Routing.V // absent routing is modulo, the zero value
		return nil
	})
	if err == nil && shards > 0 {
		c.mu.Lock()
		c.shards[t] = shardInfo{shards: shards, routing: routing}
		c.mu.Unlock()
	}
	return shards, routing, err
}
