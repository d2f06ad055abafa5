package client_test

import (
	"context"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/examples/broker/cluster"
	"github.com/flxproto/felix/examples/broker/server"
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
