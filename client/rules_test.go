package client_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/conntest"
)

// Rules of routing, re-sending and the producer against scripted brokers
// (issue 34, round 2).

// publishedTo returns the publishes received since the first before.
func publishedTo(t *testing.T, cl *conntest.Cluster, before int) []conntest.Received {
	t.Helper()
	var out []conntest.Received
	for _, r := range cl.Received()[before:] {
		if r.Publish != nil {
			out = append(out, r)
		}
	}
	return out
}

// Once a stream's shard view is known, a keyed publish goes straight to
// the owner of its shard (no forward, no redirect) whichever broker the
// client treats as home, including a home moved by topology answers, for
// every routing (absent = modulo, modulo, jump_hash).
func TestRulesKeyedPublishFromAnyHome(t *testing.T) {
	const nodes, shards = 3, 5
	routings := []struct {
		name    string
		routing felix.Routing
	}{{"absent", felix.RoutingModulo}, {"jump_hash", felix.RoutingJumpHash}}
	for _, rt := range routings {
		for home := range nodes {
			for _, discover := range []bool{false, true} {
				for _, learn := range []string{"shard_owners", "publishes", "stream_shards only"} {
					t.Run(fmt.Sprint(rt.name, " home ", home, " topology ", discover, " ", learn), func(t *testing.T) {
						cl := conntest.Start(t, conntest.Options{Nodes: nodes})
						cl.SetShards("s", shards, rt.routing)
						for s := range uint32(shards) {
							cl.SetOwner("s", s, int(s+1)%nodes)
						}
						c, n := scriptedClient(t, cl, []string{cl.Nodes[home].Addr}, func(cfg *client.Config) { cfg.NoDiscovery = !discover })
						require.NoError(t, c.Connect(ctxT(t)))
						if discover {
							n.wait(t, client.NoticeDiscovered, nil)
						}
						_, err := api.New(c).StreamShards(ctxT(t), sTopic)
						require.NoError(t, err)
						if learn == "shard_owners" {
							_, err = api.New(c).ShardOwners(ctxT(t), sTopic.TenantID, sTopic.Namespace, sTopic.Stream, felix.ShardKindStream)
							require.NoError(t, err)
						} else {
							for s := range uint32(shards) {
								_, err := c.Publish(ctxT(t), sTopic, []byte("warm"), client.PublishOptions{Ack: felix.AckPerBatch, Key: keyFor(rt.routing, shards, s)})
								require.NoError(t, err)
							}
						}
						redirects := n.count(client.NoticeRedirect)
						before := len(cl.Received())
						for i := range 30 {
							key := []byte(fmt.Sprint("key-", i))
							_, err := c.Publish(ctxT(t), sTopic, []byte("v"), client.PublishOptions{Ack: felix.AckPerBatch, Key: key})
							require.NoError(t, err)
						}
						for _, r := range publishedTo(t, cl, before) {
							want := (int(rt.routing.ShardOf(r.Publish.Key, true, shards)) + 1) % nodes
							require.Equal(t, want, r.Node, "key %q went straight to the owner of its shard", r.Publish.Key)
						}
						require.Equal(t, redirects, n.count(client.NoticeRedirect), "no redirect")
					})
				}
			}
		}
	}
}

// Owners in a shard_owners answer the application asked for are kept: the
// first keyed publish of every shard goes to its owner, and the client
// does not ask the owners again.
func TestRulesShardOwnersAnswerKept(t *testing.T) {
	const shards = 4
	cl := conntest.Start(t, conntest.Options{Nodes: 3})
	cl.SetShards("s", shards, felix.RoutingJumpHash)
	for s := range uint32(shards) {
		cl.SetOwner("s", s, 2-int(s)%3)
	}
	c, n := scriptedClient(t, cl, nil, nil)
	_, err := c.Request(ctxT(t), &felix.ShardOwners{TenantID: sTopic.TenantID, Namespace: sTopic.Namespace, Name: sTopic.Stream, Kind: felix.ShardKindStream})
	require.NoError(t, err)
	for s := range uint32(shards) {
		_, err := c.Publish(ctxT(t), sTopic, []byte("v"), client.PublishOptions{Ack: felix.AckPerBatch, Key: keyFor(felix.RoutingJumpHash, shards, s)})
		require.NoError(t, err)
	}
	var nodes []int
	for _, r := range publishedTo(t, cl, 0) {
		nodes = append(nodes, r.Node)
	}
	require.Equal(t, []int{2, 1, 0, 2}, nodes, "each shard's first publish to its owner")
	require.Zero(t, n.count(client.NoticeRedirect))
	require.Len(t, cl.ReceivedOf("shard_owners"), 1, "the application's answer was kept, not asked again")
}

// A redirect never goes back to a broker already tried in the same
// attempt: two brokers naming each other are each tried once.
func TestRulesRedirectNeverBack(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 2})
	for i, nd := range cl.Nodes {
		other := cl.Nodes[1-i]
		nd.Always("publish", func(x *conntest.Exchange) error {
			return x.AnswerPublish(felix.PublishResult{}, &felix.NotLeaderError{NodeID: other.ID, Addr: other.Addr, Generation: 1})
		})
	}
	c, _ := scriptedClient(t, cl, nil, func(cfg *client.Config) { cfg.MaxAttempts, cfg.MaxRedirects = -1, 5 })
	_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
	require.Equal(t, felix.RetryRedirect, client.RetryClassOf(err), "%v", err)
	var nodes []int
	for _, r := range publishedTo(t, cl, 0) {
		nodes = append(nodes, r.Node)
	}
	require.Equal(t, []int{0, 1}, nodes, "not redirected back to node 0")
}

// An owner hint of a lower generation never replaces a newer one: an ack
// naming a stale owner does not move the next publish off the owner a
// newer redirect named.
func TestRulesOlderOwnerHintIgnored(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 3})
	n1, n2 := cl.Nodes[1], cl.Nodes[2]
	cl.Nodes[0].On("publish", func(x *conntest.Exchange) error {
		return x.AnswerPublish(felix.PublishResult{}, &felix.NotLeaderError{NodeID: n2.ID, Addr: n2.Addr, Generation: 5})
	})
	n2.On("publish", nil, func(x *conntest.Exchange) error {
		res, err := x.PublishResult()
		res.HasOwner, res.Owner = true, felix.AckOwner{NodeID: n1.ID, Addr: n1.Addr, Generation: 3}
		return x.AnswerPublish(res, err)
	})
	c, _ := scriptedClient(t, cl, nil, nil)
	for range 3 {
		_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
		require.NoError(t, err)
	}
	var nodes []int
	for _, r := range publishedTo(t, cl, 0) {
		nodes = append(nodes, r.Node)
	}
	require.Equal(t, []int{0, 2, 2, 2}, nodes, "generation 3 did not replace generation 5")
}

// An idempotent producer numbers its batches per shard: two keys on one
// shard share one sequence space (per key, the second key's batch 0
// would be taken for a duplicate and dropped).
func TestRulesProducerSequencePerShard(t *testing.T) {
	const shards = 3
	cl := conntest.Start(t, conntest.Options{})
	cl.SetShards("s", shards, felix.RoutingModulo)
	c, _ := scriptedClient(t, cl, nil, nil)
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	var keys [][]byte
	for i := 0; len(keys) < 3; i++ {
		k := []byte(fmt.Sprint("k", i))
		if felix.RoutingModulo.Shard(k, shards) == 1 {
			keys = append(keys, k)
		}
	}
	for i, k := range keys {
		_, err := p.PublishBatch(ctxT(t), sTopic, [][]byte{[]byte(fmt.Sprint("b", i))}, client.PublishOptions{Key: k})
		require.NoError(t, err)
	}
	var seqs []uint64
	for _, r := range publishedTo(t, cl, 0) {
		seqs = append(seqs, r.Publish.Sequence)
	}
	require.Equal(t, []uint64{0, 1, 2}, seqs, "one sequence space for the shard")
	require.Len(t, cl.Log("s", 1), 3, "every batch written")
}

// publish_if and commit are not safe to re-send: after a lost answer the
// caller is told the outcome is unknown, and the request was sent once.
func TestRulesConditionalWritesAmbiguous(t *testing.T) {
	calls := map[string]func(ctx context.Context, c *client.Client) error{
		"publish_if": func(ctx context.Context, c *client.Client) error {
			_, err := api.New(c).PublishIf(ctx, sTopic, [][]byte{[]byte("x")}, []byte("k"), 0)
			return err
		},
		"commit": func(ctx context.Context, c *client.Client) error {
			_, err := api.New(c).Commit(ctx, api.CommitRequest{Topic: sTopic, EntityKey: []byte("e"), Ops: []api.CommitOp{api.PublishEvent("", []byte("ev"))}})
			return err
		},
	}
	lose := map[string]conntest.Handler{
		"connection reset": func(x *conntest.Exchange) error { return x.ResetConn() },
		"stream reset":     func(x *conntest.Exchange) error { return x.ResetStream() },
	}
	for typ, call := range calls {
		for how, h := range lose {
			t.Run(typ+" "+how, func(t *testing.T) {
				cl := conntest.Start(t, conntest.Options{Nodes: 2, Configure: withFeatures(felix.FeatureAtomicCommit | felix.FeaturePublishConditional)})
				for _, nd := range cl.Nodes {
					nd.Always(typ, h)
				}
				c, _ := scriptedClient(t, cl, cl.Addrs(), nil)
				err := call(ctxT(t), c)
				require.ErrorIs(t, err, client.ErrAmbiguous, "%s after a lost answer", typ)
				var amb *client.AmbiguousError
				require.ErrorAs(t, err, &amb)
				require.Equal(t, typ, amb.Op)
				require.Len(t, cl.ReceivedOf(typ), 1, "never re-sent")
			})
		}
	}
}

var cacheRef = client.CacheRef{TenantID: conntest.Tenant, Namespace: "app", Cache: "c"}

// A cache_delete whose answer was lost is re-sent; when the re-send finds
// nothing, the first may have removed the value: the caller is told the
// outcome is unknown, never "absent". A re-send that finds a value
// reports it, and a delete answered at once reports what it found.
func TestRulesCacheDeleteResent(t *testing.T) {
	value := func(v []byte) conntest.Handler {
		return func(x *conntest.Exchange) error {
			m := x.Request.Message.(*felix.CacheDelete)
			cv := &felix.CacheValue{RequestID: m.RequestID}
			if v != nil {
				cv.Value = felix.Some(v)
			}
			return x.Reply(cv)
		}
	}
	lost := func(x *conntest.Exchange) error { return x.ResetStream() }
	reset := func(x *conntest.Exchange) error { return x.ResetConn() }
	unknown := func(x *conntest.Exchange) error {
		return x.Fail(&felix.BrokerError{Message: "may have been applied", Code: felix.CodeInternal, Retry: felix.RetryOutcomeUnknown})
	}
	cases := []struct {
		name     string
		script   []conntest.Handler
		want     []byte
		found    bool
		ambigous bool
	}{
		{"lost then absent", []conntest.Handler{lost, value(nil)}, nil, false, true},
		{"lost twice then absent", []conntest.Handler{lost, lost, value(nil)}, nil, false, true},
		{"connection reset then absent", []conntest.Handler{reset, value(nil)}, nil, false, true},
		{"outcome_unknown then absent", []conntest.Handler{unknown, value(nil)}, nil, false, true},
		{"lost then found", []conntest.Handler{lost, value([]byte("old"))}, []byte("old"), true, false},
		{"absent", []conntest.Handler{value(nil)}, nil, false, false},
		{"found", []conntest.Handler{value([]byte("old"))}, []byte("old"), true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{Configure: withFeatures(felix.FeatureCacheDelete)})
			cl.Nodes[0].On("cache_delete", tc.script...)
			c, _ := scriptedClient(t, cl, nil, nil)
			old, found, err := api.New(c).CacheDelete(ctxT(t), cacheRef, "k")
			require.Len(t, cl.ReceivedOf("cache_delete"), len(tc.script), "re-sent after each lost answer")
			if tc.ambigous {
				require.ErrorIs(t, err, client.ErrAmbiguous, "never a definite absent after a lost answer")
				require.False(t, found)
				require.Equal(t, felix.RetryOutcomeUnknown, client.RetryClassOf(err))
				require.Contains(t, err.Error(), "cache_delete")
				require.Contains(t, err.Error(), "re-sent after a lost answer", "says what happened: %v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.found, found)
			require.Equal(t, tc.want, old)
		})
	}
}

// withFeatures offers f besides conntest.Features.
func withFeatures(f felix.Features) func(int, *conn.ServerConfig) {
	return func(_ int, c *conn.ServerConfig) { c.Offer.Features |= f }
}

// A producer's keyed batch sent while stream_shards answers not_found or
// 0 shards (the stream does not exist yet) goes to any broker; once stream_shards
// succeeds, the keyed batches are routed by the shard count then known,
// straight to their shards' owners, each shard numbering its own
// sequences after the batch it already holds.
func TestRulesProducerRouteLearntLate(t *testing.T) {
	for _, unknown := range []string{"not_found", "0 shards"} {
		t.Run(unknown, func(t *testing.T) { producerRouteLearntLate(t, unknown == "not_found") })
	}
}

func producerRouteLearntLate(t *testing.T, notFound bool) {
	const shards = 4
	cl := conntest.Start(t, conntest.Options{Nodes: 2})
	for s := range uint32(shards) {
		cl.SetOwner("s", s, int(s%2))
	}
	var created atomic.Bool
	for _, nd := range cl.Nodes {
		nd.Always("stream_shards", func(x *conntest.Exchange) error {
			m := x.Request.Message.(*felix.StreamShards)
			switch {
			case !created.Load() && notFound:
				return x.Fail(&felix.BrokerError{Message: "stream not found", Code: felix.CodeNotFound})
			case !created.Load():
				return x.Reply(&felix.StreamShardsView{RequestID: m.RequestID}) // 0: unknown stream
			}
			return x.Reply(&felix.StreamShardsView{RequestID: m.RequestID, Shards: shards})
		})
	}
	c, _ := scriptedClient(t, cl, nil, nil)
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	first := keyFor(felix.RoutingModulo, shards, 0) // shard 0 under the count to come
	_, err = p.PublishBatch(ctxT(t), sTopic, [][]byte{[]byte("first")}, client.PublishOptions{Key: first})
	require.NoError(t, err)

	created.Store(true)
	cl.SetShards("s", shards, felix.RoutingModulo)
	before := len(cl.Received())
	for s := range uint32(shards) {
		for i := range 2 {
			_, err := p.PublishBatch(ctxT(t), sTopic, [][]byte{[]byte(fmt.Sprint(s, "-", i))}, client.PublishOptions{Key: keyFor(felix.RoutingModulo, shards, s)})
			require.NoError(t, err)
		}
	}
	for _, r := range publishedTo(t, cl, before) {
		s := felix.RoutingModulo.Shard(r.Publish.Key, shards)
		require.Equal(t, int(s%2), r.Node, "key %q routed by the shard count learnt late, to shard %d's owner", r.Publish.Key, s)
	}
	require.Len(t, cl.Log("s", 0), 3, "shard 0: the first batch, then two more, none taken for a duplicate")
	for s := uint32(1); s < shards; s++ {
		require.Len(t, cl.Log("s", s), 2, "shard %d", s)
	}
}

// A batch the broker answered "not written" (a fatal refusal that is not
// publish_refused) leaves its sequence free: the next batch takes it,
// with no gap for the broker to refuse.
func TestRulesProducerSequenceFreeAfterNotWritten(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	cl.Nodes[0].On("publish", func(x *conntest.Exchange) error {
		return x.AnswerPublish(felix.PublishResult{}, &felix.BrokerError{Message: "no", Code: felix.CodeForbidden})
	})
	c, _ := scriptedClient(t, cl, nil, nil)
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	_, err = p.PublishBatch(ctxT(t), sTopic, [][]byte{[]byte("refused")}, client.PublishOptions{})
	require.Error(t, err)
	require.NotErrorIs(t, err, client.ErrAmbiguous)
	_, err = p.PublishBatch(ctxT(t), sTopic, [][]byte{[]byte("next")}, client.PublishOptions{})
	require.NoError(t, err)
	var seqs []uint64
	for _, r := range publishedTo(t, cl, 0) {
		seqs = append(seqs, r.Publish.Sequence)
	}
	require.Equal(t, []uint64{0, 0}, seqs, "the sequence of the batch not written is taken by the next")
}

// An idempotent batch refused with not_leader is a redirect, not a
// refusal: it is re-sent to the owner the refusal names, under the same
// sequence, and the producer goes on.
func TestRulesProducerNotLeaderRefusalFollowed(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 2})
	cl.Nodes[0].Always("publish", func(x *conntest.Exchange) error {
		return x.AnswerPublish(felix.PublishResult{}, notLeaderRefusal(cl.Nodes[1]))
	})
	c, n := scriptedClient(t, cl, nil, nil)
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	for i := range 2 {
		_, err = p.PublishBatch(ctxT(t), sTopic, [][]byte{[]byte(fmt.Sprint("b", i))}, client.PublishOptions{})
		require.NoError(t, err)
	}
	var got []string
	for _, r := range publishedTo(t, cl, 0) {
		got = append(got, fmt.Sprint(r.Node, " ", r.Publish.Sequence))
	}
	require.Equal(t, []string{"0 0", "1 0", "1 1"}, got, "refused by node 0, followed to node 1, same sequence")
	require.Len(t, cl.Log("s", 0), 2)
	require.Equal(t, 1, n.count(client.NoticeRedirect))
}

// A keyed batch sent while its stream's shard count is unknown goes to
// any broker, not as a batch of shard 0: the redirect it takes names the
// owner of the key's shard, which must not be remembered as shard 0's
// (an unkeyed publish would then go to the wrong broker).
func TestRulesProducerUnknownShardTeachesNoOwner(t *testing.T) {
	const shards = 4
	cl := conntest.Start(t, conntest.Options{Nodes: 2})
	key := keyFor(felix.RoutingModulo, shards, 1) // shard 1, owned by node 1
	for _, nd := range cl.Nodes {
		nd.Always("stream_shards", func(x *conntest.Exchange) error {
			return x.Fail(&felix.BrokerError{Message: "stream not found", Code: felix.CodeNotFound})
		})
		// The broker places keyed batches over the stream's real count:
		// shard s on node s%2.
		nd.Always("publish", func(x *conntest.Exchange) error {
			s := uint32(0)
			if x.Received.Publish.Key != nil {
				s = felix.RoutingModulo.Shard(x.Received.Publish.Key, shards)
			}
			if owner := cl.Nodes[s%2]; owner != x.Node {
				return x.AnswerPublish(felix.PublishResult{}, notLeaderRefusal(owner))
			}
			return x.AnswerPublish(felix.PublishResult{}, nil)
		})
	}
	c, n := scriptedClient(t, cl, nil, nil) // home: node 0, shard 0's owner
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	_, err = p.PublishBatch(ctxT(t), sTopic, [][]byte{[]byte("keyed")}, client.PublishOptions{Key: key})
	require.NoError(t, err)
	redirects, before := n.count(client.NoticeRedirect), len(cl.Received())
	_, err = c.Publish(ctxT(t), sTopic, []byte("unkeyed"), acked)
	require.NoError(t, err)
	pubs := publishedTo(t, cl, before)
	require.Len(t, pubs, 1)
	require.Equal(t, 0, pubs[0].Node, "the unkeyed publish went to shard 0's owner")
	require.Equal(t, redirects, n.count(client.NoticeRedirect))
}

// notLeaderRefusal is the answer of a broker that is not the leader to an
// idempotent batch: publish_refused with not_leader naming owner.
func notLeaderRefusal(owner *conntest.Node) error {
	return &felix.PublishRefusedError{Reason: "not_leader", Message: "not the leader",
		Refusal: &felix.PublishRefused{Message: "not the leader", Reason: felix.PublishRefusalReason{Kind: felix.RefusalNotLeader, NodeID: owner.ID, Addr: felix.Some(owner.Addr)}}}
}

// An owner hint naming a broker that cannot be dialled is dropped when
// the call fails over: the next call goes to a live broker, without
// another dial timeout on the dead one.
func TestRulesDeadOwnerHintDropped(t *testing.T) {
	hole, err := net.ListenPacket("udp", "127.0.0.1:0") // never answers
	require.NoError(t, err)
	defer hole.Close()
	cl := conntest.Start(t, conntest.Options{})
	cl.Nodes[0].On("publish", func(x *conntest.Exchange) error {
		return x.AnswerPublish(felix.PublishResult{}, &felix.NotLeaderError{NodeID: "gone", Addr: hole.LocalAddr().String(), Generation: 1})
	})
	c, n := scriptedClient(t, cl, nil, func(cfg *client.Config) { cfg.DialTimeout = 200 * time.Millisecond })
	for range 3 {
		_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
		require.NoError(t, err)
	}
	require.Equal(t, 1, n.count(client.NoticeDialFailed), "the dead owner was dialled once")
	require.Len(t, publishedTo(t, cl, 0), 4)
}

// A request naming its shard (stream_read) goes straight to that shard's
// owner once the owners are known, not to shard 0's.
func TestRulesExplicitShardToOwner(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 3, Configure: withFeatures(felix.FeatureStreamRead)})
	cl.SetShards("s", 3, felix.RoutingModulo)
	for s := range uint32(3) {
		cl.SetOwner("s", s, int(s))
	}
	for _, nd := range cl.Nodes {
		nd.Always("stream_read", func(x *conntest.Exchange) error {
			m := x.Request.Message.(*felix.StreamRead)
			return x.Reply(&felix.StreamRecords{RequestID: m.RequestID, NextOffset: m.From})
		})
	}
	c, n := scriptedClient(t, cl, nil, nil)
	_, err := api.New(c).ShardOwners(ctxT(t), sTopic.TenantID, sTopic.Namespace, sTopic.Stream, felix.ShardKindStream)
	require.NoError(t, err)
	for _, s := range []uint32{2, 1, 0} {
		_, err := c.Request(ctxT(t), &felix.StreamRead{TenantID: sTopic.TenantID, Namespace: sTopic.Namespace, Stream: sTopic.Stream, Shard: s, MaxRecords: 1})
		require.NoError(t, err)
	}
	var nodes []int
	for _, r := range cl.ReceivedOf("stream_read") {
		nodes = append(nodes, r.Node)
	}
	require.Equal(t, []int{2, 1, 0}, nodes, "each read to its shard's owner")
	require.Zero(t, n.count(client.NoticeRedirect))
}

// A forwarded publish's ack names the shard owner: the next publish goes
// there directly, also when the first publish was the client's first call
// (sent before it knew it talks to a cluster).
func TestRulesForwardedAckOwnerLearnt(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 2})
	n1 := cl.Nodes[1]
	cl.Nodes[0].On("publish", func(x *conntest.Exchange) error {
		res, err := x.PublishResult() // forwarded to node 1, as it were
		res.HasOwner, res.Owner = true, felix.AckOwner{NodeID: n1.ID, Addr: n1.Addr, Generation: 1}
		return x.AnswerPublish(res, err)
	})
	c, _ := scriptedClient(t, cl, nil, nil)
	for range 2 {
		_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
		require.NoError(t, err)
	}
	var nodes []int
	for _, r := range publishedTo(t, cl, 0) {
		nodes = append(nodes, r.Node)
	}
	require.Equal(t, []int{0, 1}, nodes, "the second publish went to the owner the ack named")
}
