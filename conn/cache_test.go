package conn

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

var cref = felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "c"}

func TestCachePutGetDelete(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, func(c *Config) { c.CacheStreams = 3 })
	ctx := testCtx(t)

	v, found, err := cacheGet(ctx, c, cref, "k")
	require.NoError(t, err) // a miss is not an error
	require.False(t, found)
	require.Nil(t, v)

	require.NoError(t, cachePut(ctx, c, cref, "k", []byte("v1"), 0))
	v, found, err = cacheGet(ctx, c, cref, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v1", string(v))

	// An empty value is a hit, not a miss.
	require.NoError(t, cachePut(ctx, c, cref, "empty", []byte{}, 0))
	v, found, err = cacheGet(ctx, c, cref, "empty")
	require.NoError(t, err)
	require.True(t, found)
	require.Empty(t, v)

	// TTL.
	require.NoError(t, cachePut(ctx, c, cref, "ttl", []byte("x"), 50*time.Millisecond))
	waitFor(t, func() bool {
		_, found, err := cacheGet(ctx, c, cref, "ttl")
		return err == nil && !found
	}, 5*time.Second, 10*time.Millisecond)

	old, found, err := cacheDelete(ctx, c, cref, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v1", string(old))
	_, found, err = cacheGet(ctx, c, cref, "k")
	require.NoError(t, err)
	require.False(t, found)

	// A broker error without request_id answers the oldest request and
	// leaves the stream usable.
	err = cachePut(ctx, c, felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "missing"}, "k", []byte("v"), 0)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotFound, be.Code)
	require.NoError(t, cachePut(ctx, c, cref, "k2", []byte("v2"), 0))
}

func TestCacheConcurrentMultiplexed(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, func(c *Config) { c.CacheStreams = 2 })
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 100 {
		wg.Go(func() {
			k := fmt.Sprintf("k%d", i)
			if err := cachePut(ctx, c, cref, k, []byte(k), 0); err != nil {
				errs <- err
				return
			}
			v, found, err := cacheGet(ctx, c, cref, k)
			if err != nil || !found || string(v) != k {
				errs <- fmt.Errorf("get %s: %q %v %v", k, v, found, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c.cacheMu.Lock()
	require.Len(t, c.caches, 2)
	c.cacheMu.Unlock()
}

func TestCounters(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	_, found, err := counterGet(ctx, c, cref, "n")
	require.NoError(t, err)
	require.False(t, found)
	v, _, err := counterAdd(ctx, c, cref, "n", 5)
	require.NoError(t, err)
	require.EqualValues(t, 5, v)
	v, _, err = counterAdd(ctx, c, cref, "n", -7)
	require.NoError(t, err)
	require.EqualValues(t, -2, v)
	v, found, err = counterGet(ctx, c, cref, "n")
	require.NoError(t, err)
	require.True(t, found)
	require.EqualValues(t, -2, v)

	// Not advertised: refused locally, nothing sent.
	b2 := startBroker(t, brokerOpts{offer: felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureErrorCodes}})
	c2 := b2.dial(t, nil)
	_, _, err = counterAdd(ctx, c2, cref, "n", 1)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, _, err = counterGet(ctx, c2, cref, "n")
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, _, err = cacheDelete(ctx, c2, cref, "n")
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c2.CacheWatch(ctx, cref, WatchOptions{Key: felix.Some("k")})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	require.Empty(t, b2.seenTypes())
}

func TestCacheWatch(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	_, err := c.CacheWatch(ctx, cref, WatchOptions{})
	require.ErrorIs(t, err, felix.ErrInvalidValue)

	w, err := c.CacheWatch(ctx, cref, WatchOptions{Prefix: felix.Some("user/")})
	require.NoError(t, err)
	require.NotZero(t, w.Info().SubscriptionID)
	wk, err := c.CacheWatch(ctx, cref, WatchOptions{Key: felix.Some("user/1")})
	require.NoError(t, err)

	require.NoError(t, cachePut(ctx, c, cref, "other", []byte("x"), 0))
	require.NoError(t, cachePut(ctx, c, cref, "user/1", []byte("a"), 0))
	require.NoError(t, cachePut(ctx, c, cref, "user/2", []byte("b"), 0))
	_, _, err = cacheDelete(ctx, c, cref, "user/1")
	require.NoError(t, err)

	var got []string
	for len(got) < 3 {
		ev, err := w.Next(ctx)
		require.NoError(t, err)
		got = append(got, fmt.Sprintf("%s=%s/%v", ev.Key, ev.Value, ev.Deleted))
	}
	require.Equal(t, []string{"user/1=a/false", "user/2=b/false", "user/1=/true"}, got)
	ev, err := wk.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "user/1", ev.Key)

	b.lagWatches(42)
	var le *felix.LaggedError
	for _, err := range w.All(ctx) {
		require.ErrorAs(t, err, &le)
	}
	_, err = w.Next(ctx)
	require.ErrorAs(t, err, &le)
	require.True(t, le.Watch)
	require.EqualValues(t, 42, le.ResumeFrom)
	require.NoError(t, w.Close())
	require.NoError(t, wk.Close())

	// retained where advertised only.
	b2 := startBroker(t, brokerOpts{offer: felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureCacheWatch}})
	c2 := b2.dial(t, nil)
	_, err = c2.CacheWatch(ctx, cref, WatchOptions{Key: felix.Some("k"), Retained: true})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	w2, err := c2.CacheWatch(context.Background(), cref, WatchOptions{Key: felix.Some("k"), FromOffset: felix.Some[uint64](1)})
	require.NoError(t, err)
	w2.Close()
}
