package conn

import (
	"context"
	"crypto/tls"
	"io"
	"sync"
	"testing"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// The benchmarks compare Felix over conn with the same bytes pushed through
// raw quic-go streams in the same run:
//
//   - PublishAcked: 64 × 100 B acked binary batches, pipelined (64 in
//     flight: one goroutine with PublishBatchAsync under a publish_window
//     of 64, and 64 goroutines calling PublishBatch), against a server that
//     answers each with a binary ack;
//   - SubscribeDelivery: 64 × 100 B event batches written by the server
//     on an event stream and consumed event by event with Next.
//
// Both report bytes of record payload per second (SetBytes).

const (
	benchRecords  = 64
	benchRecSize  = 100
	benchInflight = 64
)

func benchPayloads() [][]byte {
	p := make([][]byte, benchRecords)
	for i := range p {
		p[i] = make([]byte, benchRecSize)
	}
	return p
}

// startBenchServer starts a server that answers acked binary publishes
// with an ok ack and, on a subscribe, opens an event stream and writes
// eventFrame *n times (or, given a gate, k times for each k received from
// it until it is closed).
func startBenchServer(b *testing.B, eventFrame []byte, n *int, gate ...<-chan int) (*Listener, *tls.Config) {
	return startBenchServerHooks(b, nil, eventFrame, n, gate...)
}

// startBenchServerHooks is startBenchServer with server hooks h (nil: none).
func startBenchServerHooks(b *testing.B, h *Hooks, eventFrame []byte, n *int, gate ...<-chan int) (*Listener, *tls.Config) {
	srvTLS, pool, err := SelfSigned()
	require.NoError(b, err)
	offer := fullOffer()
	offer.PublishWindow = benchInflight
	ln, err := Listen("127.0.0.1:0", &ServerConfig{TLS: srvTLS, Offer: offer, Hooks: h})
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			sc, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			wg.Go(func() {
				for {
					st, err := sc.AcceptStream(ctx)
					if err != nil {
						return
					}
					wg.Go(func() {
						var g <-chan int
						if len(gate) > 0 {
							g = gate[0]
						}
						benchServe(ctx, st, eventFrame, *n, g)
					})
				}
			})
		}
	})
	b.Cleanup(func() {
		cancel()
		ln.Close()
		wg.Wait()
	})
	return ln, &tls.Config{RootCAs: pool}
}

// benchServe serves one stream as the example broker does: requests are
// read and answered under the connection's own context, events written
// under the event stream's own context (neither costs a context.AfterFunc
// per frame).
func benchServe(ctx context.Context, st *Stream, eventFrame []byte, n int, gate <-chan int) {
	defer st.Close()
	var buf []byte
	cctx := st.Conn().Context()
	for {
		req, err := st.ReadRequest(cctx)
		if err != nil {
			return
		}
		if req.Flags.Has(felix.FlagBinaryPublishAcked) {
			pre, err := felix.PeekAckedPrefix(req.Flags, req.Payload)
			if err != nil {
				return
			}
			a := felix.PublishAck{Status: felix.AckOK, RequestID: pre.RequestID}
			buf, _ = felix.AppendPublishAck(buf[:0], &a)
			if st.WriteEncoded(cctx, buf) != nil {
				return
			}
			continue
		}
		if _, ok := req.Message.(*felix.Subscribe); ok {
			es, err := st.OpenEventStream(ctx, 1)
			if err != nil {
				return
			}
			st.WriteMessage(ctx, &felix.Subscribed{SubscriptionID: 1})
			st.Close()
			if gate != nil {
				for k := range gate {
					for range k {
						if es.WriteEncoded(es.Context(), eventFrame) != nil {
							return
						}
					}
				}
			} else {
				for range n {
					if es.WriteEncoded(es.Context(), eventFrame) != nil {
						return
					}
				}
			}
			es.Close()
			return
		}
	}
}

func BenchmarkPublishAcked(b *testing.B) {
	b.Run("felix", func(b *testing.B) {
		// One goroutine keeps the publish window (64) full, as the raw
		// baseline does.
		n := 0
		ln, tc := startBenchServer(b, nil, &n)
		c, err := Dial(context.Background(), ln.Addr().String(), &Config{TLS: tc, TenantID: "t1", Token: "x"})
		require.NoError(b, err)
		defer c.Close()
		require.EqualValues(b, benchInflight, c.Capabilities().PublishWindow)
		ps := benchPayloads()
		t := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}
		b.SetBytes(benchRecords * benchRecSize)
		b.ReportAllocs()
		b.ResetTimer()
		stopCPU := cpuMeter(b)
		var wg sync.WaitGroup
		ctx := context.Background()
		done := func(_ felix.PublishResult, err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		}
		for range b.N {
			wg.Add(1)
			if err := c.PublishBatchAsync(ctx, t, ps, PublishOptions{Ack: felix.AckPerBatch}, done); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		stopCPU()
	})
	b.Run("felix-64-goroutines", func(b *testing.B) {
		n := 0
		ln, tc := startBenchServer(b, nil, &n)
		c, err := Dial(context.Background(), ln.Addr().String(), &Config{TLS: tc, TenantID: "t1", Token: "x"})
		require.NoError(b, err)
		defer c.Close()
		ps := benchPayloads()
		t := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}
		b.SetBytes(benchRecords * benchRecSize)
		b.ReportAllocs()
		b.SetParallelism((benchInflight + 1) / 2)
		b.ResetTimer()
		stopCPU := cpuMeter(b)
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if _, err := c.PublishBatch(ctx, t, ps, PublishOptions{Ack: felix.AckPerBatch}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		stopCPU()
	})
	b.Run("raw-quic", func(b *testing.B) {
		rp := newRawAckedPublisher(b)
		b.SetBytes(benchRecords * benchRecSize)
		b.ReportAllocs()
		b.ResetTimer()
		stopCPU := cpuMeter(b)
		rp.publish(b, b.N)
		stopCPU()
		b.StopTimer()
		rp.s.Close()
	})
}

// rawAckedPublisher is the raw quic-go baseline of an acked publish: one
// bidi stream to a server that answers every frame with a binary ok ack,
// the same frames conn sends, pipelined benchInflight deep.
type rawAckedPublisher struct {
	s       *quic.Stream
	fr, ack []byte
}

func newRawAckedPublisher(b *testing.B) *rawAckedPublisher {
	fr, err := felix.AppendPublishBatch(nil, &felix.PublishBatch{AckMode: felix.AckPerBatch, RequestID: 1,
		TenantID: "t1", Namespace: "ns", Stream: "s", Payloads: benchPayloads()})
	require.NoError(b, err)
	ack, err := felix.AppendPublishAck(nil, &felix.PublishAck{Status: felix.AckOK, RequestID: 1})
	require.NoError(b, err)
	s := rawPair(b, func(s *quic.Stream) {
		r := felix.NewReader(s)
		for {
			if _, err := r.ReadFrame(); err != nil {
				s.Close()
				return
			}
			if _, err := s.Write(ack); err != nil {
				return
			}
		}
	})
	return &rawAckedPublisher{s: s, fr: fr, ack: ack}
}

// publish sends n frames, at most benchInflight unacknowledged, and
// returns once every ack has been read.
func (p *rawAckedPublisher) publish(b *testing.B, n int) {
	window := make(chan struct{}, benchInflight)
	acks := make(chan error, 1)
	go func() {
		buf := make([]byte, len(p.ack))
		for range n {
			if _, err := io.ReadFull(p.s, buf); err != nil {
				acks <- err
				return
			}
			<-window
		}
		acks <- nil
	}()
	for range n {
		window <- struct{}{}
		if _, err := p.s.Write(p.fr); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, <-acks)
}

func BenchmarkSubscribeDelivery(b *testing.B) {
	ev, err := felix.AppendEventBatch(nil, &felix.EventBatch{HasBaseOffset: true, Payloads: benchPayloads()}, felix.FlagEventBatchOffsets)
	require.NoError(b, err)
	// felix reads event by event with Next into the recycled buffer (the
	// default PayloadsUntilNext); -owned each frame into a buffer of its
	// own (PayloadsOwned); -release hands events on and releases them
	// (PayloadsUntilRelease). felix-batch reads whole batches with
	// NextBatch (the zero-copy view a proxy forwards).
	for _, mode := range []struct {
		name  string
		pm    PayloadMode
		batch bool
	}{{"felix", PayloadsUntilNext, false}, {"felix-owned", PayloadsOwned, false}, {"felix-release", PayloadsUntilRelease, false},
		{"felix-batch", PayloadsUntilNext, true}, {"felix-batch-owned", PayloadsOwned, true}} {
		b.Run(mode.name, func(b *testing.B) {
			n := b.N
			ln, tc := startBenchServer(b, ev, &n)
			c, err := Dial(context.Background(), ln.Addr().String(), &Config{TLS: tc, TenantID: "t1", Token: "x"})
			require.NoError(b, err)
			defer c.Close()
			b.SetBytes(benchRecords * benchRecSize)
			b.ReportAllocs()
			b.ResetTimer()
			stopCPU := cpuMeter(b)
			ctx := context.Background()
			sub, err := c.Subscribe(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}, SubscribeOptions{Payloads: mode.pm})
			require.NoError(b, err)
			if mode.batch {
				for range b.N {
					v, err := sub.NextBatch(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if v.Len() != benchRecords {
						b.Fatalf("batch of %d records", v.Len())
					}
				}
			} else {
				for range b.N * benchRecords {
					ev, err := sub.Next(ctx)
					if err != nil {
						b.Fatal(err)
					}
					ev.Release()
				}
			}
			stopCPU()
			b.StopTimer()
			sub.Close()
		})
	}
	b.Run("raw-quic-uni", func(b *testing.B) {
		s := rawUniPair(b, func(s *quic.SendStream) {
			for range b.N {
				if _, err := s.Write(ev); err != nil {
					return
				}
			}
			s.Close()
		})
		b.SetBytes(benchRecords * benchRecSize)
		b.ReportAllocs()
		b.ResetTimer()
		stopCPU := cpuMeter(b)
		r := felix.NewReader(s)
		for range b.N {
			if _, err := r.ReadFrame(); err != nil {
				b.Fatal(err)
			}
		}
		stopCPU()
		b.StopTimer()
		s.CancelRead(0)
	})
	// raw-quic-uni-fresh reads every frame of the raw uni stream into a
	// fresh buffer, as the default mode must so that events may be kept:
	// the cost of that memory (allocation, zeroing, the collector) without
	// any of conn.
	b.Run("raw-quic-uni-fresh", func(b *testing.B) {
		s := rawUniPair(b, func(s *quic.SendStream) {
			for range b.N {
				if _, err := s.Write(ev); err != nil {
					return
				}
			}
			s.Close()
		})
		b.SetBytes(benchRecords * benchRecSize)
		b.ReportAllocs()
		b.ResetTimer()
		stopCPU := cpuMeter(b)
		var hdr [felix.HeaderLen]byte
		for range b.N {
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
		stopCPU()
		b.StopTimer()
		s.CancelRead(0)
	})
	b.Run("raw-quic", func(b *testing.B) {
		s := rawPair(b, func(s *quic.Stream) {
			for range b.N {
				if _, err := s.Write(ev); err != nil {
					return
				}
			}
			s.Close()
		})
		b.SetBytes(benchRecords * benchRecSize)
		b.ReportAllocs()
		b.ResetTimer()
		stopCPU := cpuMeter(b)
		s.Write([]byte{0}) // opens the stream at the server
		r := felix.NewReader(s)
		for range b.N {
			if _, err := r.ReadFrame(); err != nil {
				b.Fatal(err)
			}
		}
		stopCPU()
		b.StopTimer()
		s.Close()
	})
}

// rawConns starts a raw quic-go server with this package's QUIC and TLS
// configuration, runs serve on its first accepted connection (which stays
// open until cleanup), and returns the client's connection and a context
// that ends at cleanup.
func rawConns(b *testing.B, serve func(ctx context.Context, sc *quic.Conn)) (context.Context, *quic.Conn) {
	srvTLS, pool, err := SelfSigned()
	require.NoError(b, err)
	tc, err := serverTLS(srvTLS, false)
	require.NoError(b, err)
	ln, err := quic.ListenAddr("127.0.0.1:0", tc, quicConfig(nil, true))
	require.NoError(b, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		sc, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		serve(ctx, sc)
		<-ctx.Done()
		sc.CloseWithError(0, "")
	})
	qc, err := quic.DialAddr(ctx, ln.Addr().String(), clientTLS(&tls.Config{RootCAs: pool}, "", false), quicConfig(nil, false))
	require.NoError(b, err)
	b.Cleanup(func() {
		cancel()
		qc.CloseWithError(0, "")
		wg.Wait()
		ln.Close()
	})
	return ctx, qc
}

// rawUniPair starts a raw quic-go server that opens a uni stream to the
// client (as a broker opens an event stream) and runs serve on it; it
// returns the client's end.
func rawUniPair(b *testing.B, serve func(*quic.SendStream)) *quic.ReceiveStream {
	ctx, qc := rawConns(b, func(ctx context.Context, sc *quic.Conn) {
		if s, err := sc.OpenUniStreamSync(ctx); err == nil {
			serve(s)
		}
	})
	s, err := qc.AcceptUniStream(ctx)
	require.NoError(b, err)
	return s
}

// rawPair starts a raw quic-go server whose first accepted stream runs
// serve (after reading the one opening byte of the subscribe benchmark when
// serve does not read), and returns the client's end of a stream to it. Both
// use this package's QUIC configuration.
func rawPair(b *testing.B, serve func(*quic.Stream)) *quic.Stream {
	ctx, qc := rawConns(b, func(ctx context.Context, sc *quic.Conn) {
		if s, err := sc.AcceptStream(ctx); err == nil {
			serve(s)
		}
	})
	s, err := qc.OpenStreamSync(ctx)
	require.NoError(b, err)
	return s
}
