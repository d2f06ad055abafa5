package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// Bad command lines are refused before anything connects (the address
// is unreachable: a refusal that tried to connect would time out
// instead), with exit status 2 and one line saying what to change.
func TestBenchRefusals(t *testing.T) {
	noBroker := []string{"-addr", "127.0.0.1:9", "-timeout", "50ms"}
	cases := []struct {
		args []string
		want string
	}{
		{nil, "missing mode"},
		{[]string{"-pubs", "2"}, "the mode comes first"},
		{[]string{"publish", "s"}, `unknown mode "publish"`},
		{[]string{"pub"}, "want exactly one STREAM"},
		{[]string{"pub", "a", "b"}, "want exactly one STREAM"},
		{[]string{"pub", "-size", "0", "s"}, "-size 0 is too small to carry the bench header (28 bytes"},
		{[]string{"pub", "-size", "27", "s"}, "use -size 28 or more"},
		{[]string{"pub", "-subs", "2", "s"}, "bench pub has no subscribers"},
		{[]string{"sub", "-pubs", "2", "s"}, "bench sub has no publishers"},
		{[]string{"pubsub", "-pubs", "0", "s"}, "-pubs 0: want 1 to 1024"},
		{[]string{"pubsub", "-subs", "0", "s"}, "-subs 0: want 1 to 1024"},
		{[]string{"pubsub", "-subs", "2000", "s"}, "-subs 2000: want 1 to 1024"},
		{[]string{"pubsub", "-conns", "3", "s"}, "-conns 3 is more connections than publishers and subscribers (2)"},
		{[]string{"pub", "-conns", "0", "s"}, "-conns 0"},
		{[]string{"pubsub", "-subs", "10", "-max-subs-per-conn", "4", "s"}, "10 subscribers on 1 connection(s) is 10 subscriptions per connection; the broker allows 4 (-max-subs-per-conn)"},
		{[]string{"pubsub", "-subs", "10", "-max-subs-per-conn", "4", "s"}, "use -conns 3 or more"},
		{[]string{"pub", "-batch", "0", "s"}, "-batch 0"},
		{[]string{"pub", "-size", "1048576", "-batch", "20", "s"}, "over the 16777216-byte frame limit: lower -batch or -size"},
		{[]string{"pub", "-ack", "maybe", "s"}, `bad -ack "maybe": want none, batch or idempotent`},
		{[]string{"pub", "-keys", "-1", "s"}, "-keys -1"},
		{[]string{"pubsub", "-shard", "x", "s"}, `bad -shard "x"`},
		{[]string{"pubsub", "-shard", "2", "s"}, "-shard 2 with unkeyed records: they all go to shard 0"},
		{[]string{"pub", "-n", "10", "-duration", "1s", "s"}, "give -n or -duration, not both"},
		{[]string{"pub", "-n", "-1", "s"}, "-n -1"},
		{[]string{"pub", "-warmup", "-1s", "s"}, "cannot be negative"},
		{[]string{"pub", "-addr", ",", "s"}, "-addr is empty"},
		{[]string{"pub", "s", "-n", "1"}, "flag -n after the positional arguments"},
	}
	for _, c := range cases {
		args := append([]string{"bench"}, c.args...)
		if len(c.args) > 0 && !strings.HasPrefix(c.args[0], "-") {
			args = append([]string{"bench", c.args[0]}, append(append([]string{}, noBroker...), c.args[1:]...)...)
		}
		code, out, errb := felixRun(t, "", args...)
		require.Equal(t, 2, code, "%v: %s", c.args, errb)
		require.Empty(t, out, c.args)
		oneErrLine(t, errb)
		require.Contains(t, errb, c.want, c.args)
		require.Contains(t, errb, "(usage: felix bench pub|sub|pubsub [FLAGS] STREAM)", c.args)
	}
	// Accepted: the boundaries of the refusals above.
	for _, args := range [][]string{
		{"pub", "-size", "28", "s"},
		{"pubsub", "-subs", "8", "-conns", "2", "-max-subs-per-conn", "4", "s"},
		{"pubsub", "-keys", "3", "-shard", "2", "s"},
		{"pub", "-ack", "per_batch", "s"},
	} {
		cfg, err := parseBench(append(args[:1:1], append(append([]string{}, noBroker...), args[1:]...)...), nil)
		require.NoError(t, err, args)
		require.Equal(t, "s", cfg.stream)
	}
}

func TestBenchHelp(t *testing.T) {
	code, out, errb := felixRun(t, "", "bench", "-h")
	require.Equal(t, 0, code, errb)
	require.Contains(t, out, "usage: felix bench pub|sub|pubsub [FLAGS] STREAM")
	for _, f := range []string{"-pubs", "-subs", "-conns", "-size", "-batch", "-ack", "-keys", "-shard", "-n", "-duration", "-warmup", "-drain", "-progress", "-json", "-addr", "FELIX_ADDR"} {
		require.Contains(t, out, f)
	}
	code, out, _ = felixRun(t, "", "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "felix bench ", "the one-screen command list names bench")
	code, out, _ = felixRun(t, "", "help", "bench")
	require.Equal(t, 0, code)
	require.Contains(t, out, "usage: felix bench pub|sub|pubsub [FLAGS] STREAM")
}

// runBenchJSON runs felix bench with -json and decodes its report.
func runBenchJSON(t *testing.T, args ...string) (benchReport, string) {
	t.Helper()
	code, out, errb := felixRun(t, "", append([]string{"bench"}, args...)...)
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errb, out)
	var r benchReport
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	return r, errb
}

// A short pubsub run against the reference broker in every ack mode: the
// report counts exactly what was sent, every subscriber got every record,
// and the latencies come from real samples.
func TestBenchEndToEnd(t *testing.T) {
	b := startTestBroker(t)
	for _, ack := range []string{benchAckBatch, benchAckIdempotent, benchAckNone} {
		t.Run(ack, func(t *testing.T) {
			const n, batch, subs = 240, 4, 2
			r, errb := runBenchJSON(t, append(append([]string{"pubsub"}, b...), "-json", "-progress", "0", "-n", fmt.Sprint(n), "-batch", fmt.Sprint(batch),
				"-subs", fmt.Sprint(subs), "-pubs", "2", "-conns", "2", "-size", "100", "-ack", ack, "-warmup", "200ms", "bench-"+ack)...)
			require.Empty(t, errb, "no progress lines with -progress 0")
			require.Len(t, r.Publishers, 2)
			for _, p := range r.Publishers {
				require.Equal(t, int64(n), p.Records, "-n counts records per publisher")
				require.Equal(t, int64(n*100), p.Bytes)
				require.Positive(t, p.RecordsSec)
			}
			require.Equal(t, int64(2*n), r.Published.Records)
			require.Len(t, r.Subscribers, subs)
			for _, s := range r.Subscribers {
				require.Equal(t, int64(2*n), s.Records, "every subscriber got every measured record")
			}
			require.Equal(t, int64(subs*2*n), r.Delivered.Records)
			require.True(t, r.Verify.Checked)
			// The warm-up's records are sent and checked, not measured:
			// the first batch of each publisher is always one of them.
			require.GreaterOrEqual(t, r.Verify.Sent, uint64(2*n+2*batch))
			warm := r.Verify.Sent - 2*n
			require.Zero(t, r.Verify.LostAcked)
			require.Zero(t, r.Verify.MissingUnacked)
			require.Zero(t, r.Verify.Duplicates)
			// Fire and forget can outrun the subscribers: the broker lags
			// them, the client resumes each after its last delivered record,
			// and no record is skipped (the checks above) nor any error seen.
			require.Empty(t, r.Errors)
			require.NotNil(t, r.Delivery)
			require.Equal(t, int64(subs*2*n), r.Delivery.Count, "one delivery latency per measured record and subscriber")
			require.LessOrEqual(t, r.Delivery.P50, r.Delivery.P99)
			require.LessOrEqual(t, r.Delivery.P99, r.Delivery.Max)
			require.Positive(t, r.Delivery.Max)
			if ack == benchAckNone {
				require.Nil(t, r.AckLatency, "nothing is acknowledged")
				require.Zero(t, r.Verify.Acked)
			} else {
				require.Equal(t, uint64(2*n)+warm, r.Verify.Acked)
				require.Equal(t, int64(2*n/batch), r.AckLatency.Count, "one ack latency per batch")
			}
			require.Equal(t, int64(2), r.Client.Connects, "one connection per -conns")
			require.Positive(t, r.Machine.CPUs)
			require.NotEmpty(t, r.Machine.Go)
		})
	}
}

// Keyed records over a sharded stream, read with a sharded subscription;
// the text report and one progress line per interval.
func TestBenchKeyedTextReport(t *testing.T) {
	_, b := startRefBroker(t, 3)
	code, out, errb := felixRun(t, "", append(append([]string{"bench", "pubsub"}, b...), "-keys", "5", "-n", "100", "-batch", "2", "-progress", "20ms", "-warmup", "30ms", "jobs")...)
	require.Equal(t, 0, code, errb)
	for _, line := range strings.Split(strings.TrimSpace(errb), "\n") {
		require.Regexp(t, `^bench +[0-9.]+s( \(warm-up\))?  pub [0-9.kM]+ rec/s \(\d+\)  sub [0-9.kM]+ rec/s \(\d+\)  errors 0  redirects \d+  retries \d+  resumes \d+(  \(draining: \d+ records [^)]*\))?$`, line)
	}
	for _, want := range []string{
		"felix bench pubsub: stream jobs on ",
		"1 publisher(s), 1 subscriber(s), 1 connection(s), 128 B records, 2 per batch, ack batch, 5 keys, shard all, warm-up 0.03s",
		"published", "delivered", "publish->ack (per batch)", "publish->delivery",
		"errors: none",
		"verify: ", "lost acked 0, missing unacked 0, duplicates 0",
	} {
		require.Contains(t, out, want)
	}
}

// bench sub reads another process's bench pub (here: another run) and
// counts gaps per publisher; bench pub alone says it verified nothing.
func TestBenchPubAndSubSeparately(t *testing.T) {
	b := startTestBroker(t)
	done := make(chan benchReport, 1)
	go func() {
		code, out, errb := felixRun(t, "", append(append([]string{"bench", "sub"}, b...), "-json", "-progress", "0", "-n", "50", "split")...)
		var r benchReport
		if code == 0 {
			_ = json.Unmarshal([]byte(out), &r)
		} else {
			r.Stream = "failed: " + errb
		}
		done <- r
	}()
	// The subscriber subscribes from the latest offset: publish until it
	// has its 50 records (each run's publisher starts its sequence at 0).
	var sub benchReport
	for got := false; !got; {
		pr, _ := runBenchJSON(t, append(append([]string{"pub"}, b...), "-json", "-progress", "0", "-n", "50", "split")...)
		require.False(t, pr.Verify.Checked)
		require.Contains(t, pr.Verify.Why, "no subscribers in this run")
		select {
		case sub = <-done:
			got = true
		default:
		}
	}
	require.Equal(t, "split", sub.Stream, sub.Stream)
	require.GreaterOrEqual(t, sub.Subscribers[0].Records, int64(50))
	require.Zero(t, sub.Verify.Duplicates)
	require.Contains(t, sub.Verify.Why, "no publishers in this run")
	require.Zero(t, sub.Verify.Gaps, "counted from the first record received: no gap on loopback")
}

// A broker that allows fewer subscriptions per connection than the run
// needs refuses one at setup: felix bench says so and what to change.
func TestBenchBrokerSubscriptionLimit(t *testing.T) {
	_, b := listenTestBroker(t, server.Config{MaxSubscriptionsPerConn: 2, Engine: engine.Config{DefaultStream: engine.StreamConfig{Durable: true}}})
	code, out, errb := felixRun(t, "", append(append([]string{"bench", "pubsub"}, b...), "-subs", "3", "-n", "1", "limited")...)
	require.Equal(t, 1, code, errb)
	require.Empty(t, out)
	oneErrLine(t, errb)
	require.Contains(t, errb, "felix bench: subscriber 2: the broker refused one more subscription on its connection")
	require.Contains(t, errb, "limit_exceeded")
	require.Contains(t, errb, "use more -conns")
}

// docs/limits.md §6 states felix bench's bounds as the code has them.
func TestBenchLimitsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.FromSlash("../../docs/limits.md"))
	require.NoError(t, err)
	doc := string(b)
	for _, c := range []struct{ name, value string }{
		{"maxBenchWorkers", fmt.Sprint(maxBenchWorkers)},
		{"maxBenchConns", fmt.Sprint(maxBenchConns)},
		{"maxBenchBatch", fmt.Sprint(maxBenchBatch)},
		{"maxTrackedPublishers", fmt.Sprint(maxTrackedPublishers)},
		{"maxSeqWindowBits", fmt.Sprintf("%d sequence numbers, a %d KiB bitmap", maxSeqWindowBits, maxSeqWindowBits/8/1024)},
		{"maxHoleRanges", fmt.Sprint(maxHoleRanges)},
		{"maxErrorClasses", fmt.Sprint(maxErrorClasses)},
		{"latencyMaxMicros", fmt.Sprintf("%d min", latencyMaxMicros/int64(time.Minute/time.Microsecond))},
	} {
		i := strings.Index(doc, "`"+c.name+"`")
		require.GreaterOrEqual(t, i, 0, "docs/limits.md does not name %s", c.name)
		line := doc[strings.LastIndex(doc[:i], "\n")+1:]
		line = line[:strings.Index(line, "\n")]
		require.Contains(t, line, c.value, "docs/limits.md states %s without its value", c.name)
	}
}

// Once publishing ended, the progress line says what the subscribers
// still wait for, and how long at most.
func TestBenchDrainNote(t *testing.T) {
	s := &benchSub{}
	b := &bench{cfg: &benchConfig{drain: 5 * time.Second}, subs: []*benchSub{s}}
	b.sentAll.Store(100)
	b.expected.Store(90) // 10 records' publish failed
	s.ownSeen.Store(40)
	require.Equal(t, "  (draining: 50 records to come, at most -drain 5s without one)", b.drainNote())
	s.ownSeen.Store(92)
	require.Equal(t, "  (draining: 8 records whose publish failed, at most 200ms more)", b.drainNote())
}
