package conn

import (
	"context"
	"testing"

	"github.com/flxproto/felix"
)

// decodedSub returns a subscription over one parsed 64 × 100 B batch
// (offsets and timestamps) and no stream: restart starts it over, so Next
// can be called again and again without a transport.
func decodedSub(tb testing.TB, mode PayloadMode) (s *Subscription, restart func()) {
	batch := felix.EventBatch{HasBaseOffset: true, BaseOffset: 7, HasTimestamps: true}
	for i := range 64 {
		batch.Payloads = append(batch.Payloads, make([]byte, 100))
		batch.Timestamps = append(batch.Timestamps, uint64(i))
	}
	fr, err := felix.AppendEventBatch(nil, &batch, felix.EventModifierMask)
	if err != nil {
		tb.Fatal(err)
	}
	h, err := felix.ParseHeader(fr)
	if err != nil {
		tb.Fatal(err)
	}
	es := &eventSub{mode: mode}
	if mode == PayloadsUntilRelease {
		es.rec = new(recycler)
	}
	if es.view, err = felix.ParseEventBatch(h.Flags, fr[felix.HeaderLen:]); err != nil {
		tb.Fatal(err)
	}
	return &Subscription{es: es}, func() {
		if !es.pending {
			es.cur = es.view.Cursor()
			es.pending = es.nextEvent(&es.pend)
		}
	}
}

// TestNextAllocatesNothing: taking a decoded batch apart allocates
// nothing per event, in every PayloadMode.
func TestNextAllocatesNothing(t *testing.T) {
	for _, mode := range []PayloadMode{PayloadsUntilNext, PayloadsOwned, PayloadsUntilRelease} {
		s, restart := decodedSub(t, mode)
		ctx := context.Background()
		allocs := testing.AllocsPerRun(1000, func() {
			restart()
			if ev, err := s.Next(ctx); err != nil || len(ev.Payload) != 100 {
				t.Fatal(ev, err)
			}
		})
		if allocs != 0 {
			t.Fatalf("mode %d: %v allocations per Next", mode, allocs)
		}
	}
}

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
			s, restart := decodedSub(b, tc.mode)
			ctx := context.Background()
			var n int
			b.ReportAllocs()
			for b.Loop() {
				restart()
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
