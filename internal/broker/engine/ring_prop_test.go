package engine

import (
	"context"
	"strconv"
	"testing"

	"github.com/flxproto/felix"
	"pgregory.net/rapid"
)

// Ephemeral replay against a model: after random batches, a subscribe from
// earliest replays exactly the last RingRecords records (the ring), with
// consecutive offsets ending at the tail, and a subscribe from any offset
// inside the ring replays its suffix; offsets below it are too_old.
func TestPropEphemeralRing(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ring := rapid.IntRange(1, 20).Draw(rt, "ring")
		e := New(Config{DefaultStream: StreamConfig{RingRecords: ring}})
		defer e.Close()
		var all []string
		for range rapid.IntRange(0, 15).Draw(rt, "batches") {
			n := rapid.IntRange(0, 6).Draw(rt, "size")
			ps := make([][]byte, n)
			for i := range ps {
				ps[i] = []byte(strconv.Itoa(len(all)))
				all = append(all, string(ps[i]))
			}
			if _, err := e.Publish(PublishRequest{Topic: tp, Payloads: ps}); err != nil {
				rt.Fatal(err)
			}
		}
		oldest := max(0, len(all)-ring)
		from := uint64(rapid.IntRange(oldest, len(all)).Draw(rt, "from"))
		for _, start := range []Start{{Kind: StartEarliest}, {Kind: StartOffset, Offset: from}} {
			s, info, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: start, Mods: felix.FlagEventBatchOffsets})
			if err != nil {
				rt.Fatalf("subscribe %+v: %v", start, err)
			}
			want := all[oldest:]
			if start.Kind == StartOffset {
				want = all[from:]
			}
			if info.LiveOffset != uint64(len(all)) || info.StartOffset != uint64(len(all)-len(want)) {
				rt.Fatalf("info %+v, want start %d live %d", info, len(all)-len(want), len(all))
			}
			var got []string
			next := info.StartOffset
			for len(got) < len(want) {
				d, err := s.Next(context.Background())
				if err != nil {
					rt.Fatal(err)
				}
				if !d.Batch.HasOffsets || d.Batch.BaseOffset != next || d.Batch.Timestamps != nil {
					rt.Fatalf("replayed batch at %d (offsets %v, times %v), want %d", d.Batch.BaseOffset, d.Batch.HasOffsets, d.Batch.Timestamps != nil, next)
				}
				for _, p := range d.Batch.Payloads {
					got = append(got, string(p))
				}
				next = d.Batch.EndOffset()
			}
			s.Close()
			for i := range want {
				if got[i] != want[i] {
					rt.Fatalf("replay %v, want %v", got, want)
				}
			}
		}
		if oldest > 0 {
			_, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartOffset, Offset: uint64(oldest - 1)}})
			ce, ok := err.(*CursorError)
			if !ok || ce.Reason != CursorTooOld || ce.Available != uint64(oldest) {
				rt.Fatalf("offset %d: %v, want too_old available %d", oldest-1, err, oldest)
			}
		}
	})
}
