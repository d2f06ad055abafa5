package client

import (
	"context"

	"github.com/flxproto/felix"
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
	v, err := c.StreamShards(ctx, t) // Request keeps the answer
	if err != nil || v.Shards == 0 {
		return shardInfo{}, false
	}
	return shardInfo{shards: v.Shards, routing: v.Routing.V}, true
}
