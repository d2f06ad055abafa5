package client_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// BenchmarkPublishAcked compares acked publish throughput through the
// cluster client with the single-connection conn.Client it builds on,
// against the same in-process reference broker: 64 goroutines keep the
// publish window busy, each batch is 16 records of 64 bytes.
func BenchmarkPublishAcked(b *testing.B) {
	payloads := make([][]byte, 16)
	for i := range payloads {
		payloads[i] = make([]byte, 64)
	}
	bench := func(b *testing.B, publish func(context.Context) error) {
		b.SetBytes(16 * 64)
		b.ReportAllocs()
		b.SetParallelism(32) // ×GOMAXPROCS goroutines
		b.ResetTimer()
		cpu0, cpuOK := processCPU()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if err := publish(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		// CPU time per op (client and broker: both run in this process)
		// is steadier than ns/op on a loaded machine.
		if cpu1, ok := processCPU(); ok && cpuOK {
			b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
		}
	}
	// One broker with in-memory streams for both, so that neither pays
	// for the other's log.
	br := startBrokerCfg(b, func(c *server.Config) { c.Engine.DefaultStream.Durable = false })
	b.Run("conn", func(b *testing.B) {
		cfg := connConfig(b)
		cfg.IdleTimeout, cfg.KeepAlive = 0, 0 // upstream's defaults, as a user gets them
		c, err := conn.Dial(context.Background(), br.addr, &cfg)
		require.NoError(b, err)
		defer c.Close()
		bench(b, func(ctx context.Context) error {
			_, err := c.PublishBatch(ctx, topic, payloads, conn.PublishOptions{Ack: felix.AckPerBatch})
			return err
		})
	})
	b.Run("cluster", func(b *testing.B) {
		c, _ := newClient(b, []string{br.addr}, benchDefaults)
		require.NoError(b, c.Connect(context.Background()))
		bench(b, func(ctx context.Context) error {
			_, err := c.PublishBatch(ctx, topic, payloads, client.PublishOptions{Ack: felix.AckPerBatch})
			return err
		})
	})
}

// BenchmarkPublishAckedCluster is BenchmarkPublishAcked against a
// three-node reference cluster: conn.Client dials the shard owner
// directly; the cluster client starts from every node and routes to the
// owner (learnt from the owner section of the first forwarded ack).
func BenchmarkPublishAckedCluster(b *testing.B) {
	payloads := make([][]byte, 16)
	for i := range payloads {
		payloads[i] = make([]byte, 64)
	}
	cl := startCluster(b)
	tp := clusterTopic(cluster.MovableStream)
	owner, _ := cl.Owner(cluster.MovableStream, 0)
	bench := func(b *testing.B, publish func(context.Context) error) {
		b.SetBytes(16 * 64)
		b.ReportAllocs()
		b.SetParallelism(32)
		b.ResetTimer()
		cpu0, cpuOK := processCPU()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if err := publish(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		// CPU time per op (client and broker: both run in this process)
		// is steadier than ns/op on a loaded machine.
		if cpu1, ok := processCPU(); ok && cpuOK {
			b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
		}
	}
	b.Run("conn", func(b *testing.B) {
		cfg := connConfig(b)
		cfg.IdleTimeout, cfg.KeepAlive = 0, 0 // upstream's defaults, as a user gets them
		cfg.TLS = cl.TLS()
		c, err := conn.Dial(context.Background(), cl.Addr(owner), &cfg)
		require.NoError(b, err)
		defer c.Close()
		bench(b, func(ctx context.Context) error {
			_, err := c.PublishBatch(ctx, tp, payloads, conn.PublishOptions{Ack: felix.AckPerBatch})
			return err
		})
	})
	b.Run("cluster", func(b *testing.B) {
		c, _ := clusterClient(b, cl, benchDefaults)
		// Learn the owner before timing.
		_, err := c.PublishBatch(context.Background(), tp, payloads, client.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(b, err)
		bench(b, func(ctx context.Context) error {
			_, err := c.PublishBatch(ctx, tp, payloads, client.PublishOptions{Ack: felix.AckPerBatch})
			return err
		})
	})
}

// benchDefaults gives a benchmark's cluster client the connection
// defaults a user gets (the test clients' short idle timeout trips on a
// loaded machine).
func benchDefaults(cfg *client.Config) { cfg.Conn.IdleTimeout, cfg.Conn.KeepAlive = 0, 0 }

// BenchmarkPublishPaired measures the cluster client against conn.Client
// in alternating chunks inside one benchmark (see bench_paired_test.go at
// the module root for why: on a shared machine two separate benchmarks
// see different loads). Each chunk is 32 goroutines × 8 acked publishes of
// a 16 × 64 B batch through one client, then the same through the other
// (the order alternates). Reported: ns/op of the cluster client (median
// per chunk), conn-ns/op of conn.Client, and x-conn, the median ratio per
// chunk pair (1.05 = 5% slower). "standalone" is one in-process broker;
// "cluster" a three-node reference cluster, conn.Client dialled to the
// shard owner.
func BenchmarkPublishPaired(b *testing.B) {
	payloads := make([][]byte, 16)
	for i := range payloads {
		payloads[i] = make([]byte, 64)
	}
	paired := func(b *testing.B, cc *conn.Client, c *client.Client, tp client.Topic) {
		viaConn := func(ctx context.Context) error {
			_, err := cc.PublishBatch(ctx, tp, payloads, conn.PublishOptions{Ack: felix.AckPerBatch})
			return err
		}
		viaClient := func(ctx context.Context) error {
			_, err := c.PublishBatch(ctx, tp, payloads, client.PublishOptions{Ack: felix.AckPerBatch})
			return err
		}
		const workers, per = 32, 8
		chunk := workers * per
		run := func(f func(context.Context) error) float64 {
			var wg sync.WaitGroup
			t0 := time.Now()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					for range per {
						if err := f(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			return float64(time.Since(t0).Nanoseconds()) / float64(chunk)
		}
		run(viaConn) // warm both up (streams, owner hints)
		run(viaClient)
		b.ReportAllocs() // B/op and allocs/op cover one publish of each client
		b.ResetTimer()
		var tc, tk, r []float64
		for i := 0; i < b.N; i += chunk {
			var k, o float64
			if i/chunk%2 == 0 {
				k, o = run(viaClient), run(viaConn)
			} else {
				o, k = run(viaConn), run(viaClient)
			}
			tk, tc, r = append(tk, k), append(tc, o), append(r, k/o)
		}
		med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
		b.ReportMetric(med(tk), "ns/op")
		b.ReportMetric(med(tc), "conn-ns/op")
		b.ReportMetric(med(r), "x-conn")
	}
	b.Run("standalone", func(b *testing.B) {
		br := startBrokerCfg(b, func(c *server.Config) { c.Engine.DefaultStream.Durable = false })
		cfg := connConfig(b)
		cfg.IdleTimeout, cfg.KeepAlive = 0, 0
		cc, err := conn.Dial(context.Background(), br.addr, &cfg)
		require.NoError(b, err)
		defer cc.Close()
		c, _ := newClient(b, []string{br.addr}, benchDefaults)
		paired(b, cc, c, topic)
	})
	b.Run("cluster", func(b *testing.B) {
		cl := startCluster(b)
		owner, _ := cl.Owner(cluster.MovableStream, 0)
		cfg := connConfig(b)
		cfg.TLS = cl.TLS()
		cfg.IdleTimeout, cfg.KeepAlive = 0, 0
		cc, err := conn.Dial(context.Background(), cl.Addr(owner), &cfg)
		require.NoError(b, err)
		defer cc.Close()
		c, _ := clusterClient(b, cl, benchDefaults)
		paired(b, cc, c, clusterTopic(cluster.MovableStream))
	})
}
