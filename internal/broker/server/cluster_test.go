package server_test

import (
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// A standalone broker (no Router) advertises no cluster bit and answers
// the cluster requests as unknown.
func TestStandaloneHasNoClusterSurface(t *testing.T) {
	srv := startBroker(t, server.Config{})
	require.Zero(t, srv.Offer().Flags&server.ClusterFlags)
	require.Zero(t, srv.Offer().Features&server.ClusterFeatures)
	s := dialRaw(t, srv).stream(t, felix.DefaultClientFlags(), felix.DefaultClientFeatures())
	s.send(&felix.Topology{})
	require.Equal(t, &felix.Unsupported{RequestType: "topology"}, s.recv())
	s.send(&felix.ShardOwners{TenantID: server.DemoTenant, Namespace: "ns", Name: "s", Kind: felix.ShardKindStream, RequestID: 9})
	require.Equal(t, &felix.Unsupported{RequestType: "shard_owners", RequestID: felix.Some(uint64(9))}, s.recv())
}
