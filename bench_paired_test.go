package felix_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/flxproto/felix"
)

// Paired benchmarks: a path and its anchor (encoding/json for the JSON
// decoders, a plain copy for the binary encoders) run alternately in short
// chunks inside one benchmark, and the ratio is taken per chunk pair. On
// the shared 2-core machine the load changes from one second to the next,
// so two separate benchmarks, even in one invocation, often see different
// machines; a chunk pair lasts tens of microseconds, so both halves see the
// same one, and the median over the pairs drops the chunks that were
// descheduled. Reported: ns/op (median per call of the path), anchor-ns/op
// (of the anchor) and the median ratio (speedup = anchor/path, or
// x-anchor = path/anchor).

// benchPaired runs ours and anchor b.N times each, chunk calls at a time,
// alternating which one goes first.
func benchPaired(b *testing.B, chunk int, ours, anchor func(), speedup bool) {
	var to, ta, r []float64
	run := func(f func()) float64 {
		t0 := time.Now()
		for range chunk {
			f()
		}
		return float64(time.Since(t0).Nanoseconds()) / float64(chunk)
	}
	for i := 0; i < b.N; i += chunk {
		var o, a float64
		if i/chunk%2 == 0 {
			o, a = run(ours), run(anchor)
		} else {
			a, o = run(anchor), run(ours)
		}
		to, ta = append(to, o), append(ta, a)
		if speedup {
			r = append(r, a/o)
		} else {
			r = append(r, o/a)
		}
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(to), "ns/op")
	b.ReportMetric(med(ta), "anchor-ns/op")
	if speedup {
		b.ReportMetric(med(r), "speedup")
	} else {
		b.ReportMetric(med(r), "x-anchor")
	}
}

// BenchmarkMessageDecodeVsStdJSON: DecodeMessage against encoding/json
// Unmarshal of the same text into a new struct (the anchor).
func BenchmarkMessageDecodeVsStdJSON(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			in := c.msg.AppendJSON(nil)
			benchPaired(b, 32, func() {
				if _, err := felix.DecodeMessage(in); err != nil {
					b.Fatal(err)
				}
			}, func() {
				if err := json.Unmarshal(in, c.newStd()); err != nil {
					b.Fatal(err)
				}
			}, true)
		})
	}
}

// BenchmarkBatchEncodeVsCopy: the 64 x 100 B encoders against a copy of a
// frame of the same size (the anchor of CopyBaseline/64x100B).
func BenchmarkBatchEncodeVsCopy(b *testing.B) {
	pb0 := benchPublishBatch(64, 100, false)
	src, _ := felix.AppendPublishBatch(nil, &pb0)
	dst := make([]byte, len(src))
	cp := func() { copy(dst, src) }
	for _, mods := range []bool{false, true} {
		b.Run("publish/"+benchMods(mods), func(b *testing.B) {
			pb := benchPublishBatch(64, 100, mods)
			buf := make([]byte, 0, pb.FrameLen())
			benchPaired(b, 64, func() { buf, _ = felix.AppendPublishBatch(buf[:0], &pb) }, cp, false)
		})
		b.Run("event/"+benchMods(mods), func(b *testing.B) {
			eb := benchEventBatch(64, 100, mods)
			buf := make([]byte, 0, eb.FrameLen(felix.EventModifierMask))
			benchPaired(b, 64, func() { buf, _ = felix.AppendEventBatch(buf[:0], &eb, felix.EventModifierMask) }, cp, false)
		})
	}
}

// BenchmarkGatherCopyVsCopy: the floor of any encoder of separate payloads,
// 64 copy calls of 100 B (the payloads of the 64 x 100 B batch, written
// back to back with no length fields), against the one copy of a frame of
// the same size.
func BenchmarkGatherCopyVsCopy(b *testing.B) {
	pb := benchPublishBatch(64, 100, false)
	src, _ := felix.AppendPublishBatch(nil, &pb)
	dst := make([]byte, len(src))
	benchPaired(b, 64, func() {
		o := 0
		for _, p := range pb.Payloads {
			o += copy(dst[o:], p)
		}
	}, func() { copy(dst, src) }, false)
}
