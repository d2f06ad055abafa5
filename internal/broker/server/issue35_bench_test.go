package server_test

import (
	"bytes"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// BenchmarkIssue35Attack is issue 35's attack at reduced scale, run once
// whatever b.N: one token opens 4 connections × 1,000 subscriptions that
// never read, then publishes 50 records of 1 KiB (acked), while another
// tenant makes 200 cache round trips (put then get). Metrics: goroutines
// added by the idle subscriptions, process CPU of the burst (publishes and
// round trips), the other tenant's round trips that failed (must be 0)
// and their p50/p99 latency.
func BenchmarkIssue35Attack(b *testing.B) {
	const conns, per, pubs, trips = 4, 1000, 50, 200
	toks, err := server.ParseTokens("t1:demo-token,t2:b")
	require.NoError(b, err)
	cfg := durableCfg()
	cfg.Tokens = toks
	srv := startBroker(b, cfg)
	ctx := ctxT(b)
	attackers := make([]*conn.Client, conns)
	for i := range attackers {
		attackers[i] = dial(b, srv, nil)
	}
	pub := dial(b, srv, nil)
	legit := api.New(dial(b, srv, func(c *conn.Config) { c.TenantID, c.Token = "t2", "b" }))
	cref := felix.CacheRef{TenantID: "t2", Namespace: "ns", Cache: "c"}
	require.NoError(b, legit.CachePut(ctx, cref, "k", []byte("v"), 0))
	runtime.GC()
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for _, c := range attackers {
		wg.Go(func() {
			for range per {
				if _, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
	idle := runtime.NumGoroutine() - before
	b.ResetTimer()
	cpu0, _ := processCPU()
	start := time.Now()
	lat := make([]time.Duration, 0, trips)
	failed := 0
	wg.Go(func() {
		for range trips {
			t0 := time.Now()
			err := legit.CachePut(ctx, cref, "k", []byte("v"), 0)
			if err == nil {
				_, _, err = legit.CacheGet(ctx, cref, "k")
			}
			if err != nil {
				failed++
				continue
			}
			lat = append(lat, time.Since(t0))
		}
	})
	payload := bytes.Repeat([]byte("p"), 1<<10)
	for range pubs {
		_, err := pub.Publish(ctx, topic, payload, conn.PublishOptions{Ack: felix.AckPerMessage})
		require.NoError(b, err)
	}
	wg.Wait()
	cpu1, _ := processCPU()
	during := runtime.NumGoroutine() - before
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(idle), "goroutines-idle-subs")
	b.ReportMetric(float64(during), "goroutines-after-burst")
	b.ReportMetric((cpu1 - cpu0).Seconds(), "cpu-s")
	b.ReportMetric(time.Since(start).Seconds(), "wall-s")
	b.ReportMetric(float64(failed), "legit-failed")
	b.ReportMetric(q(0.5), "legit-p50-ms")
	b.ReportMetric(q(0.99), "legit-p99-ms")
	require.Zero(b, failed)
}
