package server_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

var cref = felix.CacheRef{TenantID: server.DemoTenant, Namespace: "ns", Cache: "c"}

func TestCacheTTLExpiry(t *testing.T) {
	clk := &clock{}
	clk.ns.Store(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	cfg := server.Config{}
	cfg.Engine.Now = clk.now
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	c := dial(t, srv, nil)
	require.NoError(t, api.New(c).CachePut(ctx, cref, "session", []byte("s1"), 1500*time.Millisecond))
	require.NoError(t, api.New(c).CachePut(ctx, cref, "forever", []byte("f"), 0))
	clk.advance(1499 * time.Millisecond)
	v, found, err := api.New(c).CacheGet(ctx, cref, "session")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "s1", string(v))
	clk.advance(time.Millisecond)
	_, found, err = api.New(c).CacheGet(ctx, cref, "session")
	require.NoError(t, err)
	require.False(t, found, "expired exactly at put time + ttl")
	clk.advance(24 * time.Hour)
	_, found, err = api.New(c).CacheGet(ctx, cref, "forever")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, uint64(1), srv.Stats().Engine.CacheExpired)
}

func TestCacheConditionalAndVersionShaping(t *testing.T) {
	srv := startBroker(t, server.Config{})
	ctx := ctxT(t)
	c := dial(t, srv, nil)
	r := dialRaw(t, srv)
	s := r.stream(t, rawFlags, felix.FeatureCacheConditional)
	s.send(&felix.CachePutIf{TenantID: cref.TenantID, Namespace: cref.Namespace, Cache: cref.Cache, Key: "k",
		Value: []byte("a"), Condition: felix.CacheCondition{Kind: felix.CondAbsent}, RequestID: 1})
	res := s.recv().(*felix.CacheConditionResult)
	require.True(t, res.Applied)
	v1 := res.Version.V
	s.send(&felix.CachePutIf{TenantID: cref.TenantID, Namespace: cref.Namespace, Cache: cref.Cache, Key: "k",
		Value: []byte("b"), Condition: felix.CacheCondition{Kind: felix.CondAbsent}, RequestID: 2})
	res = s.recv().(*felix.CacheConditionResult)
	require.False(t, res.Applied)
	require.Equal(t, v1, res.Version.V)
	s.send(&felix.CacheGet{TenantID: cref.TenantID, Namespace: cref.Namespace, Cache: cref.Cache, Key: "k", RequestID: felix.Some[uint64](3)})
	cv := s.recv().(*felix.CacheValue)
	require.Equal(t, v1, cv.Version.V, "version for clients that offered CACHE_CONDITIONAL")
	s.send(&felix.CacheDeleteIf{TenantID: cref.TenantID, Namespace: cref.Namespace, Cache: cref.Cache, Key: "k", Version: v1, RequestID: 4})
	res = s.recv().(*felix.CacheConditionResult)
	require.True(t, res.Applied)
	require.False(t, res.Version.Set)

	plain := r.stream(t, rawFlags, 0)
	require.NoError(t, api.New(c).CachePut(ctx, cref, "k2", []byte("x"), 0))
	plain.send(&felix.CacheGet{TenantID: cref.TenantID, Namespace: cref.Namespace, Cache: cref.Cache, Key: "k2", RequestID: felix.Some[uint64](1)})
	cv = plain.recv().(*felix.CacheValue)
	require.Equal(t, "x", string(cv.Value.V))
	require.False(t, cv.Version.Set, "no version without CACHE_CONDITIONAL")
	// one-shot form: no request_id, the stream ends after the answer
	plain.send(&felix.CacheGet{TenantID: cref.TenantID, Namespace: cref.Namespace, Cache: cref.Cache, Key: "nope"})
	cv = plain.recv().(*felix.CacheValue)
	require.False(t, cv.Value.Set)
	plain.ended()
}

func TestWatchResumeWithoutGaps(t *testing.T) {
	srv := startBroker(t, server.Config{})
	ctx := ctxT(t)
	c := dial(t, srv, nil)
	w, err := c.CacheWatch(ctx, cref, conn.WatchOptions{Prefix: felix.Some("user:")})
	require.NoError(t, err)
	put := func(i int) {
		require.NoError(t, api.New(c).CachePut(ctx, cref, "user:"+strconv.Itoa(i), []byte(strconv.Itoa(i)), 0))
		require.NoError(t, api.New(c).CachePut(ctx, cref, "other:"+strconv.Itoa(i), []byte("-"), 0))
	}
	for i := range 10 {
		put(i)
	}
	var last uint64
	for i := range 5 {
		ev, err := w.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, "user:"+strconv.Itoa(i), ev.Key)
		last = ev.Offset
	}
	require.NoError(t, w.Close())
	for i := 10; i < 20; i++ {
		put(i)
	}
	w, err = c.CacheWatch(ctx, cref, conn.WatchOptions{Prefix: felix.Some("user:"), FromOffset: felix.Some(last + 1)})
	require.NoError(t, err)
	defer w.Close()
	go func() {
		for i := 20; i < 30; i++ {
			put(i)
		}
	}()
	for i := 5; i < 30; i++ {
		ev, err := w.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, "user:"+strconv.Itoa(i), ev.Key, "every write after the resume point, once, in order")
		require.Greater(t, ev.Offset, last)
		last = ev.Offset
	}

	// retained snapshot, then live
	rw, err := c.CacheWatch(ctx, cref, conn.WatchOptions{Key: felix.Some("user:3"), Retained: true})
	require.NoError(t, err)
	defer rw.Close()
	require.Equal(t, uint64(1), rw.Info().RetainedCount.V)
	ev, err := rw.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "3", string(ev.Value))
	_, _, err = api.New(c).CacheDelete(ctx, cref, "user:3")
	require.NoError(t, err)
	ev, err = rw.Next(ctx)
	require.NoError(t, err)
	require.True(t, ev.Deleted)

	_, err = c.CacheWatch(ctx, cref, conn.WatchOptions{Key: felix.Some("k"), FromOffset: felix.Some[uint64](1 << 40)})
	var ce *felix.CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "in_future", ce.Reason)
}

// A watcher that stops reading is ended with cache_watch_lagged; resuming
// from its resume_from loses nothing.
func TestWatchLaggedResume(t *testing.T) {
	cfg := server.Config{}
	cfg.Engine.WatchQueueCapacity = 4
	cfg.Engine.CacheLogRetainBytes = 64 << 20 // the whole history stays resumable
	// The watcher reads nothing while the puts run, which on a loaded
	// machine under -race outlasts the default 30 s write bound: the reset
	// it causes must not be what this test sees.
	cfg.EventWriteTimeout = time.Hour
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	slowC := dial(t, srv, nil)
	w, err := slowC.CacheWatch(ctx, cref, conn.WatchOptions{Key: felix.Some("hot")})
	require.NoError(t, err)
	defer w.Close()
	c := dial(t, srv, nil)
	big := make([]byte, 64<<10)
	const n = 400 // 25 MiB of events: the watcher cannot keep up without reading
	for i := range n {
		big[0] = byte(i)
		require.NoError(t, api.New(c).CachePut(ctx, cref, "hot", big, 0))
	}
	var got []uint64
	var lag *felix.LaggedError
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			require.ErrorAs(t, err, &lag)
			require.True(t, lag.Watch)
			break
		}
		got = append(got, ev.Offset)
	}
	require.NotEmpty(t, got)
	require.Equal(t, got[len(got)-1]+1, lag.ResumeFrom)
	w2, err := c.CacheWatch(ctx, cref, conn.WatchOptions{Key: felix.Some("hot"), FromOffset: felix.Some(lag.ResumeFrom)})
	require.NoError(t, err)
	defer w2.Close()
	for off := lag.ResumeFrom; off < n; off++ {
		ev, err := w2.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, off, ev.Offset)
	}
}
