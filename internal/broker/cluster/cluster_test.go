package cluster_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/server"
)

func TestStartAndClose(t *testing.T) {
	t0 := time.Now()
	c := start(t, cluster.Config{Nodes: 3})
	t.Logf("3-node cluster started in %v", time.Since(t0))
	require.Equal(t, 3, c.Nodes())
	addrs := c.Addrs()
	require.Len(t, addrs, 3)
	for i, a := range addrs {
		cl := dial(t, c, a, nil)
		caps := cl.Capabilities()
		require.True(t, caps.Flags.Has(felix.FlagBinaryPublishAckOwner), "node %d", i)
		require.True(t, caps.Features.Has(server.ClusterFeatures), "node %d", i)
	}
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")
	_, err := os.Stat(c.CAFile())
	require.True(t, os.IsNotExist(err), "the temporary directory is removed")
}

func TestFixtureFile(t *testing.T) {
	dir := t.TempDir()
	c := start(t, cluster.Config{Nodes: 2, Dir: dir, UnauthorizedToken: "nope"})
	url, err := c.ServeControl("127.0.0.1:0")
	require.NoError(t, err)
	path := filepath.Join(dir, "f.json")
	require.NoError(t, c.WriteFixture(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"addrs", "tenant_id", "namespace", "token", "unauthorized_token", "ca_file",
		"durable_stream", "cache", "single_shard_cache", "missing_stream", "movable_stream", "quorum_stream",
		"control_url", "control_token", "link_addr", "link_stream", "faults"} {
		require.Contains(t, m, k)
	}
	require.Len(t, m, 17, "no member beyond the format (and control_token)")
	require.Equal(t, url, m["control_url"])
	require.Equal(t, c.ControlToken(), m["control_token"])
	require.Equal(t, "nope", m["unauthorized_token"])
	pem, err := os.ReadFile(m["ca_file"].(string))
	require.NoError(t, err)
	require.Equal(t, c.CertificatePEM(), pem)
	faults := m["faults"].([]any)
	require.Len(t, faults, 7)
	require.Equal(t, map[string]any{"id": "fault.publish_through_a_dropped_link", "during": "publish", "fault": "drop",
		"after_records": 3.0, "records": 10.0, "hold_ms": 8000.0}, faults[0])
}

// Every node answers topology, shard_owners, stream_shards and
// cache_shards from the one map: a client learns the cluster from a seed.
func TestDiscoveryFromOneSeed(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3})
	f := c.Fixture()
	for i := range c.Nodes() {
		s := dialRaw(t, c, c.Addr(i)).stream(felix.DefaultClientFlags(), allFeatures)
		s.send(&felix.Topology{})
		tv := s.recv().(*felix.TopologyView)
		require.Len(t, tv.Brokers, 3)
		for j, b := range tv.Brokers {
			require.Equal(t, felix.BrokerEndpoint{NodeID: c.NodeID(j), Addr: c.Addr(j)}, b)
		}
		s.send(&felix.ShardOwners{TenantID: f.TenantID, Namespace: f.Namespace, Name: f.DurableStream,
			Kind: felix.ShardKindStream, RequestID: 1})
		ov := s.recv().(*felix.ShardOwnersView)
		require.Equal(t, uint64(1), ov.RequestID)
		require.Len(t, ov.Owners, cluster.DefaultDurableShards)
		for sh, o := range ov.Owners {
			owner, gen := c.Owner(f.DurableStream, uint32(sh))
			require.Equal(t, felix.ShardOwner{Shard: uint32(sh), NodeID: felix.Some(c.NodeID(owner)),
				Addr: felix.Some(c.Addr(owner)), Generation: gen}, o)
		}
		s.send(&felix.ShardOwners{TenantID: f.TenantID, Namespace: f.Namespace, Name: f.MissingStream,
			Kind: felix.ShardKindStream, RequestID: 2})
		require.Empty(t, s.recv().(*felix.ShardOwnersView).Owners)
		s.send(&felix.ShardOwners{TenantID: f.TenantID, Namespace: f.Namespace, Name: f.Cache,
			Kind: felix.ShardKindCache, RequestID: 3})
		require.Len(t, s.recv().(*felix.ShardOwnersView).Owners, 1)
		s.send(&felix.StreamShards{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.DurableStream, RequestID: 4})
		require.Equal(t, &felix.StreamShardsView{Shards: cluster.DefaultDurableShards, RequestID: 4}, s.recv())
		s.send(&felix.StreamShards{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.MissingStream, RequestID: 5})
		require.Equal(t, &felix.StreamShardsView{Shards: 0, RequestID: 5}, s.recv())
		s.send(&felix.CacheShards{TenantID: f.TenantID, Namespace: f.Namespace, Cache: f.Cache, RequestID: 6})
		require.Equal(t, &felix.CacheShardsView{Shards: 1, RequestID: 6}, s.recv())
	}
}

// A non-owner answers subscribe with not_leader naming the owner; the
// owner serves it.
func TestRedirectToOwner(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3})
	f := c.Fixture()
	owner, gen := c.Owner(f.DurableStream, 1)
	other := nonOwner(c, f.DurableStream, 1)
	tp := topic(c, f.DurableStream)
	opts := conn.SubscribeOptions{Shard: felix.Some(uint32(1)), Start: felix.StartPosition{Kind: felix.StartEarliest}}

	_, err := dial(t, c, c.Addr(other), nil).Subscribe(ctxT(t), tp, opts)
	var nl *felix.NotLeaderError
	require.ErrorAs(t, err, &nl)
	require.Equal(t, felix.NotLeaderError{NodeID: c.NodeID(owner), Addr: c.Addr(owner), Generation: gen}, *nl)

	// Without FEATURE_REDIRECT: an error with code not_leader, retry redirect.
	_, err = dial(t, c, c.Addr(other), func(cfg *conn.Config) {
		cfg.Features = felix.DefaultClientFeatures() &^ felix.FeatureRedirect
	}).Subscribe(ctxT(t), tp, opts)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotLeader, be.Code)
	require.Equal(t, felix.RetryRedirect, be.RetryClass())
	require.Contains(t, be.Message, c.Addr(owner))

	// Following the redirect works, and a publish through the non-owner
	// is forwarded to the same log.
	sub, err := dial(t, c, nl.Addr, nil).Subscribe(ctxT(t), tp, opts)
	require.NoError(t, err)
	defer sub.Close()
	key := keyFor(t, 1)
	res, err := dial(t, c, c.Addr(other), nil).Publish(ctxT(t), tp, []byte("via non-owner"),
		conn.PublishOptions{Ack: felix.AckPerMessage, Key: key})
	require.NoError(t, err)
	require.True(t, res.HasOffset)
	ev, err := sub.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, "via non-owner", string(ev.Payload))
	require.Equal(t, res.Offset, ev.Offset)
}

// keyFor finds a routing key that lands on shard of the durable stream.
func keyFor(t testing.TB, shard uint32) []byte {
	for i := range 1000 {
		k := []byte("key-" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		if shardOf(k) == shard {
			return k
		}
	}
	t.Fatal("no key for shard")
	return nil
}

// The default fixture names a token that authenticates but may do
// nothing: a publish with it is refused with forbidden, and the fixture
// validates.
func TestDefaultUnauthorizedToken(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 1})
	require.Equal(t, cluster.DefaultUnauthorizedToken, c.Fixture().UnauthorizedToken)
	_, err := c.ServeControl("127.0.0.1:0")
	require.NoError(t, err)
	f := c.Fixture()
	require.NoError(t, f.Validate())
	cl := dial(t, c, c.Addr(0), func(cfg *conn.Config) { cfg.Token = cluster.DefaultUnauthorizedToken })
	_, err = cl.Publish(ctxT(t), topic(c, cluster.DurableStream), []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
}
