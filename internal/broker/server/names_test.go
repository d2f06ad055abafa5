package server_test

import (
	"strings"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/stretchr/testify/require"
)

// Issue 22 #8: every name a request carries (namespace, stream, cache,
// key, watch prefix) is bounded by what the binary layouts allow (65,535
// bytes): a longer one, over JSON, is refused invalid_request before any
// stream, cache or subscription exists, and costs nothing once answered.
// A name of exactly the limit is served; a legitimate client goes on.
func TestNamesBounded(t *testing.T) {
	srv := startBroker(t, durableCfg())
	good := dial(t, srv, nil)
	checkServing(t, good)
	streams0, caches0 := srv.Engine().Counts()
	long := strings.Repeat("n", engine.DefaultMaxNameBytes+1)
	r := dialRaw(t, srv)
	tn := topic.TenantID
	reqs := map[string]func(name string) felix.Message{
		"publish namespace": func(n string) felix.Message {
			return &felix.Publish{TenantID: tn, Namespace: n, Stream: "s", Payload: []byte("x"), RequestID: felix.Some(nextID())}
		},
		"publish stream": func(n string) felix.Message {
			return &felix.Publish{TenantID: tn, Namespace: "ns", Stream: n, Payload: []byte("x"), RequestID: felix.Some(nextID())}
		},
		"publish_batch stream": func(n string) felix.Message {
			return &felix.PublishBatchMessage{TenantID: tn, Namespace: "ns", Stream: n, Payloads: [][]byte{[]byte("x")}, RequestID: felix.Some(nextID())}
		},
		"subscribe": func(n string) felix.Message { return &felix.Subscribe{TenantID: tn, Namespace: "ns", Stream: n} },
		"stream_read": func(n string) felix.Message {
			return &felix.StreamRead{TenantID: tn, Namespace: "ns", Stream: n, MaxRecords: 1, RequestID: nextID()}
		},
		"cache_put cache": func(n string) felix.Message {
			return &felix.CachePut{TenantID: tn, Namespace: "ns", Cache: n, Key: "k", Value: []byte("v"), RequestID: felix.Some(nextID())}
		},
		"cache_put key": func(n string) felix.Message {
			return &felix.CachePut{TenantID: tn, Namespace: "ns", Cache: "c", Key: n, Value: []byte("v"), RequestID: felix.Some(nextID())}
		},
		"cache_get key": func(n string) felix.Message {
			return &felix.CacheGet{TenantID: tn, Namespace: "ns", Cache: "c2", Key: n, RequestID: felix.Some(nextID())}
		},
		"counter_add key": func(n string) felix.Message {
			return &felix.CounterAdd{TenantID: tn, Namespace: "ns", Cache: "c3", Key: n, Delta: 1, RequestID: nextID()}
		},
		"cache_watch prefix": func(n string) felix.Message {
			return &felix.CacheWatch{TenantID: tn, Namespace: "ns", Cache: "c4", Prefix: felix.Some(n)}
		},
		"stream_shards": func(n string) felix.Message {
			return &felix.StreamShards{TenantID: tn, Namespace: "ns", Stream: n, RequestID: nextID()}
		},
		"cache_shards": func(n string) felix.Message {
			return &felix.CacheShards{TenantID: tn, Namespace: "ns", Cache: n, RequestID: nextID()}
		},
		"cache_watch key": func(n string) felix.Message {
			return &felix.CacheWatch{TenantID: tn, Namespace: "ns", Cache: "c5", Key: felix.Some(n)}
		},
	}
	heap0 := heapAfterGC()
	for what, mk := range reqs {
		for range 8 {
			s := r.stream(t, rawFlags, felix.FeatureErrorCodes)
			s.send(mk(long))
			code, msg := refusal(t, s.recv())
			require.Equal(t, felix.CodeInvalidRequest, code, "%s: %s", what, msg)
			require.Contains(t, msg, "over the name limit of 65535 bytes", what)
			s.s.CancelRead(0)
			s.s.Close()
		}
	}
	streams, caches := srv.Engine().Counts()
	require.Equal(t, streams0, streams, "no stream created")
	require.Equal(t, caches0, caches, "no cache created")
	require.Zero(t, srv.Stats().Engine.ActiveWatches+srv.Stats().Engine.ActiveSubscriptions)
	grown := int64(heapAfterGC()) - int64(heap0)
	t.Logf("%d refused requests naming %d bytes: heap %+d KiB", 8*len(reqs), len(long), grown>>10)
	require.Less(t, grown, int64(4<<20), "refused names are not kept")

	// At the limit: served.
	at := long[1:]
	s := r.stream(t, rawFlags, felix.FeatureErrorCodes)
	s.send(reqs["cache_put key"](at))
	require.IsType(t, &felix.CacheOK{}, s.recv())
	s.send(reqs["publish stream"](at))
	require.IsType(t, &felix.PublishOK{}, s.recv())
	checkServing(t, good)
}

// A lower -max-name-bytes is the bound in force.
func TestNamesBoundedByConfig(t *testing.T) {
	cfg := durableCfg()
	cfg.Engine.MaxNameBytes = 64
	srv := startBroker(t, cfg)
	r := dialRaw(t, srv)
	s := r.stream(t, rawFlags, felix.FeatureErrorCodes)
	s.send(&felix.Publish{TenantID: topic.TenantID, Namespace: "ns", Stream: strings.Repeat("s", 65), Payload: []byte("x"), RequestID: felix.Some(nextID())})
	code, msg := refusal(t, s.recv())
	require.Equal(t, felix.CodeInvalidRequest, code)
	require.Contains(t, msg, "stream name of 65 bytes is over the name limit of 64 bytes")
	s.send(&felix.Publish{TenantID: topic.TenantID, Namespace: "ns", Stream: strings.Repeat("s", 64), Payload: []byte("x"), RequestID: felix.Some(nextID())})
	require.IsType(t, &felix.PublishOK{}, s.recv())
}

// refusal returns the code and message of an error or publish_error.
func refusal(t *testing.T, m felix.Message) (felix.ErrorCode, string) {
	t.Helper()
	switch m := m.(type) {
	case *felix.ErrorMessage:
		return m.Code.V, m.Message
	case *felix.PublishError:
		return m.Code.V, m.Message
	}
	require.Fail(t, "not a refusal", "%T", m)
	return "", ""
}

// A subscription keeps the stream's own names, not its request's copy:
// many subscriptions to a stream with names near the limit cost no name
// bytes each.
func TestSubscriptionsShareTheStreamsNames(t *testing.T) {
	const subs = 100
	srv := startBroker(t, durableCfg())
	ns, name := strings.Repeat("n", 60_000), strings.Repeat("s", 60_000)
	r := dialRaw(t, srv)
	s := r.stream(t, rawFlags, felix.FeatureErrorCodes)
	s.send(&felix.Publish{TenantID: topic.TenantID, Namespace: ns, Stream: name, Payload: []byte("x"), RequestID: felix.Some(nextID())})
	require.IsType(t, &felix.PublishOK{}, s.recv())
	heap0 := heapAfterGC()
	for range subs {
		s := r.stream(t, rawFlags, felix.FeatureErrorCodes)
		s.send(&felix.Subscribe{TenantID: topic.TenantID, Namespace: ns, Stream: name})
		require.IsType(t, &felix.Subscribed{}, s.recv())
	}
	waitFor(t, func() bool { return srv.Stats().Engine.ActiveSubscriptions == subs })
	grown := int64(heapAfterGC()) - int64(heap0)
	t.Logf("%d subscriptions naming 2 × 60,000 bytes: heap %+d KiB", subs, grown>>10)
	require.Less(t, grown, int64(subs*60_000), "less than one name per subscription")
}
