package conn

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// countingHooks counts every event with atomics, as a metrics adapter
// would (without a metrics library).
func countingHooks(n *atomic.Int64) *Hooks {
	f := func(FrameInfo) { n.Add(1) }
	p := func(PublishInfo) { n.Add(1) }
	return &Hooks{FrameRead: f, FrameWritten: f, PublishSent: p, PublishAcked: p,
		ConnOpened: func(ConnInfo) { n.Add(1) }, StreamAuthenticated: func(StreamInfo) { n.Add(1) }}
}

// BenchmarkPublishHooks compares acked and fire-and-forget publishes of
// one 64 × 100 B batch with nil Hooks and with counting hooks on the
// client and the server (allocations reported).
func BenchmarkPublishHooks(b *testing.B) {
	for _, hooked := range []bool{false, true} {
		name := "nil"
		if hooked {
			name = "counting"
		}
		for _, ack := range []felix.AckMode{felix.AckPerBatch, felix.AckNone} {
			sub := name + "/acked"
			if ack == felix.AckNone {
				sub = name + "/fire_and_forget"
			}
			b.Run(sub, func(b *testing.B) {
				var count atomic.Int64
				var h *Hooks
				if hooked {
					h = countingHooks(&count)
				}
				ln, tc := startBenchServerHooks(b, h, nil, new(int))
				c, err := Dial(context.Background(), ln.Addr().String(), &Config{TLS: tc, TenantID: "t1", Token: "x", Hooks: h})
				require.NoError(b, err)
				defer c.Close()
				ps := benchPayloads()
				t := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}
				ctx := context.Background()
				b.SetBytes(benchRecords * benchRecSize)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := c.PublishBatch(ctx, t, ps, PublishOptions{Ack: ack, NoAck: ack == felix.AckNone}); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if hooked && count.Load() == 0 {
					b.Fatal("hooks never fired")
				}
			})
		}
	}
}
