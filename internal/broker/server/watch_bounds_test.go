package server_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
)

// Issue 22 #6: watches that never read share one encoded frame per live
// event (the heap grows by about one value and one frame, not one frame
// per watch), and their queues are held to the engine-wide queued-bytes
// bound that subscriber queues share: beyond it the stalled watches are
// lagged while a watcher that reads gets every event.
func TestStalledWatchesShareFramesAndTheQueuedBound(t *testing.T) {
	const watches, big, smallSize, puts = 32, 2 << 20, 256 << 10, 40
	const maxQueued = 4 << 20
	cfg := durableCfg()
	cfg.Engine.MaxQueuedBytes = maxQueued
	cfg.Engine.WatchQueueBytes = 64 << 20
	cfg.Engine.CacheLogRetainBytes = 1 << 20
	cfg.EventWriteTimeout = time.Second // then the stalled watches end
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	ref := felix.CacheRef{TenantID: topic.TenantID, Namespace: "ns", Cache: "w"}
	c := dial(t, srv, nil)
	reader, err := dial(t, srv, nil).CacheWatch(ctx, ref, conn.WatchOptions{Key: felix.Some("k")})
	require.NoError(t, err)
	for range watches / 8 {
		r := dialRaw(t, srv)
		for range 8 {
			s := r.stream(t, rawFlags, felix.FeatureCacheWatch|felix.FeatureErrorCodes)
			s.send(&felix.CacheWatch{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: felix.Some("k")})
			_, ok := s.recv().(*felix.CacheWatchStarted)
			require.True(t, ok) // its event stream is never read
		}
	}
	before := heapAfterGC()
	value := bytes.Repeat([]byte("v"), big)
	require.NoError(t, api.New(c).CachePut(ctx, ref, "k", value, 0))
	ev, err := reader.Next(ctx)
	require.NoError(t, err)
	require.Len(t, ev.Value, big)
	// Every watch's pump takes the event (and writes what flow control lets through).
	waitFor(t, func() bool { return srv.Stats().Engine.WatchEvents >= watches+1 })
	grew := int64(heapAfterGC()) - int64(before)
	st := srv.Stats().Engine
	t.Logf("%d watches, one %d MiB put: %d encodes, heap %+d KiB", watches+1, big>>20, st.WatchEventEncodes, grew>>10)
	require.Equal(t, uint64(1), st.WatchEventEncodes, "one frame for every watch")
	// The heap also holds what the stalled streams' client side (this
	// process) buffered. The delivery workers (8 per tenant) take the
	// stalled watches in rounds, each ended by the 1 s write timeout's
	// reset; a reset returns its stream's bytes to the connection window,
	// so each round sends another window's worth, which the never-reading
	// client keeps (quic-go holds a reset stream's data until it is read):
	// 20 to 25 MiB measured, 10.5 MiB of it quic-go frames of the client's
	// streams, where one pump per watch, all blocked at once, measured
	// 13.5 MiB. A frame per watch would add 33 × 2.7 MiB.
	require.Less(t, grew, int64(32<<20), "one value and one frame, not one frame (2.7 MiB) per watch")

	small := bytes.Repeat([]byte("s"), smallSize)
	peak := int64(0)
	for i := range puts {
		small[0] = byte(i)
		require.NoError(t, api.New(c).CachePut(ctx, ref, "k", small, 0))
		ev, err := reader.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, byte(i), ev.Value[0], "the reading watcher gets every event")
		peak = max(peak, srv.Engine().QueuedBytes())
	}
	st = srv.Stats().Engine
	t.Logf("after %d puts of %d KiB (%d MiB): queued peak %d KiB", puts, smallSize>>10, puts*smallSize>>20, peak>>10)
	require.LessOrEqual(t, peak, int64(maxQueued+2*(smallSize+smallSize/3+4096)), "watch queues stay inside the engine-wide bound")
	// The stalled watches end (write timeout) and every charge comes back.
	waitFor(t, func() bool { return srv.Stats().Engine.ActiveWatches == 1 && srv.Engine().QueuedBytes() == 0 })
	checkServing(t, c)
}
