package conn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/conntest"
)

// The tests of Client.Request itself, the one-connection Requestor of
// package api, against conntest's scripted broker: what it refuses to
// send, what it refuses without sending, how it maps each failure answer,
// and what it checks of the answer it returns.

// requestFeatures is what the scripted node advertises in these tests:
// enough for every request sent below, without FeatureCounters,
// FeatureAtomicCommit and FeatureGroupClaimControl (the gates tested).
const requestFeatures = felix.FeatureErrorCodes | felix.FeatureUnsupported | felix.FeatureStreamShards |
	felix.FeatureConsumerGroup | felix.FeatureStreamRead | felix.FeaturePublishConditional | felix.FeatureCacheDelete

// startRequestNode starts one scripted node advertising features.
func startRequestNode(t *testing.T, features felix.Features) *conntest.Cluster {
	t.Helper()
	return conntest.Start(t, conntest.Options{Configure: func(_ int, c *conn.ServerConfig) {
		c.Offer = felix.BrokerOffer{Flags: conntest.Flags, Features: features}
	}})
}

// dialNode connects a client to the cluster's node 0.
func dialNode(t *testing.T, cl *conntest.Cluster) *conn.Client {
	t.Helper()
	cfg := cl.ClientConfig()
	c, err := conn.Dial(testCtx(t), cl.Nodes[0].Addr, &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

var (
	reqTopic = conntest.Topic("s")
	reqCache = felix.CacheRef{TenantID: conntest.Tenant, Namespace: "app", Cache: "c"}
)

func streamShardsReq() *felix.StreamShards {
	return &felix.StreamShards{TenantID: reqTopic.TenantID, Namespace: reqTopic.Namespace, Stream: reqTopic.Stream}
}

func cacheGetReq() *felix.CacheGet {
	return &felix.CacheGet{TenantID: reqCache.TenantID, Namespace: reqCache.Namespace, Cache: reqCache.Cache, Key: "k"}
}

func groupPollReq() *felix.GroupPoll {
	return &felix.GroupPoll{TenantID: reqTopic.TenantID, Namespace: reqTopic.Namespace, Stream: reqTopic.Stream, Group: "g", MaxRecords: 1}
}

func TestRequestNotARequest(t *testing.T) {
	cl := startRequestNode(t, felix.AllFeatures)
	c := dialNode(t, cl)
	ctx := testCtx(t)
	for _, m := range []felix.Message{
		// broker → client types
		&felix.CacheOK{RequestID: 1},
		&felix.StreamShardsView{Shards: 1},
		&felix.ErrorMessage{Message: "x"},
		// a type no table knows
		&felix.UnknownMessage{Type: "frobnicate", Raw: []byte(`{"type":"frobnicate"}`)},
		// the requests served by primitives that keep a stream
		&felix.Auth{TenantID: conntest.Tenant, Token: conntest.Token},
		&felix.Publish{TenantID: reqTopic.TenantID, Namespace: reqTopic.Namespace, Stream: reqTopic.Stream},
		&felix.PublishIdempotent{TenantID: reqTopic.TenantID, Namespace: reqTopic.Namespace, Stream: reqTopic.Stream},
		&felix.ProducerInit{},
		&felix.Subscribe{TenantID: reqTopic.TenantID, Namespace: reqTopic.Namespace, Stream: reqTopic.Stream},
		&felix.CacheWatch{TenantID: reqCache.TenantID, Namespace: reqCache.Namespace, Cache: reqCache.Cache, Key: felix.Some("k")},
	} {
		ans, err := c.Request(ctx, m)
		require.ErrorIs(t, err, conn.ErrNotARequest, m.MessageType())
		require.Nil(t, ans, m.MessageType())
		require.NotErrorIs(t, err, felix.ErrNotAdvertised, m.MessageType())
	}
	require.Empty(t, cl.Received(), "nothing was sent")
	// The connection is still usable.
	_, err := c.Request(ctx, streamShardsReq())
	require.NoError(t, err)
}

func TestRequestNotAdvertised(t *testing.T) {
	cl := startRequestNode(t, requestFeatures)
	c := dialNode(t, cl)
	ctx := testCtx(t)
	poll := groupPollReq()
	poll.VisibilityMs = 1000
	nack := &felix.GroupNack{TenantID: reqTopic.TenantID, Namespace: reqTopic.Namespace, Stream: reqTopic.Stream, Group: "g", DelayMs: 5}
	cases := []struct {
		name string
		req  felix.Message
		what string // in the error: what was not advertised
	}{
		// the request's own gate, on the pipelined and the own-stream path
		{"counter_add", &felix.CounterAdd{TenantID: reqCache.TenantID, Namespace: reqCache.Namespace, Cache: reqCache.Cache, Key: "n", Delta: 1}, "COUNTERS"},
		{"counter_get", &felix.CounterGet{TenantID: reqCache.TenantID, Namespace: reqCache.Namespace, Cache: reqCache.Cache, Key: "n"}, "COUNTERS"},
		{"commit", &felix.Commit{TenantID: reqTopic.TenantID, Namespace: reqTopic.Namespace, Stream: reqTopic.Stream}, "ATOMIC_COMMIT"},
		{"group_extend", &felix.GroupExtend{TenantID: reqTopic.TenantID, Namespace: reqTopic.Namespace, Stream: reqTopic.Stream, Group: "g"}, "GROUP_CLAIM_CONTROL"},
		{"topology", &felix.Topology{}, "TOPOLOGY"},
		// a member the request sets, whose gate is not its request's
		{"group_poll visibility_ms", poll, "group_poll visibility_ms"},
		{"group_nack delay_ms", nack, "group_nack delay_ms"},
	}
	for _, tc := range cases {
		ans, err := c.Request(ctx, tc.req)
		require.ErrorIs(t, err, felix.ErrNotAdvertised, tc.name)
		require.ErrorContains(t, err, tc.what, tc.name)
		require.Nil(t, ans, tc.name)
	}
	require.Empty(t, cl.Received(), "nothing was sent")

	// The same requests without the gated members are advertised, and sent.
	cl.Nodes[0].On("group_poll", func(x *conntest.Exchange) error {
		m := x.Request.Message.(*felix.GroupPoll)
		return x.Reply(&felix.GroupRecords{RequestID: m.RequestID})
	})
	cl.Nodes[0].On("group_nack", func(x *conntest.Exchange) error {
		return x.Reply(&felix.CacheOK{RequestID: x.Request.Message.(*felix.GroupNack).RequestID})
	})
	poll.VisibilityMs, nack.DelayMs = 0, 0
	_, err := c.Request(ctx, poll)
	require.NoError(t, err)
	_, err = c.Request(ctx, nack)
	require.NoError(t, err)
	var got []string
	for _, r := range cl.Received() {
		got = append(got, r.Type)
	}
	require.Equal(t, []string{"group_poll", "group_nack"}, got)
}

// TestRequestAnswers maps every answer a broker may give to what Request
// returns: a success answer as it came, a failure answer as its typed
// error, anything else as ErrProtocol; on a stream of its own (the
// stream_shards, publish_if, stream_read and group_poll cases) and on the
// pipelined cache streams (cache_get).
func TestRequestAnswers(t *testing.T) {
	rid := func(m felix.Message) uint64 { id, _ := felix.RequestIDOf(m); return id }
	cases := []struct {
		name   string
		req    func() felix.Message
		answer func(req felix.Message) felix.Message
		check  func(t *testing.T, ans felix.Message, err error)
	}{
		{"success on its own stream", func() felix.Message { return streamShardsReq() },
			func(req felix.Message) felix.Message {
				return &felix.StreamShardsView{Shards: 3, RequestID: rid(req), Routing: felix.Some(felix.RoutingModulo)}
			},
			func(t *testing.T, ans felix.Message, err error) {
				require.NoError(t, err)
				v := ans.(*felix.StreamShardsView)
				require.Equal(t, uint32(3), v.Shards)
				require.Equal(t, felix.Some(felix.RoutingModulo), v.Routing)
			}},
		{"success pipelined", func() felix.Message { return cacheGetReq() },
			func(req felix.Message) felix.Message {
				return &felix.CacheValue{TenantID: reqCache.TenantID, Namespace: reqCache.Namespace, Cache: reqCache.Cache, Key: "k",
					Value: felix.Some([]byte("v")), RequestID: felix.Some(rid(req))}
			},
			func(t *testing.T, ans felix.Message, err error) {
				require.NoError(t, err)
				require.Equal(t, felix.Some([]byte("v")), ans.(*felix.CacheValue).Value)
			}},
		{"error on its own stream", func() felix.Message { return streamShardsReq() },
			func(felix.Message) felix.Message {
				return &felix.ErrorMessage{Message: "no", Code: felix.Some(felix.CodeForbidden), Retry: felix.Some(felix.RetryFatal)}
			},
			func(t *testing.T, ans felix.Message, err error) {
				var be *felix.BrokerError
				require.ErrorAs(t, err, &be)
				require.Equal(t, felix.CodeForbidden, be.Code)
				require.Equal(t, "no", be.Message)
			}},
		{"error pipelined", func() felix.Message { return cacheGetReq() },
			func(felix.Message) felix.Message {
				return &felix.ErrorMessage{Message: "no such cache", Code: felix.Some(felix.CodeNotFound)}
			},
			func(t *testing.T, ans felix.Message, err error) {
				var be *felix.BrokerError
				require.ErrorAs(t, err, &be)
				require.Equal(t, felix.CodeNotFound, be.Code)
			}},
		{"publish_error", func() felix.Message {
			return &felix.PublishIf{TenantID: reqTopic.TenantID, Namespace: reqTopic.Namespace, Stream: reqTopic.Stream, Payloads: [][]byte{[]byte("a")}}
		},
			func(req felix.Message) felix.Message {
				return &felix.PublishError{RequestID: rid(req), Message: "full", Code: felix.Some(felix.CodeOverloaded)}
			},
			func(t *testing.T, ans felix.Message, err error) {
				var be *felix.BrokerError
				require.ErrorAs(t, err, &be)
				require.Equal(t, "publish_error", be.Type)
				require.Equal(t, felix.CodeOverloaded, be.Code)
			}},
		{"not_leader on its own stream", func() felix.Message { return groupPollReq() },
			func(felix.Message) felix.Message {
				return &felix.NotLeader{NodeID: "n1", Addr: felix.Some("127.0.0.1:2"), Generation: 4}
			},
			func(t *testing.T, ans felix.Message, err error) {
				var nl *felix.NotLeaderError
				require.ErrorAs(t, err, &nl)
				require.Equal(t, felix.NotLeaderError{NodeID: "n1", Addr: "127.0.0.1:2", Generation: 4}, *nl)
			}},
		{"not_leader pipelined", func() felix.Message { return cacheGetReq() },
			func(felix.Message) felix.Message { return &felix.NotLeader{NodeID: "n2"} },
			func(t *testing.T, ans felix.Message, err error) {
				var nl *felix.NotLeaderError
				require.ErrorAs(t, err, &nl)
				require.Equal(t, "n2", nl.NodeID)
			}},
		{"publish_refused", func() felix.Message {
			return &felix.PublishIf{TenantID: reqTopic.TenantID, Namespace: reqTopic.Namespace, Stream: reqTopic.Stream, Payloads: [][]byte{[]byte("a")}}
		},
			func(req felix.Message) felix.Message {
				return &felix.PublishRefused{RequestID: rid(req), Reason: felix.PublishRefusalReason{Kind: felix.RefusalOffsetMismatch, Tail: 7}, Message: "stale"}
			},
			func(t *testing.T, ans felix.Message, err error) {
				var rf *felix.PublishRefusedError
				require.ErrorAs(t, err, &rf)
				require.Equal(t, "offset_mismatch", rf.Reason)
				tail, ok := rf.Tail()
				require.True(t, ok)
				require.Equal(t, uint64(7), tail)
			}},
		{"subscribe_cursor_error", func() felix.Message {
			return &felix.StreamRead{TenantID: reqTopic.TenantID, Namespace: reqTopic.Namespace, Stream: reqTopic.Stream, From: 99}
		},
			func(felix.Message) felix.Message {
				return &felix.SubscribeCursorError{Reason: "in_future", Requested: 99, Available: 3}
			},
			func(t *testing.T, ans felix.Message, err error) {
				var ce *felix.CursorError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, felix.CursorError{Reason: "in_future", Requested: 99, Available: 3}, *ce)
			}},
		{"unsupported on its own stream", func() felix.Message { return streamShardsReq() },
			func(req felix.Message) felix.Message {
				return &felix.Unsupported{RequestType: "stream_shards", RequestID: felix.Some(rid(req))}
			},
			func(t *testing.T, ans felix.Message, err error) { require.ErrorIs(t, err, felix.ErrNotAdvertised) }},
		{"unsupported pipelined", func() felix.Message { return cacheGetReq() },
			func(req felix.Message) felix.Message {
				return &felix.Unsupported{RequestType: "cache_get", RequestID: felix.Some(rid(req))}
			},
			func(t *testing.T, ans felix.Message, err error) { require.ErrorIs(t, err, felix.ErrNotAdvertised) }},
		{"wrong type on its own stream", func() felix.Message { return streamShardsReq() },
			func(req felix.Message) felix.Message { return &felix.CacheOK{RequestID: rid(req)} },
			func(t *testing.T, ans felix.Message, err error) {
				require.ErrorIs(t, err, felix.ErrProtocol)
				require.ErrorContains(t, err, "cache_ok")
			}},
		{"wrong type pipelined", func() felix.Message { return cacheGetReq() },
			func(req felix.Message) felix.Message {
				return &felix.CounterValue{Value: felix.Some[int64](1), RequestID: rid(req)}
			},
			func(t *testing.T, ans felix.Message, err error) {
				require.ErrorIs(t, err, felix.ErrProtocol)
				require.ErrorContains(t, err, "counter_value")
			}},
		{"another request id on its own stream", func() felix.Message { return streamShardsReq() },
			func(req felix.Message) felix.Message {
				return &felix.StreamShardsView{Shards: 1, RequestID: rid(req) + 1}
			},
			func(t *testing.T, ans felix.Message, err error) { require.ErrorIs(t, err, felix.ErrProtocol) }},
		{"another request id pipelined", func() felix.Message { return cacheGetReq() },
			func(req felix.Message) felix.Message {
				return &felix.CacheValue{TenantID: reqCache.TenantID, Namespace: reqCache.Namespace, Cache: reqCache.Cache, Key: "k",
					RequestID: felix.Some(rid(req) + 1)}
			},
			func(t *testing.T, ans felix.Message, err error) { require.ErrorIs(t, err, felix.ErrProtocol) }},
	}
	cl := startRequestNode(t, requestFeatures)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialNode(t, cl) // a connection of its own: a failed cache stream is not the next case's
			req := tc.req()
			sent := make(chan felix.Message, 1)
			cl.Nodes[0].On(req.MessageType(), func(x *conntest.Exchange) error {
				sent <- x.Request.Message
				return x.Reply(tc.answer(x.Request.Message))
			})
			ans, err := c.Request(testCtx(t), req)
			tc.check(t, ans, err)
			if err != nil {
				require.Nil(t, ans)
			}
			got := <-sent // sent before the answer the call returned on
			require.Equal(t, req.MessageType(), got.MessageType())
			require.Equal(t, rid(req), rid(got), "the request went with the id Request set")
		})
	}
}

// TestRequestSetsRequestID: Request sets the id of the message it sends
// (the caller's req), different for each request of a connection's own
// streams and for each request in flight on a cache stream.
func TestRequestSetsRequestID(t *testing.T) {
	cl := startRequestNode(t, requestFeatures)
	n0 := cl.Nodes[0]
	n0.Always("stream_shards", func(x *conntest.Exchange) error {
		return x.Reply(&felix.StreamShardsView{Shards: 1, RequestID: x.Request.Message.(*felix.StreamShards).RequestID})
	})
	n0.Always("group_poll", func(x *conntest.Exchange) error {
		return x.Reply(&felix.GroupRecords{RequestID: x.Request.Message.(*felix.GroupPoll).RequestID})
	})
	n0.Always("cache_get", func(x *conntest.Exchange) error {
		m := x.Request.Message.(*felix.CacheGet)
		return x.Reply(&felix.CacheValue{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, RequestID: m.RequestID})
	})
	n0.Always("cache_put", func(x *conntest.Exchange) error {
		return x.Reply(&felix.CacheOK{RequestID: x.Request.Message.(*felix.CachePut).RequestID.V})
	})
	cfg := cl.ClientConfig()
	cfg.CacheStreams = 1 // every cache request on one stream
	c, err := conn.Dial(testCtx(t), n0.Addr, &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ctx := testCtx(t)

	reqs := []felix.Message{streamShardsReq(), groupPollReq(), streamShardsReq(),
		cacheGetReq(), &felix.CachePut{TenantID: reqCache.TenantID, Namespace: reqCache.Namespace, Cache: reqCache.Cache, Key: "k"}, cacheGetReq()}
	for _, req := range reqs {
		id, ok := felix.RequestIDOf(req)
		require.False(t, ok && id != 0, "%s starts without an id", req.MessageType())
		ans, err := c.Request(ctx, req)
		require.NoError(t, err, req.MessageType())
		got, ok := felix.RequestIDOf(ans)
		require.True(t, ok, ans.MessageType())
		id, ok = felix.RequestIDOf(req)
		require.True(t, ok, "%s has an id once sent", req.MessageType())
		require.NotZero(t, id, req.MessageType())
		require.Equal(t, id, got, "the answer is the request's")
	}
	own, cached := map[uint64]bool{}, map[uint64]bool{}
	for _, r := range cl.Received() {
		id, ok := felix.RequestIDOf(r.Message)
		require.True(t, ok, r.Type)
		ids := own
		if r.Type == "cache_get" || r.Type == "cache_put" {
			ids = cached
		}
		require.False(t, ids[id], "%s reused request id %d", r.Type, id)
		ids[id] = true
	}
	require.Len(t, own, 3)
	require.Len(t, cached, 3)
	// What the broker received carries the ids set on the caller's messages.
	for i, r := range cl.Received() {
		want, _ := felix.RequestIDOf(reqs[i])
		got, _ := felix.RequestIDOf(r.Message)
		require.Equal(t, want, got, "request %d (%s)", i, r.Type)
	}
}
