package cluster_test

import (
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/examples/broker/cluster"
	"github.com/stretchr/testify/require"
)

// Every request only the owner serves is redirected by a non-owner:
// stream_read and cache_watch as well as subscribe; a JSON publish is
// forwarded; shard_owners reports a fenced shard as moving.
func TestOwnerOnlyRequests(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3})
	f := c.Fixture()
	owner, gen := c.Owner(f.MovableStream, 0)
	other := nonOwner(c, f.MovableStream, 0)
	r := dialRaw(t, c, c.Addr(other))
	want := &felix.NotLeader{NodeID: c.NodeID(owner), Addr: felix.Some(c.Addr(owner)), Generation: gen}

	s := r.stream(felix.DefaultClientFlags(), allFeatures)
	s.send(&felix.StreamRead{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.MovableStream, RequestID: 1})
	require.Equal(t, want, s.recv())

	cacheOwner := -1
	for i := range c.Nodes() {
		s := dialRaw(t, c, c.Addr(i)).stream(felix.DefaultClientFlags(), allFeatures)
		s.send(&felix.CacheWatch{TenantID: f.TenantID, Namespace: f.Namespace, Cache: f.Cache, Key: felix.Some("k")})
		switch m := s.recv().(type) {
		case *felix.CacheWatchStarted:
			require.Equal(t, -1, cacheOwner, "one owner")
			cacheOwner = i
		case *felix.NotLeader:
			require.NotEmpty(t, m.Addr.V)
		default:
			t.Fatalf("node %d answered %T", i, m)
		}
	}
	require.GreaterOrEqual(t, cacheOwner, 0)

	s = r.stream(felix.DefaultClientFlags(), allFeatures)
	s.send(&felix.Publish{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.MovableStream,
		Payload: []byte("json"), RequestID: felix.Some(uint64(3)), Ack: felix.Some(felix.AckPerMessage)})
	ok := s.recv().(*felix.PublishOK)
	require.Equal(t, uint64(3), ok.RequestID)
	require.Equal(t, felix.Some(uint64(0)), ok.Offset)

	_, err := c.Fence(f.MovableStream, 0, time.Hour)
	require.NoError(t, err)
	s.send(&felix.ShardOwners{TenantID: f.TenantID, Namespace: f.Namespace, Name: f.MovableStream,
		Kind: felix.ShardKindStream, RequestID: 4})
	ov := s.recv().(*felix.ShardOwnersView)
	require.Len(t, ov.Owners, 1)
	require.Equal(t, felix.Some("moving"), ov.Owners[0].Unavailable)
	s.send(&felix.Publish{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.MovableStream,
		Payload: []byte("json"), RequestID: felix.Some(uint64(5)), Ack: felix.Some(felix.AckPerMessage)})
	pe := s.recv().(*felix.PublishError)
	require.Equal(t, felix.Some(felix.CodeShardUnavailable), pe.Code)
	require.Equal(t, felix.Some(felix.RetryRetry), pe.Retry)
	require.Equal(t, felix.Some("moving"), pe.Detail.V.Reason)
}
