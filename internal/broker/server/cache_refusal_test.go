package server_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
)

// Refusals on shared cache streams reach their caller as the refusal
// (issue 35: 35 of 100,000 refused puts reached the client as "protocol
// violation: cache stream ended before the answer"): 16 goroutines share
// a client's cache streams, each putting keys into a full cache (refused,
// limit_exceeded) and into one with room (accepted), interleaved; every
// refused put reports limit_exceeded, every other succeeds, none fails
// any other way.
func TestCacheRefusalsReachTheirCaller(t *testing.T) {
	const workers, each, value = 16, 150, 1 << 10
	cfg := durableCfg()
	cfg.Engine.MaxCacheBytes = 64 << 10
	// Puts into "full" are also over the frame limit half of the time:
	// refused from their header, after which the broker ends the stream
	// (an error without request_id), the requests behind them unread.
	cfg.ConnLimits = func(c *conn.ServerConfig) { c.MaxFrameBytes = 8 << 10 }
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	c := dial(t, srv, func(c *conn.Config) { c.CacheStreams = 2 })
	full := felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "full"}
	room := felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "room"}
	v, big := make([]byte, value), make([]byte, 16<<10)
	for k := 0; ; k++ {
		if err := api.New(c).CachePut(ctx, full, "fill"+strconv.Itoa(k), v, 0); err != nil {
			break
		}
	}
	var (
		mu                  sync.Mutex
		refused, ok, others int
		other               error
		kinds               = map[string]int{}
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := api.New(c)
			for i := range each {
				ref, key, val := room, "r"+strconv.Itoa(i%8), v
				if (w+i)%2 == 0 {
					ref, key = full, "x"+strconv.Itoa(w)+"-"+strconv.Itoa(i)
					if i%4 < 2 {
						val = big
					}
				}
				err := a.CachePut(ctx, ref, key, val, 0)
				var be *felix.BrokerError
				mu.Lock()
				switch {
				case err == nil && ref == room:
					ok++
				case errors.As(err, &be) && be.Code == felix.CodeLimitExceeded && ref == full:
					refused++
				default:
					others++
					kinds[fmt.Sprintf("%s %v", ref.Cache, err)]++
					if other == nil {
						other = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d refused, %d stored, %d otherwise (first: %v)", refused, ok, others, other)
	for k, n := range kinds {
		t.Logf("%d × %s", n, k)
	}
	require.Zero(t, others, "first: %v", other)
	require.Equal(t, workers*each/2, refused)
}
