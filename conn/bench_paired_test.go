package conn

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// Paired conn benchmarks: the Felix path and its raw quic-go baseline are
// set up side by side in one process and driven alternately, a chunk of
// batches at a time, and the ratio is taken per chunk pair (raw time /
// Felix time, so 1 is parity and higher is better for Felix). On the
// shared 2-core development machine the load changes from one second to
// the next, so two sequential benchmarks, even interleaved runs of them,
// often measure different machines; a chunk pair lasts a few
// milliseconds, and the median over many pairs drops the chunks that were
// descheduled. While one side runs, the other side's sender is blocked on
// QUIC flow control or on its window, so it does not compete for the CPU.
//
// Reported: ns/op (median per batch of the Felix path), raw-ns/op (of the
// baseline) and vs-raw (median of the per-chunk ratios).

func benchPairedChunks(b *testing.B, chunk int, felixChunk, rawChunk func(n int)) {
	var tf, tr, r []float64
	for i := 0; i < b.N; i += chunk {
		n := min(chunk, b.N-i)
		run := func(f func(int)) float64 {
			t0 := time.Now()
			f(n)
			return float64(time.Since(t0).Nanoseconds()) / float64(n)
		}
		var f, a float64
		if i/chunk%2 == 0 {
			f, a = run(felixChunk), run(rawChunk)
		} else {
			a, f = run(rawChunk), run(felixChunk)
		}
		tf, tr, r = append(tf, f), append(tr, a), append(r, a/f)
	}
	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	b.ReportMetric(med(tf), "ns/op")
	b.ReportMetric(med(tr), "raw-ns/op")
	b.ReportMetric(med(r), "vs-raw")
}

// BenchmarkPublishAckedPaired: PublishAcked/felix (one goroutine, 64 acked
// batches in flight with PublishBatchAsync) against PublishAcked/raw-quic
// (the same frame written 64-deep on one raw stream, the server answering
// each with the same ack), 256 batches per chunk; each chunk waits for all
// its acks.
func BenchmarkPublishAckedPaired(b *testing.B) {
	n := 0
	ln, tc := startBenchServer(b, nil, &n)
	c, err := Dial(context.Background(), ln.Addr().String(), &Config{TLS: tc, TenantID: "t1", Token: "x"})
	require.NoError(b, err)
	defer c.Close()
	require.EqualValues(b, benchInflight, c.Capabilities().PublishWindow)
	ps := benchPayloads()
	t := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}
	ctx := context.Background()
	var wg sync.WaitGroup
	done := func(_ felix.PublishResult, err error) {
		if err != nil {
			b.Error(err)
		}
		wg.Done()
	}
	felixChunk := func(n int) {
		for range n {
			wg.Add(1)
			if err := c.PublishBatchAsync(ctx, t, ps, PublishOptions{Ack: felix.AckPerBatch}, done); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
	}

	rp := newRawAckedPublisher(b)
	rawChunk := func(n int) { rp.publish(b, n) }
	b.SetBytes(benchRecords * benchRecSize)
	b.ReportAllocs()
	b.ResetTimer()
	benchPairedChunks(b, 256, felixChunk, rawChunk)
	b.StopTimer()
	rp.s.Close()
}

// BenchmarkSubscribeDeliveryPaired: event delivery of 64 x 100 B batches,
// 64 batches per chunk, side against anchor:
//
//   - felix/vs-raw-uni: the default mode (Subscription.Next, frames read
//     into one recycled buffer) against the raw uni stream read with
//     felix.Reader into one reused buffer;
//   - felix-owned/vs-raw-uni: PayloadsOwned (each frame in fresh memory,
//     so events may be kept) against the same;
//   - felix-owned/vs-raw-uni-fresh: PayloadsOwned against the raw uni
//     stream reading every frame into a fresh buffer (what keeping events
//     costs without any of conn);
//   - raw-uni-fresh/vs-raw-uni: fresh buffers against a reused one, no conn
//     at all (the price of fresh memory alone).
//
// Every sender is gated: a chunk tells its server to write the chunk's
// frames and then reads them, so each side's sender works only during its
// own chunk (with a 64 MiB receive window an ungated sender would run
// ahead during the other side's chunk).
func BenchmarkSubscribeDeliveryPaired(b *testing.B) {
	ev, err := felix.AppendEventBatch(nil, &felix.EventBatch{HasBaseOffset: true, Payloads: benchPayloads()}, felix.FlagEventBatchOffsets)
	require.NoError(b, err)
	// felixSide returns the chunk function of a conn subscription.
	felixSide := func(b *testing.B, pm PayloadMode) func(int) {
		n := 0
		gate := make(chan int, 1)
		ln, tc := startBenchServer(b, ev, &n, gate)
		b.Cleanup(func() { close(gate) }) // before the server's cleanup waits
		c, err := Dial(context.Background(), ln.Addr().String(), &Config{TLS: tc, TenantID: "t1", Token: "x"})
		require.NoError(b, err)
		ctx := context.Background()
		sub, err := c.Subscribe(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}, SubscribeOptions{Payloads: pm})
		require.NoError(b, err)
		b.Cleanup(func() { sub.Close(); c.Close() })
		return func(n int) {
			gate <- n
			for range n * benchRecords {
				if _, err := sub.Next(ctx); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	// rawSide returns the chunk function of a raw uni stream read into one
	// reused buffer (felix.Reader) or into a fresh buffer per frame.
	rawSide := func(b *testing.B, fresh bool) func(int) {
		gate := make(chan int, 1)
		s := rawUniPair(b, func(s *quic.SendStream) {
			// One frame first: the client sees the uni stream only
			// once data arrives on it.
			if _, err := s.Write(ev); err != nil {
				return
			}
			for k := range gate {
				for range k {
					if _, err := s.Write(ev); err != nil {
						return
					}
				}
			}
			s.Close()
		})
		b.Cleanup(func() { close(gate); s.CancelRead(0) })
		r := felix.NewReader(s)
		_, err := r.ReadFrame()
		require.NoError(b, err)
		var hdr [felix.HeaderLen]byte
		return func(n int) {
			gate <- n
			for range n {
				if !fresh {
					if _, err := r.ReadFrame(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if _, err := io.ReadFull(s, hdr[:]); err != nil {
					b.Fatal(err)
				}
				h, err := felix.ParseHeader(hdr[:])
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(s, make([]byte, h.Length)); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	for _, c := range []struct {
		name        string
		side        func(b *testing.B) func(int)
		anchorFresh bool
	}{
		{"felix/vs-raw-uni", func(b *testing.B) func(int) { return felixSide(b, PayloadsUntilNext) }, false},
		{"felix-owned/vs-raw-uni", func(b *testing.B) func(int) { return felixSide(b, PayloadsOwned) }, false},
		{"felix-owned/vs-raw-uni-fresh", func(b *testing.B) func(int) { return felixSide(b, PayloadsOwned) }, true},
		{"raw-uni-fresh/vs-raw-uni", func(b *testing.B) func(int) { return rawSide(b, true) }, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			side, anchor := c.side(b), rawSide(b, c.anchorFresh)
			b.SetBytes(benchRecords * benchRecSize)
			b.ReportAllocs()
			b.ResetTimer()
			benchPairedChunks(b, 64, side, anchor)
			b.StopTimer()
		})
	}
}
