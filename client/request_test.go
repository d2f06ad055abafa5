package client_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/conntest"
)

// The client's request surface (Request, its typed calls, At)
// against scripted brokers: the decision table, routing and name checks
// apply to every request by its protocol facts (felix.LookupRequest), not
// by a hand-written wrapper per call.

// reqFeatures is what the scripted nodes of these tests advertise: the
// cluster features plus every request the table below sends.
const reqFeatures = conntest.Features | felix.FeatureStreamRead | felix.FeatureConsumerGroup | felix.FeatureGroupAdmin |
	felix.FeaturePublishConditional | felix.FeatureCounters | felix.FeatureCacheConditional | felix.FeatureAtomicCommit

// reqCache is the cache the table's cache requests name.
var reqCache = felix.CacheRef{TenantID: conntest.Tenant, Namespace: "app", Cache: "c"}

// typedCalls are the typed calls the table uses: *client.Client's
// generated methods and api.Calls over a pinned Requestor (At) both have
// them.
type typedCalls interface {
	CacheGet(ctx context.Context, ref felix.CacheRef, key string) ([]byte, bool, error)
	CounterGet(ctx context.Context, ref felix.CacheRef, key string) (int64, bool, error)
	CounterAdd(ctx context.Context, ref felix.CacheRef, key string, delta int64) (int64, bool, error)
	CachePutIf(ctx context.Context, ref felix.CacheRef, key string, value []byte, cond felix.CacheCondition, ttl time.Duration) (api.CondResult, error)
	StreamRead(ctx context.Context, t felix.Topic, shard uint32, o api.ReadOptions) (api.ReadPage, error)
	StateGet(ctx context.Context, t felix.Topic, entityKey []byte, key string) (api.StateValue, error)
	PublishIf(ctx context.Context, t felix.Topic, payloads [][]byte, key []byte, expected uint64) (felix.PublishResult, error)
	Commit(ctx context.Context, req api.CommitRequest) (uint64, error)
	Group(ref api.GroupRef) *api.Group
}

var (
	_ typedCalls = (*client.Client)(nil)
	_ typedCalls = api.Calls{}
)

// reqCase is one request: the typed call that sends it (over any
// Requestor, naming stream t or cache ref) and a success answer.
type reqCase struct {
	typ    string
	call   func(ctx context.Context, x typedCalls, t felix.Topic, ref felix.CacheRef) error
	answer func() felix.Message
	// routed: the request names a stream shard (felix.RouteStreamShard).
	routed bool
}

var reqCases = []reqCase{
	{typ: "cache_get", answer: func() felix.Message {
		return &felix.CacheValue{TenantID: reqCache.TenantID, Namespace: reqCache.Namespace, Cache: reqCache.Cache, Key: "k", Value: felix.Some([]byte("v"))}
	}, call: func(ctx context.Context, x typedCalls, _ felix.Topic, ref felix.CacheRef) error {
		v, found, err := x.CacheGet(ctx, ref, "k")
		if err == nil && (!found || string(v) != "v") {
			err = fmt.Errorf("cache_get: %q %v", v, found)
		}
		return err
	}},
	{typ: "counter_get", answer: func() felix.Message { return &felix.CounterValue{Value: felix.Some(int64(3))} },
		call: func(ctx context.Context, x typedCalls, _ felix.Topic, ref felix.CacheRef) error {
			v, _, err := x.CounterGet(ctx, ref, "k")
			if err == nil && v != 3 {
				err = fmt.Errorf("counter_get: %d", v)
			}
			return err
		}},
	{typ: "counter_add", answer: func() felix.Message { return &felix.CounterValue{Value: felix.Some(int64(4))} },
		call: func(ctx context.Context, x typedCalls, _ felix.Topic, ref felix.CacheRef) error {
			_, _, err := x.CounterAdd(ctx, ref, "k", 1)
			return err
		}},
	{typ: "cache_put_if", answer: func() felix.Message {
		return &felix.CacheConditionResult{Applied: true, Version: felix.Some(uint64(1))}
	},
		call: func(ctx context.Context, x typedCalls, _ felix.Topic, ref felix.CacheRef) error {
			_, err := x.CachePutIf(ctx, ref, "k", []byte("v"), api.IfAbsent, 0)
			return err
		}},
	{typ: "stream_read", routed: true, answer: func() felix.Message { return &felix.StreamRecords{NextOffset: 0} },
		call: func(ctx context.Context, x typedCalls, t felix.Topic, _ felix.CacheRef) error {
			_, err := x.StreamRead(ctx, t, 2, api.ReadOptions{})
			return err
		}},
	{typ: "state_get", routed: true, answer: func() felix.Message { return &felix.StateValue{} },
		call: func(ctx context.Context, x typedCalls, t felix.Topic, _ felix.CacheRef) error {
			_, err := x.StateGet(ctx, t, []byte("entity"), "k")
			return err
		}},
	{typ: "publish_if", routed: true, answer: func() felix.Message { return &felix.PublishOK{Offset: felix.Some(uint64(0))} },
		call: func(ctx context.Context, x typedCalls, t felix.Topic, _ felix.CacheRef) error {
			_, err := x.PublishIf(ctx, t, [][]byte{[]byte("x")}, []byte("key"), 0)
			return err
		}},
	{typ: "commit", routed: true, answer: func() felix.Message { return &felix.CommitOK{Offset: 0} },
		call: func(ctx context.Context, x typedCalls, t felix.Topic, _ felix.CacheRef) error {
			_, err := x.Commit(ctx, api.CommitRequest{Topic: t, EntityKey: []byte("entity"), Ops: []api.CommitOp{api.PublishEvent("", []byte("x"))}})
			return err
		}},
	{typ: "group_describe", routed: true, answer: func() felix.Message { return &felix.GroupInfo{Tail: 1} },
		call: func(ctx context.Context, x typedCalls, t felix.Topic, _ felix.CacheRef) error {
			_, err := x.Group(api.GroupRef{Topic: t, Shard: 1, Group: "g"}).Describe(ctx)
			return err
		}},
	{typ: "group_poll", routed: true, answer: func() felix.Message { return &felix.GroupRecords{} },
		call: func(ctx context.Context, x typedCalls, t felix.Topic, _ felix.CacheRef) error {
			_, err := x.Group(api.GroupRef{Topic: t, Shard: 1, Group: "g"}).Poll(ctx, api.PollOptions{Max: 1})
			return err
		}},
	{typ: "group_ack", routed: true, answer: func() felix.Message { return &felix.CacheOK{} },
		call: func(ctx context.Context, x typedCalls, t felix.Topic, _ felix.CacheRef) error {
			return x.Group(api.GroupRef{Topic: t, Shard: 1, Group: "g"}).Ack(ctx, 7)
		}},
}

// reply answers with a fresh answer carrying the request's request id.
func reply(answer func() felix.Message) conntest.Handler {
	return func(x *conntest.Exchange) error {
		ans := answer()
		if id, ok := felix.RequestIDOf(x.Request.Message); ok {
			felix.SetRequestID(ans, id)
		}
		return x.Reply(ans)
	}
}

// startReq starts n scripted nodes advertising reqFeatures.
func startReq(t *testing.T, n int) *conntest.Cluster {
	return conntest.Start(t, conntest.Options{Nodes: n, Configure: func(_ int, c *conn.ServerConfig) { c.Offer.Features = reqFeatures }})
}

// nodesOf returns the nodes that received requests of type typ, in
// arrival order.
func nodesOf(cl *conntest.Cluster, typ string) []int {
	var out []int
	for _, r := range cl.ReceivedOf(typ) {
		out = append(out, r.Node)
	}
	return out
}

// A request whose connection is lost before its answer is re-sent when
// its facts say it is safe (and then succeeds), and is reported as an
// *AmbiguousError, sent exactly once, when they say it is not.
func TestRequestLostConnection(t *testing.T) {
	for _, tc := range reqCases {
		facts, ok := felix.LookupRequest(tc.typ)
		require.True(t, ok, tc.typ)
		t.Run(fmt.Sprint(tc.typ, " safe=", facts.Safe), func(t *testing.T) {
			cl := startReq(t, 1)
			nd := cl.Nodes[0]
			nd.On(tc.typ, func(x *conntest.Exchange) error { return x.ResetConn() })
			nd.Always(tc.typ, reply(tc.answer))
			c, n := scriptedClient(t, cl, nil, nil)
			err := tc.call(ctxT(t), c, sTopic, reqCache)
			if facts.Safe {
				require.NoError(t, err)
				require.Equal(t, []int{0, 0}, nodesOf(cl, tc.typ), "re-sent after the lost connection")
				require.Positive(t, n.count(client.NoticeRetry))
				return
			}
			require.ErrorIs(t, err, client.ErrAmbiguous)
			var amb *client.AmbiguousError
			require.ErrorAs(t, err, &amb)
			require.Equal(t, tc.typ, amb.Op)
			require.Equal(t, nd.Addr, amb.Addr)
			require.Equal(t, felix.RetryOutcomeUnknown, client.RetryClassOf(err))
			require.Equal(t, []int{0}, nodesOf(cl, tc.typ), "sent exactly once")
		})
	}
}

// A routed request sent to a broker that does not lead its shard follows
// the not_leader to the owner it names; the redirect is not an error, and
// the next request for that shard goes straight to the owner (also when
// the first was sent before the client connected, and so before it knew
// it talks to a cluster: the redirect gives the call its key). A request
// pinned with At goes to its broker even then.
func TestRequestFollowsNotLeader(t *testing.T) {
	for _, tc := range reqCases {
		if !tc.routed {
			continue
		}
		t.Run(tc.typ, func(t *testing.T) {
			cl := startReq(t, 2)
			owner := cl.Nodes[1]
			cl.Nodes[0].Always(tc.typ, func(x *conntest.Exchange) error {
				return x.Fail(&felix.NotLeaderError{NodeID: owner.ID, Addr: owner.Addr, Generation: 1})
			})
			owner.Always(tc.typ, reply(tc.answer))
			c, n := scriptedClient(t, cl, nil, nil) // seeded with node 0 only
			require.NoError(t, c.Connect(ctxT(t)))
			require.NoError(t, tc.call(ctxT(t), c, sTopic, reqCache))
			require.Equal(t, []int{0, 1}, nodesOf(cl, tc.typ))
			require.Equal(t, 1, n.count(client.NoticeRedirect))
			require.Zero(t, n.count(client.NoticeRetry), "a redirect spends no retry")

			require.NoError(t, tc.call(ctxT(t), c, sTopic, reqCache))
			require.Equal(t, []int{0, 1, 1}, nodesOf(cl, tc.typ), "the owner is kept")
		})
	}
	t.Run("Request", func(t *testing.T) {
		cl := startReq(t, 2)
		owner := cl.Nodes[1]
		cl.Nodes[0].Always("stream_read", func(x *conntest.Exchange) error {
			return x.Fail(&felix.NotLeaderError{NodeID: owner.ID, Addr: owner.Addr, Generation: 1})
		})
		owner.Always("stream_read", reply(func() felix.Message { return &felix.StreamRecords{NextOffset: 9} }))
		c, _ := scriptedClient(t, cl, nil, nil)
		req := &felix.StreamRead{TenantID: sTopic.TenantID, Namespace: sTopic.Namespace, Stream: sTopic.Stream, Shard: 3}
		ans, err := c.Request(ctxT(t), req)
		require.NoError(t, err)
		require.Equal(t, &felix.StreamRecords{NextOffset: 9, RequestID: req.RequestID}, ans)
		require.Equal(t, []int{0, 1}, nodesOf(cl, "stream_read"))
		_, err = c.Request(ctxT(t), req)
		require.NoError(t, err)
		require.Equal(t, []int{0, 1, 1}, nodesOf(cl, "stream_read"), "the owner the first call's redirect named is kept")

		_, err = c.At(cl.Nodes[0].Addr).Request(ctxT(t), req)
		var nl *felix.NotLeaderError
		require.ErrorAs(t, err, &nl, "a pinned request goes to its broker, not to the owner the client knows")
		require.Equal(t, []int{0, 1, 1, 0}, nodesOf(cl, "stream_read"))
	})
}

// At(addr) sends to that broker only: a not_leader is returned, not
// followed; a lost connection is retried there when the request is safe,
// and ambiguous there when it is not.
func TestRequestAtOneBroker(t *testing.T) {
	cl := startReq(t, 2)
	owner := cl.Nodes[1]
	cl.Nodes[0].Always("stream_read", func(x *conntest.Exchange) error {
		return x.Fail(&felix.NotLeaderError{NodeID: owner.ID, Addr: owner.Addr, Generation: 1})
	})
	owner.Always("stream_read", reply(func() felix.Message { return &felix.StreamRecords{} }))
	c, n := scriptedClient(t, cl, nil, nil)
	_, err := api.New(c.At(cl.Nodes[0].Addr)).StreamRead(ctxT(t), sTopic, 0, api.ReadOptions{})
	var nl *felix.NotLeaderError
	require.ErrorAs(t, err, &nl)
	require.Equal(t, owner.Addr, nl.Addr)
	require.Equal(t, []int{0}, nodesOf(cl, "stream_read"), "not redirected")
	require.Zero(t, n.count(client.NoticeRedirect))

	// A broker the client was not seeded with; its first connection dies
	// under each request.
	owner.On("stream_read", func(x *conntest.Exchange) error { return x.ResetConn() })
	_, err = api.New(c.At(owner.Addr)).StreamRead(ctxT(t), sTopic, 0, api.ReadOptions{})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 1}, nodesOf(cl, "stream_read"), "retried on the same broker")

	for _, nd := range cl.Nodes {
		nd.Always("counter_add", reply(func() felix.Message { return &felix.CounterValue{Value: felix.Some(int64(1))} }))
	}
	owner.On("counter_add", func(x *conntest.Exchange) error { return x.ResetConn() })
	_, _, err = api.New(c.At(owner.Addr)).CounterAdd(ctxT(t), reqCache, "k", 1)
	var amb *client.AmbiguousError
	require.ErrorAs(t, err, &amb)
	require.Equal(t, owner.Addr, amb.Addr)
	require.Equal(t, []int{1}, nodesOf(cl, "counter_add"), "sent once, never moved to another broker")

	// The request goes through At's Request as well.
	ans, err := c.At(owner.Addr).Request(ctxT(t), &felix.CounterAdd{TenantID: reqCache.TenantID, Namespace: reqCache.Namespace, Cache: reqCache.Cache, Key: "k", Delta: 1})
	require.NoError(t, err)
	require.Equal(t, felix.Some(int64(1)), ans.(*felix.CounterValue).Value)
	require.Equal(t, []int{1, 1}, nodesOf(cl, "counter_add"))

	// A keyed request pinned to a broker needs no route: the client does
	// not ask for the stream's shard count.
	owner.Always("publish_if", reply(func() felix.Message { return &felix.PublishOK{} }))
	_, err = api.New(c.At(owner.Addr)).PublishIf(ctxT(t), sTopic, [][]byte{[]byte("x")}, []byte("key"), 0)
	require.NoError(t, err)
	require.Equal(t, []int{1}, nodesOf(cl, "publish_if"))
	require.Empty(t, nodesOf(cl, "stream_shards"))
}

// A request naming a tenant other than the client's, or an empty name,
// is refused with a *NameError and nothing is sent, whichever way it is
// made.
func TestRequestNameChecks(t *testing.T) {
	cl := startReq(t, 1)
	c, _ := scriptedClient(t, cl, nil, nil)
	require.NoError(t, c.Connect(ctxT(t)))
	otherTopic := felix.Topic{TenantID: "other", Namespace: sTopic.Namespace, Stream: sTopic.Stream}
	otherCache := felix.CacheRef{TenantID: "other", Namespace: reqCache.Namespace, Cache: reqCache.Cache}
	at := api.New(c.At(cl.Nodes[0].Addr))
	for _, tc := range reqCases {
		t.Run(tc.typ, func(t *testing.T) {
			for _, x := range []typedCalls{c, at} {
				err := tc.call(ctxT(t), x, otherTopic, otherCache)
				var ne *client.NameError
				require.ErrorAs(t, err, &ne)
				require.ErrorIs(t, err, client.ErrTenantMismatch)
				require.Equal(t, tc.typ, ne.Op)
				require.Equal(t, "other", ne.Tenant)
				require.Equal(t, conntest.Tenant, ne.ClientTenant)

				err = tc.call(ctxT(t), x, felix.Topic{}, felix.CacheRef{})
				require.ErrorIs(t, err, client.ErrEmptyName)
			}
		})
	}
	_, err := c.Request(ctxT(t), &felix.StreamShards{TenantID: "other", Namespace: "app", Stream: "s"})
	require.ErrorIs(t, err, client.ErrTenantMismatch)
	for _, tc := range reqCases {
		require.Empty(t, cl.ReceivedOf(tc.typ), "%s: nothing sent", tc.typ)
	}
	require.Empty(t, cl.ReceivedOf("stream_shards"), "nothing sent")
}

// A stream_shards answer is kept: a keyed publish_if after it is mapped to
// its shard with the shard count and routing it gave, without asking
// again, and goes to the shard's owner once a redirect named it.
func TestRequestKeepsStreamShards(t *testing.T) {
	const shards = 4
	for _, routing := range []felix.Routing{felix.RoutingModulo, felix.RoutingJumpHash} {
		t.Run(routing.String(), func(t *testing.T) {
			cl := startReq(t, 2)
			cl.SetShards("s", shards, routing)
			for s := range uint32(shards) {
				cl.SetOwner("s", s, min(int(s), 1)) // shard 0 on node 0, the others on node 1
			}
			// Each node answers a publish_if for a shard it owns and
			// redirects the others.
			for _, nd := range cl.Nodes {
				nd.Always("publish_if", func(x *conntest.Exchange) error {
					m := x.Request.Message.(*felix.PublishIf)
					if owner := min(int(routing.ShardOf(m.Key.V, true, shards)), 1); owner != x.Node.Index {
						o := cl.Nodes[owner]
						return x.Fail(&felix.NotLeaderError{NodeID: o.ID, Addr: o.Addr, Generation: 1})
					}
					return x.Reply(&felix.PublishOK{RequestID: m.RequestID, Offset: felix.Some(uint64(0))})
				})
			}
			c, n := scriptedClient(t, cl, nil, nil)
			v, err := c.StreamShards(ctxT(t), sTopic)
			require.NoError(t, err)
			require.Equal(t, uint32(shards), v.Shards)
			require.Len(t, cl.ReceivedOf("stream_shards"), 1)

			publishIf := func(shard uint32) {
				t.Helper()
				_, err := c.PublishIf(ctxT(t), sTopic, [][]byte{[]byte("x")}, keyFor(routing, shards, shard), 0)
				require.NoError(t, err)
			}
			// The shard view is known: the owners are asked once and each
			// key goes straight to its shard's owner, node 1 for shard 2.
			publishIf(2)
			require.Equal(t, []int{1}, nodesOf(cl, "publish_if"))
			publishIf(2)
			publishIf(0)
			require.Equal(t, []int{1, 1, 0}, nodesOf(cl, "publish_if"), "each key to its shard's owner")
			require.Zero(t, n.count(client.NoticeRedirect))
			require.Len(t, cl.ReceivedOf("shard_owners"), 1, "the owners were asked once")
			require.Len(t, cl.ReceivedOf("stream_shards"), 1, "the shard count was kept, not asked again")
		})
	}
}

// Request refuses what is not a one-answer client request, sending
// nothing.
func TestRequestNotARequest(t *testing.T) {
	cl := startReq(t, 1)
	c, _ := scriptedClient(t, cl, nil, nil)
	_, err := c.Request(ctxT(t), &felix.CacheOK{})
	require.True(t, errors.Is(err, conn.ErrNotARequest), "got %v", err)
	_, err = c.At(cl.Nodes[0].Addr).Request(ctxT(t), &felix.CacheOK{})
	require.ErrorIs(t, err, conn.ErrNotARequest)
	require.Empty(t, cl.Received())
}
