package conn_test

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/server"
)

func TestRawRequestsAndStreams(t *testing.T) {
	srv := startRef(t, nil)
	c := dialRef(t, srv, nil)
	ctx := testCtx(t)

	// One request, one answer, as it came.
	ans, err := c.RawRequest(ctx, &felix.StreamShards{TenantID: server.DemoTenant, Namespace: "ns", Stream: "s", RequestID: 5})
	require.NoError(t, err)
	require.Equal(t, &felix.StreamShardsView{Shards: 1, RequestID: 5}, ans)
	ans, err = c.RawRequest(ctx, &felix.Extension{Name: "acme.ping"})
	require.NoError(t, err)
	require.Equal(t, &felix.Unsupported{RequestType: "extension", Extension: felix.Some("acme.ping")}, ans)

	// A raw stream carries several requests and their answers.
	rs, err := c.OpenRaw(ctx)
	require.NoError(t, err)
	defer rs.Close()
	require.True(t, rs.Capabilities().Features.Has(felix.FeatureConsumerGroup))
	require.NoError(t, rs.Send(ctx, &felix.CachePut{TenantID: server.DemoTenant, Namespace: "ns", Cache: "c", Key: "k", Value: []byte("v"),
		RequestID: felix.Some(uint64(1))}))
	require.NoError(t, rs.Send(ctx, &felix.CacheGet{TenantID: server.DemoTenant, Namespace: "ns", Cache: "c", Key: "k", RequestID: felix.Some(uint64(2))}))
	require.NoError(t, rs.Send(ctx, &felix.UnknownMessage{Type: "frobnicate", Raw: []byte(`{"type":"frobnicate"}`)}))
	require.NoError(t, rs.CloseWrite())
	m, err := rs.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, &felix.CacheOK{RequestID: 1}, m)
	m, err = rs.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, []byte("v"), m.(*felix.CacheValue).Value.V)
	m, err = rs.Recv(ctx)
	require.NoError(t, err)
	require.Equal(t, &felix.Unsupported{RequestType: "frobnicate"}, m)
	_, err = rs.Recv(ctx)
	require.ErrorIs(t, err, io.EOF)

	// Refused without sending: a second auth, an unadvertised request.
	require.ErrorIs(t, rs.Send(ctx, &felix.Auth{TenantID: "t1", Token: "x"}), felix.ErrNotAdvertised)
	_, err = c.RawRequest(ctx, &felix.Topology{})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)

	// Against a broker without FeatureUnsupported unknown types are not sent.
	b := startBare(t, felix.BrokerOffer{Flags: felix.KnownFlags})
	bc := b.Dial(t, nil)
	_, err = bc.RawRequest(ctx, &felix.UnknownMessage{Type: "frobnicate"})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = bc.RawRequest(ctx, &felix.Extension{Name: "x"})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	require.Empty(t, b.Received())

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.RawRequest(cctx, &felix.StreamShards{TenantID: server.DemoTenant, Namespace: "ns", Stream: "s", RequestID: 6})
	require.ErrorIs(t, err, context.Canceled)
}
