package cluster_test

import (
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/cluster"
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

// Consumer groups, commits, publish_if and offset_for_time are served by
// the shard's leader only; a non-owner redirects them.
func TestLeaderOnlyRequests(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3})
	f := c.Fixture()
	owner, gen := c.Owner(f.MovableStream, 0)
	want := &felix.NotLeader{NodeID: c.NodeID(owner), Addr: felix.Some(c.Addr(owner)), Generation: gen}
	reqs := []felix.Message{
		&felix.GroupPoll{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.MovableStream, Group: "g", MaxRecords: 1, RequestID: 1},
		&felix.Commit{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.MovableStream, EntityKey: []byte("e"),
			Event: []byte("ev"), RequestID: 2},
		&felix.PublishIf{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.MovableStream,
			Payloads: [][]byte{[]byte("x")}, RequestID: 3},
		&felix.OffsetForTime{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.MovableStream, RequestID: 4},
	}
	r := dialRaw(t, c, c.Addr(nonOwner(c, f.MovableStream, 0)))
	for _, m := range reqs {
		s := r.stream(felix.DefaultClientFlags(), allFeatures)
		s.send(m)
		require.Equal(t, want, s.recv(), m.MessageType())
	}
	o := dialRaw(t, c, c.Addr(owner))
	for _, m := range reqs {
		s := o.stream(felix.DefaultClientFlags(), allFeatures)
		s.send(m)
		require.NotEqual(t, "not_leader", s.recv().MessageType(), "the owner serves %s", m.MessageType())
	}
}
