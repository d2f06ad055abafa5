package api

import (
	"context"
	"time"

	"github.com/flxproto/felix"
)

// Inspection, reads and cluster queries. Each is safe to re-send (a
// read), so client.Client retries it after a lost connection. The
// shard-level reads (OffsetForTime, StreamRead) go to the shard's leader;
// the rest go to any broker, or to the one client.Client.At names.

// CacheShards asks for a cache's shard count (0: unknown cache). Needs
// felix.FeatureCacheShards.
func (x Calls) CacheShards(ctx context.Context, ref felix.CacheRef) (uint32, error) {
	m := &felix.CacheShards{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache}
	v, err := do[*felix.CacheShardsView](ctx, x, m)
	if err != nil {
		return 0, err
	}
	return v.Shards, nil
}

// OffsetForTime returns the offset of the first record of a shard appended
// at or after at; found is false when no readable record is that recent.
// Needs felix.FeatureRecordTimestamps; in-memory streams are refused.
func (x Calls) OffsetForTime(ctx context.Context, t felix.Topic, shard uint32, at time.Time) (offset uint64, found bool, err error) {
	micros := at.UnixMicro()
	m := &felix.OffsetForTime{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, Shard: shard,
		AtMicros: uint64(max(micros, 0))}
	v, err := do[*felix.OffsetValue](ctx, x, m)
	if err != nil {
		return 0, false, err
	}
	return v.Offset.V, v.Offset.Set, nil
}

// ReadOptions bounds a StreamRead page.
type ReadOptions struct {
	// From is the first offset to read.
	From uint64
	// End, when set, is the exclusive end (default: the committed tail).
	End felix.Opt[uint64]
	// MaxRecords and MaxBytes bound the page (0: the broker's caps).
	MaxRecords uint32
	MaxBytes   uint64
}

// StreamRecord is one record of a StreamRead page.
type StreamRecord struct {
	Offset    uint64
	Payload   []byte
	Publisher string
	// Timestamp is the append time in µs since the epoch.
	Timestamp uint64
}

// ReadPage is one page of StreamRead.
type ReadPage struct {
	// Records are in offset order.
	Records []StreamRecord
	// Next is where the next page starts; an empty page with Next ==
	// From means nothing is committed there yet.
	Next uint64
}

// StreamRead reads a bounded page of a durable shard without a
// subscription. An offset outside the retained range is a *felix.CursorError.
// Needs felix.FeatureStreamRead.
func (x Calls) StreamRead(ctx context.Context, t felix.Topic, shard uint32, o ReadOptions) (ReadPage, error) {
	m := &felix.StreamRead{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, Shard: shard, From: o.From,
		End: o.End, MaxRecords: o.MaxRecords, MaxBytes: o.MaxBytes}
	v, err := do[*felix.StreamRecords](ctx, x, m)
	if err != nil {
		return ReadPage{}, err
	}
	p := ReadPage{Records: make([]StreamRecord, len(v.Records)), Next: v.NextOffset}
	for i, r := range v.Records {
		p.Records[i] = StreamRecord{Offset: r.Offset, Payload: r.Payload, Publisher: r.Publisher.V, Timestamp: r.TimestampMicros}
	}
	return p, nil
}

// ShardInspect returns a broker's view of one shard (role, phase, lease,
// replicas ...). The token needs exactly the node.view:cluster:*
// permission (else a forbidden *BrokerError). Needs felix.FeatureInspect.
func (x Calls) ShardInspect(ctx context.Context, tenant, namespace, name string, kind felix.ShardKind, shard uint32) (felix.ShardInspection, error) {
	m := &felix.ShardInspect{TenantID: tenant, Namespace: namespace, Name: name, Kind: kind, Shard: shard}
	v, err := do[*felix.ShardInspectInfo](ctx, x, m)
	if err != nil {
		return felix.ShardInspection{}, err
	}
	return v.View, nil
}

// SubscriptionsPage is one page of Subscriptions.
type SubscriptionsPage struct {
	// NodeID is the answering broker ("" outside a cluster).
	NodeID string
	// Subscriptions are ordered by tenant, namespace, stream, shard and
	// subscriber id.
	Subscriptions []felix.SubscriptionInfo
	// Next is the cursor of the next page, nil on the last page.
	Next *felix.SubscriptionsCursor
}

// Subscriptions lists a broker's subscriptions matching filter, limit per
// page (0: the broker's default), from cursor (nil: the first page). Needs
// felix.FeatureInspect and a token granting node.view:cluster:*.
func (x Calls) Subscriptions(ctx context.Context, filter felix.SubscriptionsFilter, limit uint32, cursor *felix.SubscriptionsCursor) (SubscriptionsPage, error) {
	m := &felix.SubscriptionsList{Filter: filter}
	if limit > 0 {
		m.Limit = felix.Some(limit)
	}
	if cursor != nil {
		m.Cursor = felix.Some(*cursor)
	}
	v, err := do[*felix.SubscriptionsListInfo](ctx, x, m)
	if err != nil {
		return SubscriptionsPage{}, err
	}
	p := SubscriptionsPage{NodeID: v.NodeID, Subscriptions: v.Subscriptions}
	if v.NextCursor.Set {
		nc := v.NextCursor.V
		p.Next = &nc
	}
	return p, nil
}

// StreamShards asks a stream's shard count and routing. Shards 0 means
// the broker does not know the stream (not 1); an absent Routing is
// felix.RoutingModulo, so v.Routing.V.Shard(key, v.Shards) is the shard a
// routing key lands on. Needs felix.FeatureStreamShards. client.Client
// keeps the answer to route keyed requests of the stream.
func (x Calls) StreamShards(ctx context.Context, t felix.Topic) (*felix.StreamShardsView, error) {
	return do[*felix.StreamShardsView](ctx, x, &felix.StreamShards{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream})
}

// ShardOwners lists the owner of every shard of a stream or cache (kind
// felix.ShardKindStream or felix.ShardKindCache), in shard order; an
// empty list means the name is unknown. Needs felix.FeatureShardOwners.
func (x Calls) ShardOwners(ctx context.Context, tenant, namespace, name string, kind felix.ShardKind) ([]felix.ShardOwner, error) {
	v, err := do[*felix.ShardOwnersView](ctx, x, &felix.ShardOwners{TenantID: tenant, Namespace: namespace, Name: name, Kind: kind})
	if err != nil {
		return nil, err
	}
	return v.Owners, nil
}

// Topology lists the cluster's brokers (node id and client address).
// Needs felix.FeatureTopology (standalone brokers do not advertise it).
func (x Calls) Topology(ctx context.Context) ([]felix.BrokerEndpoint, error) {
	v, err := do[*felix.TopologyView](ctx, x, &felix.Topology{})
	if err != nil {
		return nil, err
	}
	return v.Brokers, nil
}
