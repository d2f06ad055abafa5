package conformance_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/flxproto/felix/conformance"
	"github.com/stretchr/testify/require"
)

func Test_cache_put_get(t *testing.T) {
	run(t, "cache.put_get", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		ref, k := fx.cache(fx.Cache), fx.key("put")
		v := []byte{0, 1, 0xff, 'v', 0}
		require.NoError(t, c.CachePut(fx.ctx(), ref, k, v, 0))
		got, found, err := c.CacheGet(fx.ctx(), ref, k)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, v, got)
		// An empty value is a value, not an absence.
		require.NoError(t, c.CachePut(fx.ctx(), ref, k, []byte{}, 0))
		got, found, err = c.CacheGet(fx.ctx(), ref, k)
		require.NoError(t, err)
		require.True(t, found)
		require.NotNil(t, got, "an empty value, not an absence")
		require.Empty(t, got)
		fx.Pass(conformance.Evidence{"value_bytes": len(v), "empty_value": fmt.Sprintf("found %v, %d bytes", found, len(got))})
	})
}

func Test_cache_miss_is_absent(t *testing.T) {
	run(t, "cache.miss_is_absent", func(t *testing.T, fx *Fx) {
		got, found, err := fx.scDefault().CacheGet(fx.ctx(), fx.cache(fx.Cache), fx.key("never"))
		require.NoError(t, err, "a miss is an answer, not an error")
		require.False(t, found)
		require.Nil(t, got)
		fx.Pass(conformance.Evidence{"answer": fmt.Sprintf("found %v, value %v, error %v", found, got, err)})
	})
}

func Test_cache_delete_returns_previous(t *testing.T) {
	run(t, "cache.delete_returns_previous", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		ref, k := fx.cache(fx.Cache), fx.key("del")
		require.NoError(t, c.CachePut(fx.ctx(), ref, k, []byte("old"), 0))
		old, found, err := c.CacheDelete(fx.ctx(), ref, k)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, "old", string(old))
		removed := len(old)
		old, found, err = c.CacheDelete(fx.ctx(), ref, k)
		require.NoError(t, err, "deleting an absent key is an answer")
		require.False(t, found)
		require.Nil(t, old)
		second := fmt.Sprintf("found %v, value %v, error %v", found, old, err)
		_, found, err = c.CacheGet(fx.ctx(), ref, k)
		require.NoError(t, err)
		require.False(t, found)
		fx.Pass(conformance.Evidence{"removed_bytes": removed, "second_delete": second})
	})
}

func Test_cache_ttl_expires(t *testing.T) {
	run(t, "cache.ttl_expires", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		ref := fx.cache(fx.Cache)
		short, long := fx.key("ttl-short"), fx.key("ttl-none")
		require.NoError(t, c.CachePut(fx.ctx(), ref, long, []byte("stays"), 0))
		put := time.Now()
		require.NoError(t, c.CachePut(fx.ctx(), ref, short, []byte("goes"), 20*time.Millisecond))
		// Expiry is lazy and on the broker's clock: read until the value
		// is gone (bounded by the test deadline only).
		reads := 0
		for {
			_, found, err := c.CacheGet(fx.ctx(), ref, short)
			require.NoError(t, err)
			reads++
			if !found {
				break
			}
			select {
			case <-fx.ctx().Done():
				t.Fatal("the value never expired")
			case <-time.After(5 * time.Millisecond):
			}
		}
		v, found, err := c.CacheGet(fx.ctx(), ref, long)
		require.NoError(t, err)
		require.True(t, found, "a value without a TTL stays")
		require.Equal(t, "stays", string(v))
		fx.Pass(conformance.Evidence{"expired_after_ms": float64(time.Since(put).Microseconds()) / 1000, "reads": reads})
	})
}

func Test_counter_add_returns_sum(t *testing.T) {
	run(t, "counter.add_returns_sum", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		ref, k := fx.cache(fx.Cache), fx.key("count")
		v, found, err := c.CounterAdd(fx.ctx(), ref, k, 5)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, int64(5), v)
		totals := []int64{v}
		v, _, err = c.CounterAdd(fx.ctx(), ref, k, -2)
		totals = append(totals, v)
		require.NoError(t, err)
		require.Equal(t, int64(3), v, "one round trip returns the new total")
		v, found, err = c.CounterGet(fx.ctx(), ref, k)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, int64(3), v)
		fx.Pass(conformance.Evidence{"totals": totals, "round_trips": len(totals)})
	})
}

func Test_counter_get_absent_is_none(t *testing.T) {
	run(t, "counter.get_absent_is_none", func(t *testing.T, fx *Fx) {
		v, found, err := fx.scDefault().CounterGet(fx.ctx(), fx.cache(fx.Cache), fx.key("nocount"))
		require.NoError(t, err)
		require.False(t, found, "absent, not zero")
		require.Zero(t, v)
		fx.Pass(conformance.Evidence{"answer": fmt.Sprintf("found %v, value %d, error %v", found, v, err)})
	})
}
