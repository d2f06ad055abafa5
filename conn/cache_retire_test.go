package conn_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/conntest"
)

// An error answer carries no request_id, and a broker may end the cache
// stream after it (the reference broker does after a refusal): the client
// retires that stream before the caller sees the error, so the next cache
// request goes on a fresh stream instead of meeting STOP_SENDING. The
// scripted broker here keeps the refused stream open, so a client that
// reused it would send the next request on the same stream; the retired
// stream is then finished by the client (nothing waits on it).
func TestCacheStreamRetiredAfterErrorAnswer(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	var (
		mu      sync.Mutex
		streams []*conn.Stream
	)
	note := func(x *conntest.Exchange) {
		mu.Lock()
		streams = append(streams, x.Stream)
		mu.Unlock()
	}
	n0 := cl.Nodes[0]
	n0.Always("cache_put", func(x *conntest.Exchange) error {
		note(x)
		return x.Fail(&felix.BrokerError{Message: "forbidden", Code: felix.CodeForbidden, Retry: felix.RetryFatal})
	})
	n0.Always("cache_get", func(x *conntest.Exchange) error {
		note(x)
		m := x.Request.Message.(*felix.CacheGet)
		return x.Reply(&felix.CacheValue{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key,
			Value: felix.Some([]byte("v")), RequestID: m.RequestID})
	})
	cfg := cl.ClientConfig()
	cfg.CacheStreams = 1 // one pooled stream: reuse would be certain
	c, err := conn.Dial(testCtx(t), cl.Nodes[0].Addr, &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ref := felix.CacheRef{TenantID: conntest.Tenant, Namespace: "app", Cache: "c"}

	err = api.New(c).CachePut(testCtx(t), ref, "k", []byte("w"), 0)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
	for i := range 3 {
		v, found, err := api.New(c).CacheGet(testCtx(t), ref, "k")
		require.NoError(t, err, "get %d after the refusal", i)
		require.True(t, found)
		require.Equal(t, "v", string(v))
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, streams, 4)
	require.NotSame(t, streams[0], streams[1], "the request after an error answer went on the refused stream")
	require.Same(t, streams[1], streams[2], "a stream that answered is reused")
	require.Same(t, streams[1], streams[3])
	// The retired stream is finished by the client once nothing waits on
	// it (the broker here kept it open): its server side then ends, while
	// the connection and the stream in use go on.
	select {
	case <-streams[0].Context().Done():
	case <-testCtx(t).Done():
		t.Fatal("the retired cache stream was never finished")
	}
	require.NoError(t, streams[1].Context().Err(), "the stream in use ended too")
	require.NoError(t, c.Context().Err(), "the connection ended")
}
