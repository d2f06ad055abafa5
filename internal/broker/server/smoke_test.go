package server_test

import (
	"crypto/tls"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

func TestAdvertisesWhatItServes(t *testing.T) {
	srv := startBroker(t, server.Config{})
	c := dial(t, srv, nil)
	caps := c.Capabilities()
	require.Equal(t, server.Flags, caps.Flags)
	require.Equal(t, server.Features, caps.Features)
	require.Equal(t, uint32(server.DefaultPublishWindow), caps.PublishWindow)

	srv2 := startBroker(t, server.Config{NoPipeline: true})
	c2 := dial(t, srv2, nil)
	require.False(t, c2.Capabilities().Features.Any(felix.FeaturePublishPipeline|felix.FeatureStreamPublishWindow))
	require.Zero(t, c2.Capabilities().PublishWindow)

	legacy := dial(t, srv, func(c *conn.Config) { c.Legacy = true })
	require.True(t, legacy.Capabilities().Legacy)
}

func TestAuthRefused(t *testing.T) {
	srv := startBroker(t, server.Config{})
	for _, cred := range [][2]string{{server.DemoTenant, "wrong"}, {"other", server.DemoToken}} {
		cfg := &conn.Config{TLS: &tls.Config{RootCAs: srv.CertPool()}, TenantID: cred[0], Token: cred[1]}
		c, err := conn.Dial(ctxT(t), srv.Addr().String(), cfg)
		if c != nil {
			c.Close()
		}
		require.ErrorIs(t, err, felix.ErrAuthRefused, "%v", cred)
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Contains(t, []felix.ErrorCode{felix.CodeUnauthenticated, felix.CodeForbidden}, be.Code)
	}
}

func TestPublishSubscribeForms(t *testing.T) {
	srv := startBroker(t, durableCfg())
	ctx := ctxT(t)
	pub := dial(t, srv, nil)
	jsonPub := dial(t, srv, func(c *conn.Config) { c.ForceJSON = true })
	earliest := dial(t, srv, func(c *conn.Config) {
		c.Flags = felix.DefaultClientFlags() | felix.FlagEventBatchPublisher | felix.FlagEventBatchTimestamps
	})
	live := dial(t, srv, nil)

	liveSub, err := live.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer liveSub.Close()

	var want []string
	publish := func(c *conn.Client, o conn.PublishOptions, payloads ...string) {
		t.Helper()
		ps := make([][]byte, len(payloads))
		for i, p := range payloads {
			ps[i] = []byte(p)
		}
		res, err := c.PublishBatch(ctx, topic, ps, o)
		require.NoError(t, err)
		if o.Ack != felix.AckNone {
			require.True(t, res.HasOffset)
			require.Equal(t, uint64(len(want)), res.Offset)
		}
		want = append(want, payloads...)
	}
	publish(pub, conn.PublishOptions{Ack: felix.AckPerBatch}, "a", "b")
	publish(pub, conn.PublishOptions{Ack: felix.AckPerMessage}, "c")
	publish(jsonPub, conn.PublishOptions{Ack: felix.AckPerBatch}, "d", "e")
	publish(jsonPub, conn.PublishOptions{Ack: felix.AckPerMessage, Key: []byte("k")}, "f")
	publish(pub, conn.PublishOptions{Ack: felix.AckPerBatch, Key: []byte("k")}, "g")
	prod, err := pub.NewProducer(ctx)
	require.NoError(t, err)
	res, err := prod.PublishBatch(ctx, topic, [][]byte{[]byte("h")}, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(len(want)), res.Offset)
	want = append(want, "h")
	publish(pub, conn.PublishOptions{NoAck: true}, "i") // unacked binary, ordered on the same stream
	publish(pub, conn.PublishOptions{Ack: felix.AckPerBatch}, "j")

	sub, err := earliest.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}, QueueCapacity: 64})
	require.NoError(t, err)
	defer sub.Close()
	require.Equal(t, uint32(64), sub.Info().QueueCapacity.V)
	require.True(t, sub.Info().StartOffset.Set)
	for _, s := range []*conn.Subscription{sub, liveSub} {
		for i, w := range want {
			ev, err := s.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, w, string(ev.Payload))
			require.True(t, ev.HasOffset)
			require.Equal(t, uint64(i), ev.Offset)
			if s == sub { // offered 0x2000 and 0x4000
				require.Equal(t, server.DemoTenant, string(ev.Publisher))
				require.True(t, ev.HasTimestamp)
			} else { // default offer: neither
				require.Nil(t, ev.Publisher)
				require.False(t, ev.HasTimestamp)
			}
		}
	}
}

func TestCacheOverQUIC(t *testing.T) {
	srv := startBroker(t, server.Config{})
	ctx := ctxT(t)
	c := dial(t, srv, nil)
	ref := felix.CacheRef{TenantID: server.DemoTenant, Namespace: "ns", Cache: "c"}
	_, found, err := api.New(c).CacheGet(ctx, ref, "k")
	require.NoError(t, err)
	require.False(t, found)
	require.NoError(t, api.New(c).CachePut(ctx, ref, "k", []byte("v"), 0))
	v, found, err := api.New(c).CacheGet(ctx, ref, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v", string(v))
	old, found, err := api.New(c).CacheDelete(ctx, ref, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v", string(old))
	n, _, err := api.New(c).CounterAdd(ctx, ref, "n", 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	n, found, err = api.New(c).CounterGet(ctx, ref, "n")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, int64(3), n)
}
