package client_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/conntest"
	"github.com/flxproto/felix/internal/broker/server"
)

// BenchmarkSubscribeAlloc measures what the client allocates per byte it
// delivers: a scripted node in a process of its own (this test binary,
// re-run as a sender) writes one event batch (encoded once) b.N times per
// shard on each subscription, and the client reads it record by record
// with Next. Reported beside allocs/op and B/op (per batch, this process
// only: the client's): alloc-B/B, the bytes allocated while delivering
// over the payload bytes delivered, once warm (after warmBatches batches
// per shard, which fill the subscription's buffer pools: their bytes are
// reported apart, as warm-B, the cost of a new subscription), and
// cpu-ns/op (the client's CPU).
// The default subscription (PayloadsUntilNext), the sharded one (two
// shards, PayloadsUntilRelease under the merge) and PayloadsOwned (a
// fresh buffer per frame: the earlier default) at 1 KiB x 64 and
// 64 KiB x 4 records per batch; the -nogro variants read the client's
// socket without UDP GRO (conn.Config.NoGRO), for comparison. The benchmark fails when a warm recycled
// subscription allocates 0.05 bytes or more per byte it delivers (in a
// run that delivered 64 MiB or more: shorter ones, b.N's first guesses,
// are dominated by quic-go's pools refilling after a GC).
func BenchmarkSubscribeAlloc(b *testing.B) {
	for _, sz := range []struct {
		name      string
		n, recLen int
	}{{"1KiBx64", 64, 1 << 10}, {"64KiBx4", 4, 64 << 10}} {
		for _, mode := range []struct {
			name    string
			pm      client.PayloadMode
			sharded bool
			noGRO   bool
		}{{"default", client.PayloadsUntilNext, false, false}, {"sharded", 0, true, false}, {"owned", client.PayloadsOwned, false, false},
			{"default-nogro", client.PayloadsUntilNext, false, true}, {"sharded-nogro", 0, true, true}} {
			b.Run(sz.name+"/"+mode.name, func(b *testing.B) {
				shards := uint32(1)
				if mode.sharded {
					shards = 2
				}
				addr, der := startFrameSender(b, sz.n, sz.recLen, shards, b.N+warmBatches)
				c, _ := newClient(b, []string{addr}, func(cfg *client.Config) {
					benchDefaults(cfg)
					cfg.Conn.TLS = &tls.Config{RootCAs: newPool(der), ServerName: "localhost"}
					cfg.Conn.NoGRO = mode.noGRO
				})
				ctx := context.Background()
				records := b.N * sz.n * int(shards)
				var next func() (client.Event, error)
				if mode.sharded {
					ss, err := c.SubscribeSharded(ctx, topic, client.ShardedOptions{})
					require.NoError(b, err)
					defer ss.Close()
					next = func() (client.Event, error) { ev, err := ss.Next(ctx); return ev.Event, err }
				} else {
					s, err := c.Subscribe(ctx, topic, client.SubscribeOptions{Payloads: mode.pm})
					require.NoError(b, err)
					defer s.Close()
					next = func() (client.Event, error) { return s.Next(ctx) }
				}
				b.SetBytes(int64(sz.n*sz.recLen) * int64(shards))
				b.ReportAllocs()
				var mw, m0, m1 runtime.MemStats
				runtime.ReadMemStats(&mw)
				for range warmBatches * sz.n * int(shards) {
					if _, err := next(); err != nil {
						b.Fatal(err)
					}
				}
				runtime.ReadMemStats(&m0)
				b.ReportMetric(float64(m0.TotalAlloc-mw.TotalAlloc), "warm-B")
				cpu0, cpuOK := processCPU()
				b.ResetTimer()
				for range records {
					ev, err := next()
					if err != nil {
						b.Fatal(err)
					}
					if len(ev.Payload) != sz.recLen {
						b.Fatalf("record of %d bytes", len(ev.Payload))
					}
				}
				b.StopTimer()
				cpu1, _ := processCPU()
				runtime.ReadMemStats(&m1)
				delivered := float64(records * sz.recLen)
				ratio := float64(m1.TotalAlloc-m0.TotalAlloc) / delivered
				b.ReportMetric(ratio, "alloc-B/B")
				if cpuOK {
					b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
				}
				// quic-go's receive path allocates 0.02-0.03 bytes per byte
				// at these sizes read with UDP GRO (0.07-0.10 without:
				// BENCHMARKS.md); a fresh buffer per frame (1.0 more) fails.
				if mode.pm != client.PayloadsOwned && !mode.noGRO && delivered >= 64<<20 && ratio >= 0.05 {
					b.Errorf("%s allocates %.3f bytes per byte delivered (bound 0.05)", mode.name, ratio)
				}
			})
		}
	}
}

// warmBatches is how many batches per shard BenchmarkSubscribeAlloc reads
// before it counts: enough for a sharded subscription's buffers to be
// recycled rather than made.
const warmBatches = 16

// startFrameNode starts a scripted node (the test brokers' certificate)
// with shards shards per stream that answers every subscribe by writing
// frame *frames times on the event stream and ending it.
func startFrameNode(b conntest.TB, frame []byte, shards uint32, frames *atomic.Int64) string {
	tc, err := certs()
	if err != nil {
		b.Fatalf("certs: %v", err)
	}
	cl := conntest.Start(b, conntest.Options{TLS: tc, Configure: func(_ int, c *conn.ServerConfig) {
		c.Offer = felix.BrokerOffer{Flags: server.Flags,
			Features: felix.FeatureRedirect | felix.FeatureTopology | felix.FeatureStreamShards | felix.FeatureErrorCodes}
	}})
	nd := cl.Nodes[0]
	nd.Always("topology", func(x *conntest.Exchange) error {
		return x.Reply(&felix.TopologyView{Brokers: []felix.BrokerEndpoint{{NodeID: "n0", Addr: nd.Addr}}})
	})
	nd.Always("stream_shards", func(x *conntest.Exchange) error {
		return x.Reply(&felix.StreamShardsView{Shards: shards, RequestID: x.Request.Message.(*felix.StreamShards).RequestID})
	})
	var ids atomic.Uint64
	nd.Always("subscribe", func(x *conntest.Exchange) error {
		es, err := x.Subscribe(&felix.Subscribed{SubscriptionID: ids.Add(1)})
		if err != nil {
			return err
		}
		for range frames.Load() {
			if err := es.Encoded(frame); err != nil {
				return nil // the client left
			}
		}
		es.Wait() // the client reads to the last record, then closes
		return nil
	})
	return nd.Addr
}

// frameSenderEnv names the sender a test binary run with it becomes:
// "records recLen shards frames".
const frameSenderEnv = "FELIX_BENCH_FRAME_SENDER"

// startFrameSender runs this test binary as a frame sender (see
// frameSenderEnv) and returns its address; the process ends with the
// benchmark; der is its certificate.
func startFrameSender(b *testing.B, records, recLen int, shards uint32, frames int) (addr string, der []byte) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %d %d", frameSenderEnv, records, recLen, shards, frames))
	stdin, err := cmd.StdinPipe()
	require.NoError(b, err)
	out, err := cmd.StdoutPipe()
	require.NoError(b, err)
	cmd.Stderr = os.Stderr
	require.NoError(b, cmd.Start())
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(b, err)
	addr, cert, _ := strings.Cut(strings.TrimSpace(line), " ")
	der, err = base64.StdEncoding.DecodeString(cert)
	require.NoError(b, err)
	return addr, der
}

// exitTB is the conntest.TB of a sender process.
type exitTB struct{ cleanups []func() }

func (exitTB) Helper() {}
func (t *exitTB) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
func (t *exitTB) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }

// init turns the test binary into a frame sender when frameSenderEnv is
// set: it prints the address, serves until its stdin closes, and exits.
func init() {
	spec := os.Getenv(frameSenderEnv)
	if spec == "" {
		return
	}
	var records, recLen, frames int
	var shards uint32
	if _, err := fmt.Sscan(spec, &records, &recLen, &shards, &frames); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	payloads := make([][]byte, records)
	for i := range payloads {
		payloads[i] = make([]byte, recLen)
	}
	// No offsets: the same frame written again is not a resend.
	frame, err := felix.AppendEventBatch(nil, &felix.EventBatch{Payloads: payloads}, felix.EventModifierMask)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	tb := &exitTB{}
	var n atomic.Int64
	n.Store(int64(frames))
	addr := startFrameNode(tb, frame, shards, &n)
	tc, _ := certs()
	fmt.Println(addr, base64.StdEncoding.EncodeToString(tc.Certificates[0].Leaf.Raw))
	bufio.NewReader(os.Stdin).ReadString('\n') // until the benchmark ends
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
	os.Exit(0)
}
