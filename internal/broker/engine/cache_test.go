package engine

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

var cr = CacheRef{Tenant: "t1", Namespace: "ns", Cache: "c"}

func dur(d time.Duration) *time.Duration { return &d }

func TestCachePutGetDeleteTTL(t *testing.T) {
	clk := newFakeClock()
	e := New(Config{Now: clk.Now})
	defer e.Close()
	_, _, found, err := e.CacheGet(cr, "k")
	require.NoError(t, err)
	require.False(t, found)
	v1, err := e.CachePut(cr, "k", []byte("v1"), nil)
	require.NoError(t, err)
	val, ver, found, err := e.CacheGet(cr, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v1", string(val))
	require.Equal(t, v1, ver)

	_, err = e.CachePut(cr, "ttl", []byte("short"), dur(1500*time.Millisecond))
	require.NoError(t, err)
	clk.Advance(1499 * time.Millisecond)
	_, _, found, _ = e.CacheGet(cr, "ttl")
	require.True(t, found, "not yet expired")
	clk.Advance(time.Millisecond)
	_, _, found, _ = e.CacheGet(cr, "ttl")
	require.False(t, found, "expired at put time + ttl")
	old, found, err := e.CacheDelete(cr, "ttl")
	require.NoError(t, err)
	require.False(t, found)
	require.Nil(t, old)

	old, found, err = e.CacheDelete(cr, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v1", string(old))
	_, _, found, _ = e.CacheGet(cr, "k")
	require.False(t, found)
	_, err = e.CachePut(cr, "empty", nil, nil)
	require.NoError(t, err)
	val, _, found, _ = e.CacheGet(cr, "empty")
	require.True(t, found)
	require.NotNil(t, val, "an empty value is a value, not a miss")
	st := e.Stats()
	require.Equal(t, uint64(1), st.CacheExpired)
	require.Equal(t, uint64(1), st.CacheDeletes)
}

func TestCacheConditional(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	r, err := e.CachePutIf(cr, "k", []byte("a"), nil, Condition{Absent: true})
	require.NoError(t, err)
	require.True(t, r.Applied)
	require.True(t, r.HasVersion)
	v := r.Version
	r, err = e.CachePutIf(cr, "k", []byte("b"), nil, Condition{Absent: true})
	require.NoError(t, err)
	require.Equal(t, CondResult{Version: v, HasVersion: true}, r, "not applied: current version")
	r, err = e.CachePutIf(cr, "k", []byte("b"), nil, Condition{Version: v + 100})
	require.NoError(t, err)
	require.False(t, r.Applied)
	r, err = e.CachePutIf(cr, "k", []byte("b"), nil, Condition{Version: v})
	require.NoError(t, err)
	require.True(t, r.Applied)
	require.Greater(t, r.Version, v)
	v2 := r.Version
	r, err = e.CacheDeleteIf(cr, "k", v)
	require.NoError(t, err)
	require.Equal(t, CondResult{Version: v2, HasVersion: true}, r)
	r, err = e.CacheDeleteIf(cr, "k", v2)
	require.NoError(t, err)
	require.Equal(t, CondResult{Applied: true}, r)
	r, err = e.CacheDeleteIf(cr, "k", v2)
	require.NoError(t, err)
	require.Equal(t, CondResult{}, r, "no live entry: no version")
	require.Equal(t, uint64(4), e.Stats().ConditionFailures)
}

func TestCounters(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	_, ok, err := e.CounterGet(cr, "n")
	require.NoError(t, err)
	require.False(t, ok)
	v, err := e.CounterAdd(cr, "n", 5)
	require.NoError(t, err)
	require.Equal(t, int64(5), v)
	v, _ = e.CounterAdd(cr, "n", -7)
	require.Equal(t, int64(-2), v)
	v, ok, _ = e.CounterGet(cr, "n")
	require.True(t, ok)
	require.Equal(t, int64(-2), v)
	_, _, found, _ := e.CacheGet(cr, "n")
	require.False(t, found, "counters do not share the key space of values")
}

func TestCacheNotFoundWithoutAutoCreate(t *testing.T) {
	e := New(Config{NoAutoCreateCaches: true})
	defer e.Close()
	_, err := e.CachePut(cr, "k", []byte("v"), nil)
	var ee *Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, felix.CodeNotFound, ee.Code)
	e.CreateCache(cr)
	_, err = e.CachePut(cr, "k", []byte("v"), nil)
	require.NoError(t, err)
}

func nextW(t testing.TB, w *Watch) WatchDelivery {
	t.Helper()
	d, err := w.Next(ctxT(t))
	require.NoError(t, err)
	return d
}

func noWatchEvent(t testing.TB, w *Watch) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	d, err := w.Next(ctx)
	require.Error(t, err, "unexpected %+v", d)
}

func TestWatchKeyAndPrefix(t *testing.T) {
	clk := newFakeClock()
	e := New(Config{Now: clk.Now})
	defer e.Close()
	key, info, err := e.Watch(WatchRequest{CacheRef: cr, Key: "user:1"})
	require.NoError(t, err)
	defer key.Close()
	require.Equal(t, uint64(0), info.ResumeOffset)
	pfx, _, err := e.Watch(WatchRequest{CacheRef: cr, IsPrefix: true, Prefix: "user:"})
	require.NoError(t, err)
	defer pfx.Close()

	_, err = e.CachePut(cr, "user:1", []byte("a"), dur(time.Second))
	require.NoError(t, err)
	_, err = e.CachePut(cr, "other", []byte("x"), nil)
	require.NoError(t, err)
	_, err = e.CachePut(cr, "user:2", []byte("b"), nil)
	require.NoError(t, err)
	_, _, err = e.CacheDelete(cr, "user:1")
	require.NoError(t, err)

	exp := uint64(clk.Now().Add(time.Second).UnixMilli())
	require.Equal(t, CacheEvent{Key: "user:1", Value: []byte("a"), Offset: 0, ExpiresAtMillis: exp}, nextW(t, key).Event)
	require.Equal(t, CacheEvent{Key: "user:1", Deleted: true, Offset: 3}, nextW(t, key).Event)
	noWatchEvent(t, key)
	var offs []uint64
	for range 3 {
		offs = append(offs, nextW(t, pfx).Event.Offset)
	}
	require.Equal(t, []uint64{0, 2, 3}, offs, "filtered watches see sparse offsets")
	noWatchEvent(t, pfx)
}

func TestWatchRetainedAndErrors(t *testing.T) {
	clk := newFakeClock()
	e := New(Config{Now: clk.Now})
	defer e.Close()
	_, _ = e.CachePut(cr, "a:1", []byte("1"), nil)
	_, _ = e.CachePut(cr, "a:2", []byte("2"), dur(time.Second))
	_, _ = e.CachePut(cr, "b:1", []byte("x"), nil)
	_, _ = e.CachePut(cr, "a:1", []byte("1b"), nil)
	clk.Advance(2 * time.Second) // a:2 expired
	w, info, err := e.Watch(WatchRequest{CacheRef: cr, IsPrefix: true, Prefix: "a:", Retained: true})
	require.NoError(t, err)
	defer w.Close()
	require.Equal(t, uint64(1), info.RetainedCount)
	require.Equal(t, uint64(4), info.ResumeOffset)
	require.Equal(t, CacheEvent{Key: "a:1", Value: []byte("1b"), Offset: 3}, nextW(t, w).Event)
	noWatchEvent(t, w)

	_, _, err = e.Watch(WatchRequest{CacheRef: cr, Key: "k", Retained: true, HasFrom: true})
	var ee *Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, felix.CodeInvalidRequest, ee.Code)
	_, _, err = e.Watch(WatchRequest{CacheRef: cr, IsPrefix: true, Shard: 1})
	require.ErrorAs(t, err, &ee)
	_, _, err = e.Watch(WatchRequest{CacheRef: cr, Key: "k", HasFrom: true, FromOffset: 9})
	var ce *CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, CursorError{Reason: CursorInFuture, Requested: 9, Available: 4}, *ce)
}

// A watcher that reconnects with from_offset = last seen + 1 gets every
// later write exactly once, even across log trimming limits.
func TestWatchResumeWithoutGaps(t *testing.T) {
	e := New(Config{CacheLogRetain: 50})
	defer e.Close()
	w, _, err := e.Watch(WatchRequest{CacheRef: cr, IsPrefix: true})
	require.NoError(t, err)
	for i := range 10 {
		_, _ = e.CachePut(cr, "k"+strconv.Itoa(i), []byte{byte(i)}, nil)
	}
	last := uint64(0)
	for range 4 {
		last = nextW(t, w).Event.Offset
	}
	w.Close()
	for i := 10; i < 20; i++ {
		_, _ = e.CachePut(cr, "k"+strconv.Itoa(i), []byte{byte(i)}, nil)
	}
	w, _, err = e.Watch(WatchRequest{CacheRef: cr, IsPrefix: true, HasFrom: true, FromOffset: last + 1})
	require.NoError(t, err)
	defer w.Close()
	go func() {
		for i := 20; i < 30; i++ {
			_, _ = e.CachePut(cr, "k"+strconv.Itoa(i), []byte{byte(i)}, nil)
		}
	}()
	for want := last + 1; want < 30; want++ {
		ev := nextW(t, w).Event
		require.Equal(t, want, ev.Offset)
		require.Equal(t, "k"+strconv.Itoa(int(want)), ev.Key)
	}
	noWatchEvent(t, w)
	for range 60 {
		_, _ = e.CachePut(cr, "z", nil, nil)
	}
	_, _, err = e.Watch(WatchRequest{CacheRef: cr, Key: "k", HasFrom: true, FromOffset: 2})
	var ce *CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, CursorTooOld, ce.Reason)
	require.Equal(t, uint64(40), ce.Available)
}

func TestWatchLagged(t *testing.T) {
	e := New(Config{WatchQueueCapacity: 3})
	defer e.Close()
	slow, _, err := e.Watch(WatchRequest{CacheRef: cr, Key: "k"})
	require.NoError(t, err)
	for i := range 10 {
		_, err := e.CachePut(cr, "k", []byte{byte(i)}, nil) // never blocks
		require.NoError(t, err)
	}
	for i := range 3 {
		require.Equal(t, uint64(i), nextW(t, slow).Event.Offset)
	}
	d := nextW(t, slow)
	require.Equal(t, WatchDelivery{Lagged: true, ResumeFrom: 3}, d)
	_, err = slow.Next(ctxT(t))
	require.ErrorIs(t, err, ErrClosed)
	// resuming where the lag report said loses nothing
	w, _, err := e.Watch(WatchRequest{CacheRef: cr, Key: "k", HasFrom: true, FromOffset: d.ResumeFrom})
	require.NoError(t, err)
	defer w.Close()
	for want := uint64(3); want < 10; want++ {
		require.Equal(t, want, nextW(t, w).Event.Offset)
	}
	st := e.Stats()
	require.Equal(t, uint64(1), st.LaggedWatches)
	require.Equal(t, uint64(1), st.ActiveWatches)
}

// A watch that lagged but has not read its lag report when the engine
// drains ends with a lag report at its first undelivered event, never
// cleanly; Undelivered counts it until then.
func TestDrainKeepsAWatchsPendingLagReport(t *testing.T) {
	for _, read := range []int{0, 1, 3} {
		t.Run(strconv.Itoa(read), func(t *testing.T) {
			e := New(Config{WatchQueueCapacity: 3})
			defer e.Close()
			w, _, err := e.Watch(WatchRequest{CacheRef: cr, Key: "k"})
			require.NoError(t, err)
			defer w.Close()
			for i := range 10 {
				_, err := e.CachePut(cr, "k", []byte{byte(i)}, nil)
				require.NoError(t, err)
			}
			for i := range read {
				require.Equal(t, uint64(i), nextW(t, w).Event.Offset)
			}
			e.StopPublishes()
			require.Equal(t, 1, e.Undelivered(), "a pending lag report is something to deliver")
			e.Drain()
			got := uint64(read)
			for {
				d := nextW(t, w)
				if !d.Lagged {
					require.Equal(t, got, d.Event.Offset)
					got++
					continue
				}
				require.Equal(t, got, d.ResumeFrom, "resume at the first undelivered event")
				break
			}
			_, err = w.Next(ctxT(t))
			require.ErrorIs(t, err, ErrClosed)
		})
	}
}

// A watch the engine closes with events it had not delivered (a shutdown
// without a drain, or after a drain timed out) ends with the lag report
// naming the first of them, never a clean end; one that had delivered
// everything ends cleanly.
func TestWatchClosedWithBacklogIsNotACleanEnd(t *testing.T) {
	put := func(e *Engine, key string) uint64 {
		t.Helper()
		v, err := e.CachePut(cr, key, []byte("v"), nil)
		require.NoError(t, err)
		return v
	}
	t.Run("queued", func(t *testing.T) {
		e := New(Config{})
		w, _, err := e.Watch(WatchRequest{CacheRef: cr, IsPrefix: true, Prefix: "k"})
		require.NoError(t, err)
		for i := range 4 {
			put(e, "k"+strconv.Itoa(i))
		}
		d := nextW(t, w)
		require.Equal(t, "k0", d.Event.Key)
		e.Close()
		d = nextW(t, w)
		require.True(t, d.Lagged, "%+v", d)
		require.Equal(t, uint64(1), d.ResumeFrom, "the first event not delivered")
		_, err = w.Next(ctxT(t))
		require.ErrorIs(t, err, ErrClosed)
	})
	t.Run("catch-up", func(t *testing.T) {
		e := New(Config{})
		for i := range 4 {
			put(e, "k"+strconv.Itoa(i))
		}
		w, _, err := e.Watch(WatchRequest{CacheRef: cr, IsPrefix: true, Prefix: "k", HasFrom: true, FromOffset: 2})
		require.NoError(t, err)
		e.Close()
		d := nextW(t, w)
		require.True(t, d.Lagged, "%+v", d)
		require.Equal(t, uint64(2), d.ResumeFrom)
	})
	t.Run("lag report not taken", func(t *testing.T) {
		e := New(Config{WatchQueueBytes: 1})
		w, _, err := e.Watch(WatchRequest{CacheRef: cr, IsPrefix: true, Prefix: "k"})
		require.NoError(t, err)
		put(e, "k0") // an empty queue takes it
		put(e, "k1") // over the bound: lagged at 1
		d := nextW(t, w)
		require.Equal(t, "k0", d.Event.Key)
		e.Close()
		d = nextW(t, w)
		require.Equal(t, WatchDelivery{Lagged: true, ResumeFrom: 1}, d)
	})
	t.Run("delivered", func(t *testing.T) {
		e := New(Config{})
		w, _, err := e.Watch(WatchRequest{CacheRef: cr, IsPrefix: true, Prefix: "k"})
		require.NoError(t, err)
		put(e, "k0")
		nextW(t, w)
		e.Close()
		_, err = w.Next(ctxT(t))
		require.ErrorIs(t, err, ErrClosed)
	})
}
