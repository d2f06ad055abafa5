package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
)

// The group, commit, conditional and inspection calls against the
// reference cluster (internal/broker/cluster, three nodes over real QUIC):
// each call is sent to a broker that does not lead the shard first, so
// that it is redirected to the leader.

// work is a 3-shard durable stream declared on the test cluster.
var work = client.Topic{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Stream: "work"}

// startFeatureCluster starts a 3-node cluster (attempt bound 2) with the work
// stream.
func startFeatureCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	cfg := cluster.Config{Nodes: 3}
	// Strict (-strict): unknown names stay unknown, as the tests ask.
	cfg.Engine.NoAutoCreateStreams, cfg.Engine.NoAutoCreateCaches = true, true
	cfg.Engine.Groups.MaxAttempts = 2
	cl, err := cluster.Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	require.NoError(t, cl.Engine().CreateStream(engine.Topic{Tenant: work.TenantID, Namespace: work.Namespace, Stream: work.Stream},
		engine.StreamConfig{Durable: true, Shards: 3}))
	return cl
}

// seedClient returns a client seeded with node seed only.
func seedClient(t *testing.T, cl *cluster.Cluster, seed int, adjust func(*client.Config)) (*client.Client, *notices) {
	t.Helper()
	return newClient(t, []string{cl.Addr(seed)}, func(c *client.Config) {
		c.Conn.TLS = cl.TLS()
		c.Conn.TenantID, c.Conn.Token = cluster.DefaultTenant, cluster.DefaultToken
		if adjust != nil {
			adjust(c)
		}
	})
}

// notLeading returns the index of a node that does not lead shard of the
// work stream, and the leader's address.
func notLeading(t *testing.T, cl *cluster.Cluster, c *client.Client, shard uint32) (int, string) {
	t.Helper()
	owners, err := c.ShardOwners(ctxT(t), work.TenantID, work.Namespace, work.Stream, felix.ShardKindStream)
	require.NoError(t, err)
	require.Len(t, owners, 3)
	leader := owners[shard].Addr.V
	for i := range cl.Nodes() {
		if cl.Addr(i) != leader {
			return i, leader
		}
	}
	t.Fatal("every node leads the shard")
	return 0, ""
}

func TestGroupOnTheClusterGoesToTheLeader(t *testing.T) {
	cl := startFeatureCluster(t)
	probe, _ := seedClient(t, cl, 0, nil)
	const shard = 1
	seed, _ := notLeading(t, cl, probe, shard)
	c, n := seedClient(t, cl, seed, func(c *client.Config) { c.NoDiscovery = true })
	ctx := ctxT(t)

	g := c.Group(api.GroupRef{Topic: work, Shard: shard, Group: "workers"})
	// An empty poll is an answer; it was redirected to the leader.
	recs, err := g.Poll(ctx, api.PollOptions{Max: 4})
	require.NoError(t, err)
	require.Empty(t, recs)
	require.Positive(t, n.count(client.NoticeRedirect), "the poll was sent to a follower first")

	// Records for the shard: publish under keys that route there.
	shards, routing, err := shardsOf(c.StreamShards(ctx, work))
	require.NoError(t, err)
	var keys [][]byte
	for i := 0; len(keys) < 4; i++ {
		k := []byte{byte('a' + i)}
		if routing.ShardOf(k, true, shards) == shard {
			keys = append(keys, k)
		}
	}
	for i, k := range keys {
		_, err := c.Publish(ctx, work, []byte{byte('0' + i)}, client.PublishOptions{Ack: felix.AckPerBatch, Key: k})
		require.NoError(t, err)
	}
	recs, err = g.Poll(ctx, api.PollOptions{Max: 2, Wait: time.Second})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, uint32(1), recs[0].Attempts)
	require.NoError(t, g.Ack(ctx, recs[0].Offset))
	// A second ack of the same offset holds no claim: stale_claim, typed.
	var be *felix.BrokerError
	require.ErrorAs(t, g.Ack(ctx, recs[0].Offset), &be)
	require.Equal(t, felix.CodeStaleClaim, be.Code)
	granted, err := g.Extend(ctx, recs[1].Offset, recs[1].Attempts, time.Minute)
	require.NoError(t, err)
	require.Positive(t, granted)
	require.NoError(t, g.Nack(ctx, recs[1].Offset, api.NackOptions{}))
	again, err := g.Poll(ctx, api.PollOptions{Max: 1})
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, recs[1].Offset, again[0].Offset)
	require.Equal(t, uint32(2), again[0].Attempts)
	// The attempt bound is 2: this nack sets it aside.
	require.NoError(t, g.Nack(ctx, again[0].Offset, api.NackOptions{}))
	dead, err := g.DeadLetters(ctx)
	require.NoError(t, err)
	require.Equal(t, []uint64{recs[1].Offset}, dead)
	info, err := g.Describe(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.DeadLetters)
	require.NoError(t, g.Redrive(ctx, recs[1].Offset))
	dead, err = g.DeadLetters(ctx)
	require.NoError(t, err)
	require.Empty(t, dead)

	// The consumer loop: the redriven record (attempts reset) and the two
	// not yet polled; the body acks one explicitly, leaves one unsettled
	// (acked by the loop), dead-letters the third and then breaks out.
	var seen []uint64
	var attempts []uint32
	for d, err := range g.Records(ctx, api.PollOptions{Max: 3}) {
		require.NoError(t, err)
		seen = append(seen, d.Offset)
		attempts = append(attempts, d.Attempts)
		switch len(seen) {
		case 1:
			require.NoError(t, d.Ack(ctx))
		case 3:
			require.NoError(t, d.DeadLetter(ctx))
		}
		if len(seen) == 3 {
			break
		}
	}
	slices.Sort(seen)
	require.Equal(t, []uint64{recs[1].Offset, recs[1].Offset + 1, recs[1].Offset + 2}, seen)
	require.Equal(t, []uint32{1, 1, 1}, attempts, "a redriven record starts again at attempt 1")
	info, err = g.Describe(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(0), info.InFlight)
	require.Equal(t, uint64(0), info.Owed)
	require.Equal(t, uint64(1), info.DeadLetters)
	dead, err = g.DeadLetters(ctx)
	require.NoError(t, err)
	require.NoError(t, g.Discard(ctx, dead[0]))

	// Breaking out of the loop gives the record back at once.
	_, err = c.Publish(ctx, work, []byte("x"), client.PublishOptions{Ack: felix.AckPerBatch, Key: keys[0]})
	require.NoError(t, err)
	for d, err := range g.Records(ctx) {
		require.NoError(t, err)
		require.Equal(t, "x", string(d.Payload))
		break
	}
	back, err := g.Poll(ctx, api.PollOptions{Max: 1})
	require.NoError(t, err)
	require.Len(t, back, 1, "nacked by the loop, redelivered at once")
	require.Equal(t, uint32(2), back[0].Attempts)
	require.NoError(t, g.Ack(ctx, back[0].Offset))

	pos, err := g.Seek(ctx, felix.StartPosition{Kind: felix.StartEarliest}, false)
	require.NoError(t, err)
	require.True(t, pos.Moved)
	existed, err := g.Delete(ctx)
	require.NoError(t, err)
	require.True(t, existed)
}

func TestCommitOnTheClusterGoesToTheLeader(t *testing.T) {
	cl := startFeatureCluster(t)
	probe, _ := seedClient(t, cl, 0, nil)
	ctx := ctxT(t)
	shards, routing, err := shardsOf(probe.StreamShards(ctx, work))
	require.NoError(t, err)
	entity := []byte("account-1")
	seed, _ := notLeading(t, cl, probe, routing.ShardOf(entity, true, shards))
	c, n := seedClient(t, cl, seed, func(c *client.Config) { c.NoDiscovery = true })

	off, err := c.Commit(ctx, api.CommitRequest{Topic: work, EntityKey: entity, Ops: []api.CommitOp{
		api.PublishEvent("", []byte("opened")), api.PutState("", "balance", []byte("10"))}})
	require.NoError(t, err)
	require.Positive(t, n.count(client.NoticeRedirect))
	v, err := c.StateGet(ctx, work, entity, "balance")
	require.NoError(t, err)
	require.Equal(t, api.StateValue{Value: []byte("10"), Found: true, Version: off, HasVersion: true, AsOf: v.AsOf, HasAsOf: true}, v)
	require.GreaterOrEqual(t, v.AsOf, off)
	absent, err := c.StateGet(ctx, work, entity, "never")
	require.NoError(t, err)
	require.False(t, absent.Found)
	require.Nil(t, absent.Value)

	// A stale expected offset: refused with the tail, nothing written.
	_, err = c.Commit(ctx, api.CommitRequest{Topic: work, EntityKey: entity, ExpectedOffset: felix.Some(off),
		Ops: []api.CommitOp{api.PublishEvent("", []byte("late")), api.DeleteState("", "balance")}})
	var rf *felix.PublishRefusedError
	require.ErrorAs(t, err, &rf)
	tail, ok := rf.Tail()
	require.True(t, ok)
	require.Equal(t, off+1, tail)
	off2, err := c.Commit(ctx, api.CommitRequest{Topic: work, EntityKey: entity, ExpectedOffset: felix.Some(tail),
		Ops: []api.CommitOp{api.PublishEvent("", []byte("closed")), api.DeleteState("", "balance")}})
	require.NoError(t, err)
	require.Equal(t, tail, off2)
	gone, err := c.StateGet(ctx, work, entity, "balance")
	require.NoError(t, err)
	require.False(t, gone.Found, "deleted: absent, not empty")

	// publish_if on the same shard: lands at the tail, then is refused.
	res, err := c.PublishIf(ctx, work, [][]byte{[]byte("if")}, entity, off2+1)
	require.NoError(t, err)
	require.Equal(t, off2+1, res.Offset)
	_, err = c.PublishIf(ctx, work, [][]byte{[]byte("if")}, entity, off2+1)
	require.ErrorAs(t, err, &rf)
	tail, _ = rf.Tail()
	require.Equal(t, off2+2, tail)

	// Conditional cache writes.
	cache := client.CacheRef{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Cache: cluster.Cache}
	r, err := c.CachePutIf(ctx, cache, "lock", []byte("me"), felix.CacheCondition{Kind: felix.CondAbsent}, 0)
	require.NoError(t, err)
	require.True(t, r.Applied)
	r2, err := c.CachePutIf(ctx, cache, "lock", []byte("you"), felix.CacheCondition{Kind: felix.CondAbsent}, 0)
	require.NoError(t, err)
	require.False(t, r2.Applied)
	require.Equal(t, r.Version, r2.Version, "the refusal names the current version")
	item, err := c.CacheGetVersioned(ctx, cache, "lock")
	require.NoError(t, err)
	require.Equal(t, "me", string(item.Value))
	d, err := c.CacheDeleteIf(ctx, cache, "lock", item.Version+1)
	require.NoError(t, err)
	require.False(t, d.Applied)
	d, err = c.CacheDeleteIf(ctx, cache, "lock", item.Version)
	require.NoError(t, err)
	require.True(t, d.Applied)
}

func TestCommitValidatedBeforeAnythingIsSent(t *testing.T) {
	// No broker listens at the seed: a refused commit never dials.
	c, n := newClient(t, []string{"127.0.0.1:1"}, nil)
	ctx := ctxT(t)
	for _, tc := range []struct {
		ops   []api.CommitOp
		want  error
		index int
	}{
		{[]api.CommitOp{api.PutState("", "k", nil)}, api.ErrCommitEventCount, -1},
		{[]api.CommitOp{api.PublishEvent("", nil), api.EnqueueEvent("", nil)}, api.ErrCommitEventCount, 1},
		{[]api.CommitOp{api.PublishEvent("", nil), api.PutState("elsewhere", "k", nil)}, api.ErrCommitNotOnOwningShard, 1},
		{[]api.CommitOp{api.PublishEvent("", nil), api.DeleteState("", "")}, api.ErrCommitInvalidOp, 1},
	} {
		_, err := c.Commit(ctx, api.CommitRequest{Topic: work, EntityKey: []byte("e"), Ops: tc.ops})
		require.ErrorIs(t, err, tc.want)
		var ce *api.CommitError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, tc.index, ce.Index, "%v", err)
	}
	require.Zero(t, n.count(client.NoticeDialFailed), "nothing dialled")
}

func TestFeaturesNotAdvertisedAreNotSent(t *testing.T) {
	cl := startFeatureCluster(t)
	// A client offering nothing gets nothing advertised.
	c, _ := seedClient(t, cl, 0, func(c *client.Config) { c.Conn.Legacy = true })
	ctx := ctxT(t)
	_, err := c.Commit(ctx, api.CommitRequest{Topic: work, EntityKey: []byte("e"), Ops: []api.CommitOp{api.PublishEvent("", nil)}})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.StateGet(ctx, work, []byte("e"), "k")
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.PublishIf(ctx, work, [][]byte{nil}, nil, 0)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.Group(api.GroupRef{Topic: work, Group: "g"}).Poll(ctx, api.PollOptions{})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.Topology(ctx)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.StreamRead(ctx, work, 0, api.ReadOptions{})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.CachePutIf(ctx, client.CacheRef{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Cache: cluster.Cache},
		"k", nil, felix.CacheCondition{Kind: felix.CondAbsent}, 0)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.ShardInspect(ctx, work.TenantID, work.Namespace, work.Stream, felix.ShardKindStream, 0)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.Subscriptions(ctx, felix.SubscriptionsFilter{}, 0, nil)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
}

func TestInspectionOnTheCluster(t *testing.T) {
	cl := startFeatureCluster(t)
	c, _ := seedClient(t, cl, 0, nil)
	ctx := ctxT(t)
	n, routing, err := shardsOf(c.StreamShards(ctx, work))
	require.NoError(t, err)
	require.Equal(t, uint32(3), n)
	require.Equal(t, felix.RoutingModulo, routing)
	n, _, err = shardsOf(c.StreamShards(ctx, client.Topic{TenantID: work.TenantID, Namespace: work.Namespace, Stream: cluster.MissingStream}))
	require.NoError(t, err)
	require.Zero(t, n, "unknown stream: 0, not 1")
	cs, err := c.CacheShards(ctx, client.CacheRef{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Cache: cluster.SingleShardCache})
	require.NoError(t, err)
	require.Equal(t, uint32(1), cs)
	cs, err = c.CacheShards(ctx, client.CacheRef{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Cache: "no-such-cache"})
	require.NoError(t, err)
	require.Zero(t, cs)
	brokers, err := c.Topology(ctx)
	require.NoError(t, err)
	require.Len(t, brokers, 3)
	owners, err := c.ShardOwners(ctx, work.TenantID, work.Namespace, "no-such-stream", felix.ShardKindStream)
	require.NoError(t, err)
	require.Empty(t, owners)

	// offset_for_time and stream_read go to the shard's leader.
	before := time.Now().Add(-time.Second)
	for i := range 3 {
		_, err := c.Publish(ctx, work, []byte{byte('a' + i)}, client.PublishOptions{Ack: felix.AckPerBatch, Key: []byte("k")})
		require.NoError(t, err)
	}
	shard := routing.ShardOf([]byte("k"), true, 3)
	off, found, err := c.OffsetForTime(ctx, work, shard, before)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, uint64(0), off)
	_, found, err = c.OffsetForTime(ctx, work, shard, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.False(t, found)
	page, err := c.StreamRead(ctx, work, shard, api.ReadOptions{From: 1})
	require.NoError(t, err)
	require.Len(t, page.Records, 2)
	require.Equal(t, "b", string(page.Records[0].Payload))
	require.Equal(t, uint64(3), page.Next)
	_, err = c.StreamRead(ctx, work, shard, api.ReadOptions{From: 99})
	var ce *felix.CursorError
	require.True(t, errors.As(err, &ce), "got %v", err)

	// Shard inspection and subscription listing need the operator token
	// (node.view:cluster:*); the application's token is refused.
	_, err = c.ShardInspect(ctx, work.TenantID, work.Namespace, work.Stream, felix.ShardKindStream, shard)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
	ops, _ := seedClient(t, cl, 0, func(c *client.Config) { c.Conn.Token = cluster.InspectToken })
	view, err := ops.ShardInspect(ctx, work.TenantID, work.Namespace, work.Stream, felix.ShardKindStream, shard)
	require.NoError(t, err)
	require.Equal(t, "leader", view.Role, "routed to the shard's leader")
	require.True(t, view.Serving)
	require.Equal(t, uint32(3), view.Shards)
	require.Equal(t, felix.Some(uint64(3)), view.Tail)
	owners, err = ops.ShardOwners(ctx, work.TenantID, work.Namespace, work.Stream, felix.ShardKindStream)
	require.NoError(t, err)
	leader := owners[shard].Addr.V
	require.Equal(t, owners[shard].NodeID.V, view.NodeID)
	require.Equal(t, owners[shard].NodeID.V, view.Assignment.V.Leader)
	other := cl.Addr(0)
	if other == leader {
		other = cl.Addr(1)
	}
	fview, err := api.New(ops.At(other)).ShardInspect(ctx, work.TenantID, work.Namespace, work.Stream, felix.ShardKindStream, shard)
	require.NoError(t, err)
	require.Equal(t, "none", fview.Role)
	require.Equal(t, felix.Some("not_assigned_here"), fview.Reason)
	require.NotEqual(t, view.NodeID, fview.NodeID)

	sub, err := c.Subscribe(ctx, work, client.SubscribeOptions{Shard: shard})
	require.NoError(t, err)
	defer sub.Close()
	listed, err := api.New(ops.At(leader)).Subscriptions(ctx, felix.SubscriptionsFilter{Stream: felix.Some(work.Stream)}, 0, nil)
	require.NoError(t, err)
	require.Equal(t, view.NodeID, listed.NodeID)
	require.Len(t, listed.Subscriptions, 1, "the leader serves the subscription")
	require.Equal(t, shard, listed.Subscriptions[0].Shard)
	elsewhere, err := api.New(ops.At(other)).Subscriptions(ctx, felix.SubscriptionsFilter{Stream: felix.Some(work.Stream)}, 0, nil)
	require.NoError(t, err)
	require.Empty(t, elsewhere.Subscriptions, "each broker lists its own")

	// A request without a typed call: Request (any broker), At (one).
	req := &felix.StreamShards{TenantID: work.TenantID, Namespace: work.Namespace, Stream: work.Stream}
	ans, err := c.Request(ctx, req)
	require.NoError(t, err)
	require.NotZero(t, req.RequestID, "Request sets the request id")
	require.Equal(t, &felix.StreamShardsView{Shards: 3, RequestID: req.RequestID}, ans)
	ans, err = c.At(cl.Addr(2)).Request(ctx, &felix.Topology{})
	require.NoError(t, err)
	require.Len(t, ans.(*felix.TopologyView).Brokers, 3)
}
