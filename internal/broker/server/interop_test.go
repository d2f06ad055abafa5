package server_test

import (
	"crypto/tls"
	"testing"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

// Keyed publishes land where docs/routing.md §2 says, over real QUIC: key "k"
// on 4 modulo shards is on shard 0 (plain FNV-1a mod 4 would say 2), and a
// jump_hash stream places customer-0 on shard 3 of 8 and reports its
// routing in stream_shards_view, while a modulo stream leaves it absent.
func TestKeyedPlacementFollowsRoutingSpec(t *testing.T) {
	cfg := durableCfg()
	cfg.Engine.DefaultStream.Shards = 4
	srv := startBroker(t, cfg)
	jt := engine.Topic{Tenant: topic.TenantID, Namespace: topic.Namespace, Stream: "jump"}
	require.NoError(t, srv.Engine().CreateStream(jt, engine.StreamConfig{Durable: true, Shards: 8, Routing: felix.RoutingJumpHash}))
	ctx := ctxT(t)
	c := dial(t, srv, nil)

	check := func(tp felix.Topic, key string, want uint32, shards int) {
		t.Helper()
		subs := make([]*conn.Subscription, shards)
		for i := range subs {
			sub, err := c.Subscribe(ctx, tp, conn.SubscribeOptions{Shard: felix.Some(uint32(i))})
			require.NoError(t, err)
			defer sub.Close()
			subs[i] = sub
		}
		_, err := c.Publish(ctx, tp, []byte(key), conn.PublishOptions{Ack: felix.AckPerBatch, Key: []byte(key)})
		require.NoError(t, err)
		ev, err := subs[want].Next(ctx)
		require.NoError(t, err)
		require.Equal(t, key, string(ev.Payload))
		oldest, tail, err := srv.Engine().Tail(engine.Topic{Tenant: tp.TenantID, Namespace: tp.Namespace, Stream: tp.Stream}, want)
		require.NoError(t, err)
		require.Equal(t, uint64(1), tail-oldest, "exactly one record on shard %d", want)
	}
	check(topic, "k", 0, 4)
	check(felix.Topic{TenantID: jt.Tenant, Namespace: jt.Namespace, Stream: jt.Stream}, "customer-0", 3, 8)

	r := dialRaw(t, srv)
	s := r.stream(t, rawFlags, 0)
	s.send(&felix.StreamShards{TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream, RequestID: 1})
	v := s.recv().(*felix.StreamShardsView)
	require.Equal(t, uint32(4), v.Shards)
	require.False(t, v.Routing.Set, "modulo is written as an absent routing")
	s.send(&felix.StreamShards{TenantID: jt.Tenant, Namespace: jt.Namespace, Stream: jt.Stream, RequestID: 2})
	v = s.recv().(*felix.StreamShardsView)
	require.Equal(t, felix.StreamShardsView{Shards: 8, RequestID: 2, Routing: felix.Some(felix.RoutingJumpHash)}, *v)
}

// Ephemeral streams replay from their ring over real QUIC: earliest and an
// offset inside the ring are served with ring sequence numbers as offsets,
// live events carry none, and a start that left the ring is too_old.
func TestEphemeralReplayOverQUIC(t *testing.T) {
	cfg := durableCfg()
	cfg.Engine.DefaultStream = engine.StreamConfig{Durable: false, RingRecords: 4}
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	c := dial(t, srv, nil)
	for _, p := range []string{"r0", "r1", "r2", "r3", "r4", "r5"} {
		res, err := c.Publish(ctx, topic, []byte(p), conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
		require.False(t, res.HasOffset, "ephemeral acks carry no offset")
	}
	// The ring keeps r2..r5 (offsets 2..5).
	sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer sub.Close()
	for off := uint64(2); off < 6; off++ {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.True(t, ev.HasOffset)
		require.Equal(t, off, ev.Offset)
		require.Equal(t, "r"+string(rune('0'+off)), string(ev.Payload))
		require.False(t, ev.HasTimestamp, "ring records have no stored time")
	}
	_, err = c.Publish(ctx, topic, []byte("live"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "live", string(ev.Payload))
	require.False(t, ev.HasOffset, "live frames of ephemeral streams carry no offset")

	// Ring now r3..live (offsets 3..6).
	at, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartAt(5)})
	require.NoError(t, err)
	defer at.Close()
	for _, want := range []string{"r5", "live"} {
		ev, err := at.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want, string(ev.Payload))
		require.True(t, ev.HasOffset)
	}
	_, err = c.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartAt(2)})
	var ce *felix.CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, felix.CursorError{Reason: "too_old", Requested: 2, Available: 3}, *ce)
	_, err = c.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartAt(8)})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, felix.CursorError{Reason: "in_future", Requested: 8, Available: 7}, *ce)
}

// The broker passes conn's server limits through and reports them: a
// connection beyond max-conns is refused with CONNECTION_REFUSED and
// counted.
func TestBrokerConnLimits(t *testing.T) {
	cfg := durableCfg()
	cfg.ConnLimits = func(c *conn.ServerConfig) { c.MaxConnections = 1 }
	srv := startBroker(t, cfg)
	c := dial(t, srv, nil)
	_, err := conn.Dial(ctxT(t), srv.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: srv.CertPool()},
		TenantID: server.DemoTenant, Token: server.DemoToken})
	var te *quic.TransportError
	require.ErrorAs(t, err, &te)
	require.Equal(t, quic.ConnectionRefused, te.ErrorCode)
	st := srv.ConnStats()
	require.EqualValues(t, 1, st.Connections)
	require.GreaterOrEqual(t, st.RefusedConnections, uint64(1))
	_, err = c.Publish(ctxT(t), topic, []byte("still served"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
}
