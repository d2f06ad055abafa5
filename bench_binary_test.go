package felix_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/flxproto/felix"
)

// benchPayloads returns n payloads of size bytes each.
func benchPayloads(n, size int) [][]byte {
	ps := make([][]byte, n)
	for i := range ps {
		p := make([]byte, size)
		for j := range p {
			p[j] = byte(i + j)
		}
		ps[i] = p
	}
	return ps
}

// benchPublishBatch returns a publish batch of n payloads of size bytes,
// with every modifier (acked, idempotent, keyed) or none.
func benchPublishBatch(n, size int, mods bool) felix.PublishBatch {
	b := felix.PublishBatch{TenantID: "tenant-1", Namespace: "default", Stream: "orders", Payloads: benchPayloads(n, size)}
	if mods {
		b.AckMode, b.RequestID = felix.AckPerBatch, 77
		b.Idempotent, b.ProducerID, b.Sequence = true, 9, 1234
		b.HasKey, b.Key = true, []byte("customer-42")
	}
	return b
}

// benchEventBatch returns a shared event batch of n payloads of size bytes,
// with every modifier (offsets, skipped, publisher, timestamps) or none.
func benchEventBatch(n, size int, mods bool) felix.EventBatch {
	b := felix.EventBatch{Payloads: benchPayloads(n, size)}
	if mods {
		b.HasBaseOffset, b.BaseOffset, b.SkippedBefore = true, 1<<40, 3
		b.HasPublisher, b.Publisher = true, []byte("svc-orders")
		b.HasTimestamps = true
		b.Timestamps = make([]uint64, n)
		for i := range b.Timestamps {
			b.Timestamps[i] = 1700000000000000 + uint64(i)
		}
	}
	return b
}

// benchShapes are the batch shapes of the BENCHMARKS.md figures.
var benchShapes = []struct {
	name    string
	n, size int
}{
	{"64x100B", 64, 100},
	{"8x16KiB", 8, 16 << 10},
}

func benchMods(mods bool) string {
	if mods {
		return "mods=all"
	}
	return "mods=none"
}

// reportPerPayload adds an ns/payload metric (wall clock) and, where the
// process CPU time is known, a cpu-ns/payload metric from the CPU time used
// since cpu0 (processCPU before the loop), which the other processes of a
// busy machine do not inflate. The decode loops allocate nothing, so no
// garbage collector work is counted in it.
func reportPerPayload(b *testing.B, n int, cpu0 time.Duration, cpuOK bool) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/payload")
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/payload")
	}
}

// BenchmarkCopyBaseline copies a frame of the same size as the encoded
// publish batch: the floor an encoder is measured against.
func BenchmarkCopyBaseline(b *testing.B) {
	for _, sh := range benchShapes {
		b.Run(sh.name, func(b *testing.B) {
			pb := benchPublishBatch(sh.n, sh.size, false)
			src, err := felix.AppendPublishBatch(nil, &pb)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]byte, len(src))
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

func BenchmarkPublishBatchEncode(b *testing.B) {
	for _, sh := range benchShapes {
		for _, mods := range []bool{false, true} {
			b.Run(sh.name+"/"+benchMods(mods), func(b *testing.B) {
				pb := benchPublishBatch(sh.n, sh.size, mods)
				buf := make([]byte, 0, pb.FrameLen())
				b.SetBytes(int64(pb.FrameLen()))
				b.ReportAllocs()
				for b.Loop() {
					var err error
					buf, err = felix.AppendPublishBatch(buf[:0], &pb)
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// walkPublishBatch is what a consumer of a publish batch does: parse, then
// range over the payloads. It is a function of its own, as in a real
// caller, because inside a b.Loop body the compiler keeps every call's
// arguments alive, which turns the range-over-func body into an indirect
// call that no real caller pays; noinline keeps it out of the loop body.
//
//go:noinline
func walkPublishBatch(flags felix.Flags, payload []byte) (int, error) {
	v, err := felix.ParsePublishBatch(flags, payload)
	if err != nil {
		return 0, err
	}
	total := 0
	for p := range v.Payloads() {
		total += len(p)
	}
	return total, nil
}

// walkEventBatch parses an event batch and ranges over its events (see
// walkPublishBatch for why it is a separate, non-inlined function).
//
//go:noinline
func walkEventBatch(flags felix.Flags, payload []byte) (uint64, error) {
	v, err := felix.ParseEventBatch(flags, payload)
	if err != nil {
		return 0, err
	}
	var total uint64
	for e := range v.Events() {
		total += uint64(len(e.Payload)) + e.Offset + e.TimestampMicros
	}
	return total, nil
}

func BenchmarkPublishBatchDecode(b *testing.B) {
	for _, sh := range benchShapes {
		for _, mods := range []bool{false, true} {
			b.Run(sh.name+"/"+benchMods(mods), func(b *testing.B) {
				pb := benchPublishBatch(sh.n, sh.size, mods)
				frame, err := felix.AppendPublishBatch(nil, &pb)
				if err != nil {
					b.Fatal(err)
				}
				f, err := felix.DecodeFrame(frame, felix.MaxPayloadLen)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(frame)))
				b.ReportAllocs()
				var total int
				cpu0, cpuOK := processCPU()
				for b.Loop() {
					n, err := walkPublishBatch(f.Flags, f.Payload)
					if err != nil {
						b.Fatal(err)
					}
					total += n
				}
				reportPerPayload(b, sh.n, cpu0, cpuOK)
				if total == 0 {
					b.Fatal("nothing decoded")
				}
			})
		}
	}
}

// BenchmarkPublishBatchDecodeOwned measures the convenience decode into an
// owned struct (copies every payload).
func BenchmarkPublishBatchDecodeOwned(b *testing.B) {
	pb := benchPublishBatch(64, 100, true)
	frame, _ := felix.AppendPublishBatch(nil, &pb)
	f, _ := felix.DecodeFrame(frame, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := felix.DecodePublishBatch(f.Flags, f.Payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEventBatchEncode(b *testing.B) {
	for _, sh := range benchShapes {
		for _, mods := range []bool{false, true} {
			b.Run(sh.name+"/"+benchMods(mods), func(b *testing.B) {
				eb := benchEventBatch(sh.n, sh.size, mods)
				n := eb.FrameLen(felix.EventModifierMask)
				buf := make([]byte, 0, n)
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					var err error
					buf, err = felix.AppendEventBatch(buf[:0], &eb, felix.EventModifierMask)
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkEventBatchDecode(b *testing.B) {
	for _, sh := range benchShapes {
		for _, mods := range []bool{false, true} {
			b.Run(sh.name+"/"+benchMods(mods), func(b *testing.B) {
				eb := benchEventBatch(sh.n, sh.size, mods)
				frame, err := felix.AppendEventBatch(nil, &eb, felix.EventModifierMask)
				if err != nil {
					b.Fatal(err)
				}
				f, err := felix.DecodeFrame(frame, felix.MaxPayloadLen)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(frame)))
				b.ReportAllocs()
				var total uint64
				cpu0, cpuOK := processCPU()
				for b.Loop() {
					n, err := walkEventBatch(f.Flags, f.Payload)
					if err != nil {
						b.Fatal(err)
					}
					total += n
				}
				reportPerPayload(b, sh.n, cpu0, cpuOK)
				if total == 0 {
					b.Fatal("nothing decoded")
				}
			})
		}
	}
}

// BenchmarkSharedEventBatchFanout hands one 64 x 100 B batch to 1, 10 and
// 100 subscribers spread over three negotiated flag sets. "shared" encodes
// once per distinct set (SharedEventBatch, buffers reused); "per-subscriber"
// encodes once per subscriber for comparison.
func BenchmarkSharedEventBatchFanout(b *testing.B) {
	eb := benchEventBatch(64, 100, true)
	sets := []felix.Flags{felix.OriginalV1Flags, felix.OriginalV1Flags | felix.FlagEventBatchOffsets, felix.KnownFlags}
	for _, subs := range []int{1, 10, 100} {
		accepted := make([]felix.Flags, subs)
		for i := range accepted {
			accepted[i] = sets[i%len(sets)]
		}
		b.Run("shared/subs="+strconv.Itoa(subs), func(b *testing.B) {
			s := felix.NewSharedEventBatch(&eb)
			b.ReportAllocs()
			var sink int
			for b.Loop() {
				s.Reset(&eb)
				for _, a := range accepted {
					fr, err := s.Frame(a)
					if err != nil {
						b.Fatal(err)
					}
					sink += len(fr)
				}
			}
			if sink == 0 {
				b.Fatal("no frames")
			}
		})
		b.Run("per-subscriber/subs="+strconv.Itoa(subs), func(b *testing.B) {
			bufs := make([][]byte, subs)
			for i, a := range accepted {
				bufs[i] = make([]byte, 0, eb.FrameLen(a))
			}
			b.ReportAllocs()
			for b.Loop() {
				for i, a := range accepted {
					var err error
					bufs[i], err = felix.AppendEventBatch(bufs[i][:0], &eb, a)
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
