package cluster_test

import (
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
)

// BenchmarkPublishAcked measures an acked 100-byte publish to the owner
// and through a non-owner (forwarded, acked with the owner section).
func BenchmarkPublishAcked(b *testing.B) {
	c, err := cluster.Start(b.Context(), cluster.Config{Nodes: 3})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	f := c.Fixture()
	owner, _ := c.Owner(f.MovableStream, 0)
	payload := make([]byte, 100)
	for _, bc := range []struct {
		name string
		node int
	}{{"owner", owner}, {"forwarded", nonOwner(c, f.MovableStream, 0)}} {
		b.Run(bc.name, func(b *testing.B) {
			cl := dial(b, c, c.Addr(bc.node), nil)
			tp := topic(c, f.MovableStream)
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				if _, err := cl.Publish(b.Context(), tp, payload, conn.PublishOptions{Ack: felix.AckPerMessage}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
