package server_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// Issue 22 #7: the live bytes of one tenant's caches, and of all caches,
// are bounded besides each cache's: tenants that fill caches are refused
// limit_exceeded at their own bound and, over their share, at the
// broker-wide bound (issue 32: a tenant within its share is not), the heap
// follows the bounds, and a tenant that holds data keeps reading and
// rewriting it.
func TestCacheBytesBoundedPerTenantAndBrokerWide(t *testing.T) {
	const value = 128 << 10
	toks, err := server.ParseTokens("t1:demo-token,tA:a,tB:b,tC:c")
	require.NoError(t, err)
	cfg := durableCfg()
	cfg.Tokens = toks
	cfg.Engine.MaxCacheBytes = 1 << 20
	cfg.Engine.MaxTenantCacheBytes = 2 << 20
	cfg.Engine.MaxTotalCacheBytes = 5 << 20
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	good := dial(t, srv, nil)
	mine := felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "mine"}
	big := make([]byte, value)
	require.NoError(t, api.New(good).CachePut(ctx, mine, "k", big, 0))
	heap0 := heapAfterGC()

	limited := func(err error, whose string) {
		t.Helper()
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.CodeLimitExceeded, be.Code)
		require.Contains(t, be.Message, "cache full: "+whose)
	}
	fill := func(tenant, token string) (stored int, last error) {
		c := dial(t, srv, func(c *conn.Config) { c.TenantID, c.Token = tenant, token })
		for cache := range 20 {
			ref := felix.CacheRef{TenantID: tenant, Namespace: "ns", Cache: "c" + strconv.Itoa(cache)}
			for k := range 4 {
				if err := api.New(c).CachePut(ctx, ref, "k"+strconv.Itoa(k), big, 0); err != nil {
					return stored, err
				}
				stored += value
			}
		}
		return stored, nil
	}
	a, err := fill("tA", "a")
	limited(err, "the tenant's caches'")
	require.LessOrEqual(t, a, 2<<20)
	b, err := fill("tB", "b")
	limited(err, "the tenant's caches'")
	c, err := fill("tC", "c")
	limited(err, "all caches'")
	// Four tenants hold live bytes: tC's share of the broker-wide bound
	// is a quarter of it. The bound refuses it there and not before,
	// although tA and tB had filled all but the share of t1.
	const share = (5 << 20) / 4
	require.Less(t, c, a, "the broker-wide bound stopped tC at its share")
	require.Greater(t, c, share-2*value, "tC got its share")
	_, live := srv.Engine().CacheBytes()
	require.LessOrEqual(t, live, int64(5<<20+share), "over the bound by at most the share of a tenant within it")
	grown := int64(heapAfterGC()) - int64(heap0)
	t.Logf("tenants stored %d, %d, %d bytes; live %d; heap %+d KiB", a, b, c, live, grown>>10)
	require.Less(t, grown, int64(12<<20), "the heap follows the broker-wide bound (values and their write log)")

	// The tenant holding data reads it and rewrites it in place.
	v, found, err := api.New(good).CacheGet(ctx, mine, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Len(t, v, value)
	require.NoError(t, api.New(good).CachePut(ctx, mine, "k", big, 0))
	_, err = good.Publish(ctx, topic, []byte("still here"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
}

// The write logs of all caches together are bounded too: overwrites (which
// keep the live bytes flat while the logs hold every old value) trim the
// writing cache's oldest events beyond the broker-wide bound.
func TestCacheLogsBoundedBrokerWide(t *testing.T) {
	const value, caches, writes, total = 128 << 10, 4, 40, 2 << 20
	cfg := durableCfg()
	cfg.Engine.MaxTotalCacheLogBytes = total
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	c := dial(t, srv, nil)
	heap0 := heapAfterGC()
	big := make([]byte, value)
	for i := range writes {
		for k := range caches {
			big[0] = byte(i)
			ref := felix.CacheRef{TenantID: topic.TenantID, Namespace: "ns", Cache: "log" + strconv.Itoa(k)}
			require.NoError(t, api.New(c).CachePut(ctx, ref, "k", big, 0))
		}
	}
	logBytes, live := srv.Engine().CacheBytes()
	grown := int64(heapAfterGC()) - int64(heap0)
	t.Logf("%d MiB written: logs %d KiB, live %d KiB, heap %+d KiB", caches*writes*value>>20, logBytes>>10, live>>10, grown>>10)
	require.LessOrEqual(t, logBytes, int64(total+value+4096), "the logs stay at the broker-wide bound (plus the event being written)")
	require.Less(t, grown, int64(8<<20))
	checkServing(t, c)
}
