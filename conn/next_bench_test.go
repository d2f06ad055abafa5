package conn

import (
	"context"
	"testing"

	"github.com/flxproto/felix"
)

// BenchmarkNextDecoded is Subscription.Next's own cost per event, with no
// transport: a parsed 64 × 100 B batch (offsets and timestamps) walked
// again and again, one op = one event. It is the per-record part of the
// subscriber's CPU that the raw quic-go receiver does not have.
func BenchmarkNextDecoded(b *testing.B) {
	for _, tc := range []struct {
		name string
		mode PayloadMode
	}{{"until-next", PayloadsUntilNext}, {"until-release", PayloadsUntilRelease}} {
		b.Run(tc.name, func(b *testing.B) {
			batch := felix.EventBatch{HasBaseOffset: true, BaseOffset: 7, HasTimestamps: true}
			for i := range 64 {
				batch.Payloads = append(batch.Payloads, make([]byte, 100))
				batch.Timestamps = append(batch.Timestamps, uint64(i))
			}
			fr, err := felix.AppendEventBatch(nil, &batch, felix.EventModifierMask)
			if err != nil {
				b.Fatal(err)
			}
			h, err := felix.ParseHeader(fr)
			if err != nil {
				b.Fatal(err)
			}
			es := &eventSub{mode: tc.mode}
			if tc.mode == PayloadsUntilRelease {
				es.rec = new(recycler)
			}
			if es.view, err = felix.ParseEventBatch(h.Flags, fr[felix.HeaderLen:]); err != nil {
				b.Fatal(err)
			}
			s := &Subscription{es: es}
			ctx := context.Background()
			var n int
			b.ReportAllocs()
			for b.Loop() {
				if !es.pending {
					es.cur = es.view.Cursor()
					es.pending = es.nextEvent(&es.pend)
				}
				ev, err := s.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				n += len(ev.Payload)
			}
			if n == 0 {
				b.Fatal("no payload")
			}
		})
	}
}
