package client_test

import (
	"context"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
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
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if err := publish(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	// One broker with in-memory streams for both, so that neither pays
	// for the other's log.
	br := startBrokerCfg(b, func(c *server.Config) { c.Engine.DefaultStream.Durable = false })
	b.Run("conn", func(b *testing.B) {
		cfg := connConfig(b)
		c, err := conn.Dial(context.Background(), br.addr, &cfg)
		require.NoError(b, err)
		defer c.Close()
		bench(b, func(ctx context.Context) error {
			_, err := c.PublishBatch(ctx, topic, payloads, conn.PublishOptions{Ack: felix.AckPerBatch})
			return err
		})
	})
	b.Run("cluster", func(b *testing.B) {
		c, _ := newClient(b, []string{br.addr}, nil)
		require.NoError(b, c.Connect(context.Background()))
		bench(b, func(ctx context.Context) error {
			_, err := c.PublishBatch(ctx, topic, payloads, client.PublishOptions{Ack: felix.AckPerBatch})
			return err
		})
	})
}
