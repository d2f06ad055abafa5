package api_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

func TestInspectionAgainstTheReferenceBroker(t *testing.T) {
	clk := &fakeNow{}
	clk.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	srv := startRef(t, func(c *server.Config) {
		c.Engine.Now = clk.now
		c.Engine.NoAutoCreateStreams = true
		c.Engine.NoAutoCreateCaches = true
		c.Tokens = map[string]server.Identity{server.DemoToken: {Tenant: server.DemoTenant, Principal: server.DemoTenant},
			"ops": {Tenant: server.DemoTenant, Principal: "ops", Deny: server.PermAll, Grant: server.PermNodeView}}
	})
	sharded := felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "sharded"}
	require.NoError(t, srv.Engine().CreateStream(engine.Topic{Tenant: sharded.TenantID, Namespace: sharded.Namespace, Stream: sharded.Stream},
		engine.StreamConfig{Durable: true, Shards: 3}))
	srv.Engine().CreateCache(engine.CacheRef{Tenant: server.DemoTenant, Namespace: "ns", Cache: "c"})
	cc := dialRef(t, srv, nil)
	c := api.New(cc)
	ctx := testCtx(t)

	s, err := c.StreamShards(ctx, sharded)
	require.NoError(t, err)
	require.Equal(t, uint32(3), s.Shards)
	require.Equal(t, felix.RoutingModulo, s.Routing.V)
	s, err = c.StreamShards(ctx, felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "missing"})
	require.NoError(t, err)
	require.Equal(t, uint32(0), s.Shards, "unknown stream: 0, not 1")
	n, err := c.CacheShards(ctx, felix.CacheRef{TenantID: server.DemoTenant, Namespace: "ns", Cache: "c"})
	require.NoError(t, err)
	require.Equal(t, uint32(1), n)

	// offset_for_time over records appended at two broker times.
	t0 := clk.now()
	key := []byte("k")
	_, err = cc.PublishBatch(ctx, sharded, [][]byte{[]byte("a"), []byte("b")}, conn.PublishOptions{Ack: felix.AckPerBatch, Key: key})
	require.NoError(t, err)
	clk.advance(time.Minute)
	_, err = cc.PublishBatch(ctx, sharded, [][]byte{[]byte("c")}, conn.PublishOptions{Ack: felix.AckPerBatch, Key: key})
	require.NoError(t, err)
	shards, err := c.StreamShards(ctx, sharded)
	require.NoError(t, err)
	shard := shards.Routing.V.Shard(key, shards.Shards)
	off, found, err := c.OffsetForTime(ctx, sharded, shard, t0.Add(time.Second))
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, uint64(2), off)
	_, found, err = c.OffsetForTime(ctx, sharded, shard, t0.Add(time.Hour))
	require.NoError(t, err)
	require.False(t, found, "nothing that recent")

	page, err := c.StreamRead(ctx, sharded, shard, api.ReadOptions{From: 1, End: felix.Some(uint64(2))})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	require.Equal(t, api.StreamRecord{Offset: 1, Payload: []byte("b"), Publisher: server.DemoTenant, Timestamp: uint64(t0.UnixMicro())}, page.Records[0])
	_, err = c.StreamRead(ctx, sharded, shard, api.ReadOptions{From: 99})
	var ce *felix.CursorError
	require.True(t, errors.As(err, &ce), "got %v", err)
	require.Equal(t, "in_future", ce.Reason)

	// What a standalone reference broker does not advertise is not sent.
	_, err = c.Topology(ctx)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)

	// Inspection needs a token granted node.view:cluster:*.
	_, err = c.ShardInspect(ctx, server.DemoTenant, "ns", "sharded", felix.ShardKindStream, shard)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
	_, err = c.Subscriptions(ctx, felix.SubscriptionsFilter{}, 0, nil)
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
	ops := api.New(dialRef(t, srv, func(cfg *conn.Config) { cfg.Token = "ops" }))
	view, err := ops.ShardInspect(ctx, server.DemoTenant, "ns", "sharded", felix.ShardKindStream, shard)
	require.NoError(t, err)
	require.Equal(t, felix.ShardInspection{Shards: 3, Role: "leader", Phase: "active", Serving: true,
		Tail: felix.Some(uint64(3)), Committed: felix.Some(uint64(3))}, view)
	sub, err := cc.Subscribe(ctx, sharded, conn.SubscribeOptions{Shard: felix.Some(shard)})
	require.NoError(t, err)
	defer sub.Close()
	p, err := ops.Subscriptions(ctx, felix.SubscriptionsFilter{Stream: felix.Some("sharded")}, 0, nil)
	require.NoError(t, err)
	require.Len(t, p.Subscriptions, 1)
	require.Equal(t, shard, p.Subscriptions[0].Shard)
	require.Equal(t, uint64(3), p.Subscriptions[0].Tail)
	require.Nil(t, p.Next)

	// A client that offered nothing has nothing advertised: not sent.
	legacy := api.New(dialRef(t, srv, func(cfg *conn.Config) { cfg.Legacy = true; cfg.Token = "ops" }))
	_, err = legacy.ShardInspect(ctx, server.DemoTenant, "ns", "sharded", felix.ShardKindStream, 0)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = legacy.Subscriptions(ctx, felix.SubscriptionsFilter{}, 0, nil)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
}

// TestInspectionCallsOverQUIC drives the cluster-only calls against a
// broker that answers them.
func TestInspectionCallsOverQUIC(t *testing.T) {
	owners := []felix.ShardOwner{{Shard: 0, NodeID: felix.Some("a"), Addr: felix.Some("127.0.0.1:1"), Generation: 3}}
	view := felix.ShardInspection{NodeID: "a", Shards: 2, Role: "leader", Phase: "active", Serving: true}
	cursor := felix.SubscriptionsCursor{TenantID: "t1", Namespace: "ns", Stream: "s", Shard: 0, SubscriberID: 9}
	b := startAnswering(t, felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureTopology | felix.FeatureShardOwners | felix.FeatureInspect},
		func(m felix.Message) felix.Message {
			switch m := m.(type) {
			case *felix.Topology:
				return &felix.TopologyView{Brokers: []felix.BrokerEndpoint{{NodeID: "a", Addr: "127.0.0.1:1"}, {NodeID: "b", Addr: "127.0.0.1:2"}}}
			case *felix.ShardOwners:
				if m.Kind != felix.ShardKindCache {
					return &felix.ShardOwnersView{Owners: owners, RequestID: m.RequestID}
				}
			case *felix.ShardInspect:
				if m.Shard == 1 {
					return &felix.ShardInspectInfo{View: view, RequestID: m.RequestID}
				}
				return &felix.ErrorMessage{Message: "no", Code: felix.Some(felix.CodeForbidden)}
			case *felix.SubscriptionsList:
				if !m.Cursor.Set && m.Limit == felix.Some(uint32(1)) {
					return &felix.SubscriptionsListInfo{NodeID: "a", Subscriptions: []felix.SubscriptionInfo{{TenantID: "t1", Stream: "s", Policy: "block"}},
						NextCursor: felix.Some(cursor), RequestID: m.RequestID}
				}
				return &felix.SubscriptionsListInfo{NodeID: "a", RequestID: m.RequestID}
			}
			return nil
		})
	c := api.New(b.Dial(t, func(cfg *conn.Config) {
		cfg.Features = felix.DefaultClientFeatures() | felix.FeatureInspect
	}))
	ctx := testCtx(t)
	brokers, err := c.Topology(ctx)
	require.NoError(t, err)
	require.Len(t, brokers, 2)
	got, err := c.ShardOwners(ctx, "t1", "ns", "s", felix.ShardKindStream)
	require.NoError(t, err)
	require.Equal(t, owners, got)
	insp, err := c.ShardInspect(ctx, "t1", "ns", "s", felix.ShardKindStream, 1)
	require.NoError(t, err)
	require.Equal(t, view, insp)
	_, err = c.ShardInspect(ctx, "t1", "ns", "s", felix.ShardKindStream, 0)
	var be *felix.BrokerError
	require.True(t, errors.As(err, &be))
	require.Equal(t, felix.CodeForbidden, be.Code)
	p, err := c.Subscriptions(ctx, felix.SubscriptionsFilter{}, 1, nil)
	require.NoError(t, err)
	require.Equal(t, &cursor, p.Next)
	require.Len(t, p.Subscriptions, 1)
	p, err = c.Subscriptions(ctx, felix.SubscriptionsFilter{}, 1, p.Next)
	require.NoError(t, err)
	require.Nil(t, p.Next)
	// An answer of the wrong type is a protocol error, not a result.
	_, err = c.ShardOwners(ctx, "t1", "ns", "c", felix.ShardKindCache)
	require.ErrorIs(t, err, felix.ErrNotAdvertised, "unsupported answer maps to ErrNotAdvertised")
	require.Equal(t, []string{"topology", "shard_owners", "shard_inspect", "shard_inspect", "subscriptions_list",
		"subscriptions_list", "shard_owners"}, b.Received())
}

// TestInspectionNotAdvertised: against a broker that advertises none of
// the inspection features, no inspection call is sent.
func TestInspectionNotAdvertised(t *testing.T) {
	b := startBare(t, felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureErrorCodes})
	cc := b.Dial(t, nil)
	c := api.New(cc)
	ctx := testCtx(t)
	tp := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}
	_, err := c.StreamShards(ctx, tp)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.CacheShards(ctx, felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "c"})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.ShardOwners(ctx, "t1", "ns", "s", felix.ShardKindStream)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.Topology(ctx)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, _, err = c.OffsetForTime(ctx, tp, 0, time.Now())
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.StreamRead(ctx, tp, 0, api.ReadOptions{})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.ShardInspect(ctx, "t1", "ns", "s", felix.ShardKindStream, 0)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.Subscriptions(ctx, felix.SubscriptionsFilter{}, 0, nil)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = cc.RawRequest(ctx, &felix.StreamRead{TenantID: "t1", Namespace: "ns", Stream: "s"})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	require.Empty(t, b.Received(), "nothing was sent")
}
