package conn

import (
	"context"

	"github.com/flxproto/felix"
)

// The cluster queries topology, stream_shards and shard_owners, one request
// on a stream of its own each. (The same three calls, with the same
// signatures, are also written on the branch that adds the cluster-aware
// client; whichever lands second drops its copy.)

// StreamShards asks a stream's shard count and routing. Shards 0 means
// the broker does not know the stream (not 1); an absent Routing is
// felix.RoutingModulo, so v.Routing.V.Shard(key, v.Shards) is the shard a
// routing key lands on. Needs felix.FeatureStreamShards.
func (c *Client) StreamShards(ctx context.Context, t Topic) (*felix.StreamShardsView, error) {
	m := &felix.StreamShards{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, RequestID: c.nextID()}
	ans, err := c.request(ctx, m)
	if err != nil {
		return nil, err
	}
	return answerAs[*felix.StreamShardsView](ans, m.RequestID)
}

// ShardOwners lists the owner of every shard of a stream or cache (kind
// felix.ShardKindStream or felix.ShardKindCache), in shard order; an
// empty list means the name is unknown. Needs felix.FeatureShardOwners.
func (c *Client) ShardOwners(ctx context.Context, tenant, namespace, name string, kind felix.ShardKind) ([]felix.ShardOwner, error) {
	m := &felix.ShardOwners{TenantID: tenant, Namespace: namespace, Name: name, Kind: kind, RequestID: c.nextID()}
	ans, err := c.request(ctx, m)
	if err != nil {
		return nil, err
	}
	v, err := answerAs[*felix.ShardOwnersView](ans, m.RequestID)
	if err != nil {
		return nil, err
	}
	return v.Owners, nil
}

// Topology lists the cluster's brokers (node id and client address).
// Needs felix.FeatureTopology (standalone brokers do not advertise it).
func (c *Client) Topology(ctx context.Context) ([]felix.BrokerEndpoint, error) {
	ans, err := c.request(ctx, &felix.Topology{})
	if err != nil {
		return nil, err
	}
	v, err := answerAs[*felix.TopologyView](ans, 0)
	if err != nil {
		return nil, err
	}
	return v.Brokers, nil
}
