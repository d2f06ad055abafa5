package server_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
)

// Finding 3, caches: one key overwritten 200× with 256 KiB and then
// deleted keeps at most the cache log's byte bound, not 50 MiB; a cache's
// live bytes are capped (limit_exceeded); a legitimate client is served
// throughout.
func TestCacheRetentionInBytes(t *testing.T) {
	const writes, size = 200, 256 << 10
	cfg := durableCfg()
	cfg.Engine.CacheLogRetainBytes = 4 << 20
	cfg.Engine.MaxCacheBytes = 2 << 20
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	good := dial(t, srv, nil)
	checkServing(t, good)
	c := dial(t, srv, nil)
	ref := felix.CacheRef{TenantID: topic.TenantID, Namespace: "ns", Cache: "churn"}
	require.NoError(t, api.New(c).CachePut(ctx, ref, "warm", []byte("x"), 0))

	before := heapAfterGC()
	value := bytes.Repeat([]byte("v"), size)
	for i := range writes {
		value[0] = byte(i)
		require.NoError(t, api.New(c).CachePut(ctx, ref, "k", value, 0))
	}
	_, found, err := api.New(c).CacheDelete(ctx, ref, "k")
	require.NoError(t, err)
	require.True(t, found)
	after := heapAfterGC()
	logB, liveB := srv.Engine().CacheBytes()
	grew := int64(after) - int64(before)
	t.Logf("heap grew %d KiB; cache log %d KiB, live %d B", grew>>10, logB>>10, liveB)
	require.LessOrEqual(t, logB, int64(4<<20), "the log is bounded in bytes")
	require.Less(t, grew, int64(10<<20), "not %d MiB", writes*size>>20)

	// Live bytes: 8 keys of 256 KiB do not fit 2 MiB with their keys.
	var be *felix.BrokerError
	for i := range 8 {
		err = api.New(c).CachePut(ctx, ref, fmt.Sprint("full-", i), value, 0)
		if err != nil {
			break
		}
	}
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeLimitExceeded, be.Code)
	_, liveB = srv.Engine().CacheBytes()
	require.LessOrEqual(t, liveB, int64(2<<20))
	checkServing(t, good)
}

// Finding 3, streams: a tenant can make the broker create only so many
// streams on first use; all logs together stay under the engine-wide byte
// bound (plus the newest record of each shard) however many streams are
// written; the heap follows it.
func TestStreamRetentionAndAutoCreateLimits(t *testing.T) {
	const perStream, size = 64, 128 << 10 // 8 MiB per stream
	cfg := durableCfg()
	cfg.Engine.MaxStreamsPerTenant = 6
	cfg.Engine.MaxLogBytes = 8 << 20
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	good := dial(t, srv, nil)
	checkServing(t, good) // creates the stream "s"
	pub := dial(t, srv, nil)
	before := heapAfterGC()
	payload := bytes.Repeat([]byte("s"), size)
	for i := range 5 {
		tp := felix.Topic{TenantID: topic.TenantID, Namespace: "ns", Stream: fmt.Sprint("auto-", i)}
		for range perStream {
			_, err := pub.Publish(ctx, tp, payload, conn.PublishOptions{Ack: felix.AckPerBatch})
			require.NoError(t, err)
		}
		// The bound, plus at most the newest record of each shard (kept
		// whatever the bounds say).
		require.LessOrEqual(t, srv.Stats().Engine.LogBytes, uint64(8<<20+(i+2)*(size+256)))
	}
	_, err := pub.Publish(ctx, felix.Topic{TenantID: topic.TenantID, Namespace: "ns", Stream: "one-too-many"},
		payload, conn.PublishOptions{Ack: felix.AckPerBatch})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeLimitExceeded, be.Code)
	after := heapAfterGC()
	grew := int64(after) - int64(before)
	t.Logf("heap grew %d KiB for %d MiB published; logs hold %d KiB", grew>>10, 5*perStream*size>>20, srv.Stats().Engine.LogBytes>>10)
	require.Less(t, grew, int64(16<<20))
	checkServing(t, good)
}

// A cache watcher that never reads holds at most its queue's byte bound
// of overwritten values (not its 1024 queued events), then is lagged.
func TestStalledWatchBoundedInBytes(t *testing.T) {
	const writes, size = 100, 256 << 10
	cfg := durableCfg()
	cfg.Engine.CacheLogRetainBytes = 2 << 20
	cfg.Engine.WatchQueueBytes = 2 << 20
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	ref := felix.CacheRef{TenantID: topic.TenantID, Namespace: "ns", Cache: "w"}
	c := dial(t, srv, nil)
	require.NoError(t, api.New(c).CachePut(ctx, ref, "k", []byte("x"), 0))
	r := dialRaw(t, srv)
	s := r.stream(t, rawFlags, felix.FeatureCacheWatch|felix.FeatureErrorCodes)
	s.send(&felix.CacheWatch{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: felix.Some("k")})
	_, ok := s.recv().(*felix.CacheWatchStarted)
	require.True(t, ok)

	before := heapAfterGC()
	value := bytes.Repeat([]byte("v"), size)
	for i := range writes {
		value[0] = byte(i)
		require.NoError(t, api.New(c).CachePut(ctx, ref, "k", value, 0))
	}
	after := heapAfterGC()
	grew := int64(after) - int64(before)
	t.Logf("heap grew %d KiB for %d MiB of overwrites", grew>>10, writes*size>>20)
	require.Less(t, grew, int64(10<<20))
	checkServing(t, c)
}
