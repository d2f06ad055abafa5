package conn

import (
	"context"
	"time"

	"github.com/flxproto/felix"
)

// Inspection and addressing calls. Each is one request on a stream of its
// own, sent only when the broker advertised its feature (ErrNotAdvertised,
// nothing sent, otherwise).

// CacheShards asks for a cache's shard count (0: unknown cache). Needs
// felix.FeatureCacheShards.
func (c *Client) CacheShards(ctx context.Context, ref CacheRef) (uint32, error) {
	m := &felix.CacheShards{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, RequestID: c.nextID()}
	ans, err := c.request(ctx, m)
	if err != nil {
		return 0, err
	}
	v, err := answerAs[*felix.CacheShardsView](ans, m.RequestID)
	if err != nil {
		return 0, err
	}
	return v.Shards, nil
}

// OffsetForTime returns the offset of the first record of a shard appended
// at or after at; found is false when no readable record is that recent.
// Needs felix.FeatureRecordTimestamps; in-memory streams are refused.
func (c *Client) OffsetForTime(ctx context.Context, t Topic, shard uint32, at time.Time) (offset uint64, found bool, err error) {
	micros := at.UnixMicro()
	m := &felix.OffsetForTime{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, Shard: shard,
		AtMicros: uint64(max(micros, 0)), RequestID: c.nextID()}
	ans, err := c.request(ctx, m)
	if err != nil {
		return 0, false, err
	}
	v, err := answerAs[*felix.OffsetValue](ans, m.RequestID)
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
// subscription. An offset outside the retained range is a *CursorError.
// Needs felix.FeatureStreamRead.
func (c *Client) StreamRead(ctx context.Context, t Topic, shard uint32, o ReadOptions) (ReadPage, error) {
	m := &felix.StreamRead{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, Shard: shard, From: o.From,
		End: o.End, MaxRecords: o.MaxRecords, MaxBytes: o.MaxBytes, RequestID: c.nextID()}
	ans, err := c.request(ctx, m)
	if err != nil {
		return ReadPage{}, err
	}
	v, err := answerAs[*felix.StreamRecords](ans, m.RequestID)
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
func (c *Client) ShardInspect(ctx context.Context, tenant, namespace, name string, kind felix.ShardKind, shard uint32) (felix.ShardInspection, error) {
	m := &felix.ShardInspect{TenantID: tenant, Namespace: namespace, Name: name, Kind: kind, Shard: shard, RequestID: c.nextID()}
	ans, err := c.request(ctx, m)
	if err != nil {
		return felix.ShardInspection{}, err
	}
	v, err := answerAs[*felix.ShardInspectInfo](ans, m.RequestID)
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
func (c *Client) Subscriptions(ctx context.Context, filter felix.SubscriptionsFilter, limit uint32, cursor *felix.SubscriptionsCursor) (SubscriptionsPage, error) {
	m := &felix.SubscriptionsList{Filter: filter, RequestID: c.nextID()}
	if limit > 0 {
		m.Limit = felix.Some(limit)
	}
	if cursor != nil {
		m.Cursor = felix.Some(*cursor)
	}
	ans, err := c.request(ctx, m)
	if err != nil {
		return SubscriptionsPage{}, err
	}
	v, err := answerAs[*felix.SubscriptionsListInfo](ans, m.RequestID)
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
