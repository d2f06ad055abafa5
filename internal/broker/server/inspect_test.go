package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

const opsToken = "ops-token"

// inspectCfg is a durable broker (streams declared, not auto-created) with the demo token and an operator token
// holding exactly node.view.
func inspectCfg(t *testing.T) server.Config {
	cfg := durableCfg()
	cfg.Engine.NoAutoCreateStreams = true
	toks, err := server.ParseTokens(server.DemoTenant + ":" + server.DemoToken + "," + server.DemoTenant + ":" + opsToken + ":ops:node.view")
	require.NoError(t, err)
	cfg.Tokens = toks
	return cfg
}

func TestNodeViewPermission(t *testing.T) {
	toks, err := server.ParseTokens("t1:a:ops:node.view,t1:b:app:all,t1:c")
	require.NoError(t, err)
	require.True(t, toks["a"].Allows(server.PermNodeView))
	require.False(t, toks["a"].Allows(server.PermPublish), "exactly node.view: no data permission")
	require.False(t, toks["b"].Allows(server.PermNodeView), "all is the data permissions only")
	require.False(t, toks["c"].Allows(server.PermNodeView), "never granted by default")
	require.True(t, toks["c"].Allows(server.PermAll))
	require.Equal(t, "node.view", server.PermNodeView.String())
	require.Equal(t, "publish|node.view", (server.PermPublish | server.PermNodeView).String())
}

func TestShardInspectOverQUIC(t *testing.T) {
	srv := startBroker(t, inspectCfg(t))
	durable := engine.Topic{Tenant: server.DemoTenant, Namespace: "ns", Stream: "two"}
	require.NoError(t, srv.Engine().CreateStream(durable, engine.StreamConfig{Durable: true, Shards: 2}))
	app := dial(t, srv, nil)
	ctx := ctxT(t)
	tp := felix.Topic{TenantID: durable.Tenant, Namespace: durable.Namespace, Stream: durable.Stream}
	_, err := app.PublishBatch(ctx, tp, [][]byte{[]byte("a"), []byte("b")}, conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)

	ops := dial(t, srv, func(c *conn.Config) { c.Token = opsToken })
	v, err := api.New(ops).ShardInspect(ctx, durable.Tenant, durable.Namespace, durable.Stream, felix.ShardKindStream, 0)
	require.NoError(t, err)
	require.Equal(t, felix.ShardInspection{Shards: 2, Role: "leader", Phase: "active", Serving: true,
		Tail: felix.Some(uint64(2)), Committed: felix.Some(uint64(2))}, v)
	v, err = api.New(ops).ShardInspect(ctx, durable.Tenant, durable.Namespace, durable.Stream, felix.ShardKindStream, 7)
	require.NoError(t, err)
	require.Equal(t, felix.ShardInspection{Shards: 2, Role: "none", Phase: "unassigned", Reason: felix.Some("not_assigned_here")}, v)
	v, err = api.New(ops).ShardInspect(ctx, durable.Tenant, durable.Namespace, "missing", felix.ShardKindStream, 0)
	require.NoError(t, err)
	require.Zero(t, v.Shards)
	require.False(t, v.Serving)

	srv.Engine().CreateCache(engine.CacheRef{Tenant: durable.Tenant, Namespace: durable.Namespace, Cache: "c"})
	err = api.New(app).CachePut(ctx, felix.CacheRef{TenantID: durable.Tenant, Namespace: durable.Namespace, Cache: "c"}, "k", []byte("v"), 0)
	require.NoError(t, err)
	v, err = api.New(ops).ShardInspect(ctx, durable.Tenant, durable.Namespace, "c", felix.ShardKindCache, 0)
	require.NoError(t, err)
	require.Equal(t, felix.ShardInspection{Shards: 1, Role: "leader", Phase: "active", Serving: true,
		Tail: felix.Some(uint64(1)), Committed: felix.Some(uint64(1))}, v, "a cache's tail is its change log's")

	// Without node.view: forbidden, and the stream stays open.
	_, err = api.New(app).ShardInspect(ctx, durable.Tenant, durable.Namespace, durable.Stream, felix.ShardKindStream, 0)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
	rs, err := app.OpenRaw(ctx)
	require.NoError(t, err)
	defer rs.Close()
	require.NoError(t, rs.Send(ctx, &felix.ShardInspect{TenantID: durable.Tenant, Namespace: "ns", Name: "two", Kind: felix.ShardKindStream, RequestID: 1}))
	require.NoError(t, rs.Send(ctx, &felix.StreamShards{TenantID: durable.Tenant, Namespace: "ns", Stream: "two", RequestID: 2}))
	m, err := rs.Recv(ctx)
	require.NoError(t, err)
	require.IsType(t, &felix.ErrorMessage{}, m)
	m, err = rs.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, &felix.StreamShardsView{Shards: 2, RequestID: 2}, m)

	// The operator token holds no data permission.
	_, err = ops.Publish(ctx, tp, []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
}

func TestSubscriptionsListOverQUIC(t *testing.T) {
	srv := startBroker(t, inspectCfg(t))
	for _, s := range []string{"a-stream", "b-stream"} {
		require.NoError(t, srv.Engine().CreateStream(engine.Topic{Tenant: server.DemoTenant, Namespace: "ns", Stream: s}, engine.StreamConfig{}))
	}
	app := dial(t, srv, nil)
	ctx := ctxT(t)
	var subs []*conn.Subscription
	for _, s := range []string{"b-stream", "a-stream", "b-stream"} {
		sub, err := app.Subscribe(ctx, felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: s}, conn.SubscribeOptions{})
		require.NoError(t, err)
		subs = append(subs, sub)
	}
	defer func() {
		for _, s := range subs {
			s.Close()
		}
	}()
	ops := dial(t, srv, func(c *conn.Config) { c.Token = opsToken })
	page, err := api.New(ops).Subscriptions(ctx, felix.SubscriptionsFilter{}, 2, nil)
	require.NoError(t, err)
	require.Len(t, page.Subscriptions, 2)
	require.NotNil(t, page.Next)
	require.Equal(t, "a-stream", page.Subscriptions[0].Stream, "ordered by stream")
	require.Equal(t, "b-stream", page.Subscriptions[1].Stream)
	first := page.Subscriptions[0]
	require.Equal(t, server.DemoTenant, first.Principal.V)
	require.Equal(t, "drop_new", first.Policy)
	require.Positive(t, first.Capacity)
	require.True(t, first.Peer.Set)
	page2, err := api.New(ops).Subscriptions(ctx, felix.SubscriptionsFilter{}, 2, page.Next)
	require.NoError(t, err)
	require.Len(t, page2.Subscriptions, 1)
	require.Nil(t, page2.Next, "the last page has no cursor")
	require.Greater(t, page2.Subscriptions[0].SubscriberID, page.Subscriptions[1].SubscriberID)

	only, err := api.New(ops).Subscriptions(ctx, felix.SubscriptionsFilter{Stream: felix.Some("a-stream")}, 0, nil)
	require.NoError(t, err)
	require.Len(t, only.Subscriptions, 1)
	none, err := api.New(ops).Subscriptions(ctx, felix.SubscriptionsFilter{Dropping: true}, 0, nil)
	require.NoError(t, err)
	require.Empty(t, none.Subscriptions, "no queue dropped anything")

	// A subscription that ends leaves the list.
	require.NoError(t, subs[1].Close())
	waitFor(t, func() bool {
		p, err := api.New(ops).Subscriptions(ctx, felix.SubscriptionsFilter{}, 0, nil)
		return err == nil && len(p.Subscriptions) == 2
	}, "a closed subscription is no longer listed")

	_, err = api.New(app).Subscriptions(ctx, felix.SubscriptionsFilter{}, 0, nil)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
}
