package server

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The throttle's memory is bounded by MaxAddrs whatever the number of
// addresses that fail: at the default, 200,000 distinct addresses leave
// DefaultAuthMaxAddrs buckets, a few MiB.
func TestThrottleMemoryBounded(t *testing.T) {
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	th := newThrottle(AuthLimits{GlobalBurst: 1 << 30, GlobalRate: 1 << 30})
	now := time.Now()
	th.now = func() time.Time { return now } // no refill: no bucket is ever full again
	before := heap()
	for i := range 200_000 {
		_, ok := th.fail("2001:db8::"+strconv.FormatInt(int64(i), 16)+":"+strconv.Itoa(i), nil)
		require.True(t, ok)
	}
	addrs, _ := th.tracked()
	require.Equal(t, DefaultAuthMaxAddrs, addrs)
	grown := int64(heap()) - int64(before)
	t.Logf("%d address buckets: %.1f MiB (%d bytes each)", addrs, float64(grown)/(1<<20), grown/int64(addrs))
	require.Less(t, grown, int64(16<<20), "throttle state at the address cap")
	runtime.KeepAlive(th)
}
