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

// learnOwnersOnce makes sure a call routed to a shard of a stream whose
// shard view is known starts on the shard's owner: when no owner of k is
// known yet, the client asks a broker for the stream's owners
// (shard_owners, once per view of the stream), so that no keyed publish
// is sent to a broker that would forward or redirect it, whichever broker
// is home. A broker that does not advertise shard_owners, or a failed
// ask, leaves the call to find its owner by redirect.
func (c *Client) learnOwnersOnce(ctx context.Context, k ownerKey) {
	if k.kind != felix.ShardKindStream {
		return
	}
	t := Topic{TenantID: k.tenant, Namespace: k.namespace, Stream: k.name}
	c.mu.Lock()
	_, known := c.owners[k]
	info, ok := c.shards[t]
	ask := ok && !known && !info.ownersAsked
	if ask {
		info.ownersAsked = true
		c.shards[t] = info
	}
	c.mu.Unlock()
	if !ask {
		return
	}
	// The answer is learnt by the request path (learnAnswer).
	_, err := c.request(ctx, &felix.ShardOwners{TenantID: k.tenant, Namespace: k.namespace, Name: k.name, Kind: k.kind}, nil)
	if err != nil {
		c.log.Debug("felix client: shard_owners", "stream", k.name, "err", err)
	}
}
