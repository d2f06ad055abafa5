package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/stretchr/testify/require"
)

// lineWriter hands every complete line written to it to a channel (and
// keeps them all).
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	all   []string
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err == io.EOF {
			w.buf.WriteString(line)
			return len(p), nil
		}
		line = strings.TrimSuffix(line, "\n")
		w.all = append(w.all, line)
		select {
		case w.lines <- line:
		default:
		}
	}
}

// A pubsub run against a three-node cluster loses the node that owns the
// stream's shard in the middle of the run: the report shows the client's
// retries and the subscribers' resumes, and no acknowledged record is
// missing from any subscriber (per-publisher sequence numbers). Run with
// acked batches and with idempotent producers (no duplicates either).
func TestBenchClusterNodeKilled(t *testing.T) {
	for _, ack := range []string{benchAckBatch, benchAckIdempotent} {
		t.Run(ack, func(t *testing.T) {
			cl, err := cluster.Start(context.Background(), cluster.Config{Nodes: 3})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, cl.Close()) })
			const stream = "bench"
			require.NoError(t, cl.Engine().CreateStream(engine.Topic{Tenant: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Stream: stream},
				engine.StreamConfig{Durable: true, Shards: 1}))
			if ack == benchAckBatch {
				// A sharded read of a stream the cluster does not have.
				code, _, errb := felixRun(t, "", "bench", "sub", "-addr", cl.Addr(0), "-cert", cl.CAFile(), "-namespace", cluster.DefaultNamespace,
					"-shard", "all", cluster.MissingStream)
				require.Equal(t, 1, code, errb)
				oneErrLine(t, errb)
				require.Contains(t, errb, "stream missing has no shards yet, so -shard all has nothing to read: declare the stream")
			}
			owner, _ := cl.Owner(stream, 0)
			// Seed the client with a node that is not the owner: it must
			// find the owner itself (redirects, forwarded acks).
			seed := cl.Addr((owner + 1) % cl.Nodes())

			stderr := &lineWriter{lines: make(chan string, 64)}
			var stdout bytes.Buffer
			codeC := make(chan int, 1)
			args := []string{"bench", "pubsub", "-addr", seed, "-cert", cl.CAFile(), "-namespace", cluster.DefaultNamespace,
				"-json", "-pubs", "2", "-subs", "2", "-conns", "2", "-batch", "4", "-size", "64", "-ack", ack,
				"-duration", "4s", "-drain", "1s", "-progress", "100ms", stream}
			go func() { codeC <- run(context.Background(), args, strings.NewReader(""), &stdout, stderr) }()

			// Kill the owner once both sides are moving (a progress line
			// with delivered records).
			progress := regexp.MustCompile(`sub \S+ rec/s \((\d+)\)`)
		wait:
			for {
				select {
				case line := <-stderr.lines:
					if m := progress.FindStringSubmatch(line); m != nil {
						if n, _ := strconv.Atoi(m[1]); n > 0 {
							break wait
						}
					}
				case code := <-codeC:
					t.Fatalf("bench ended (exit %d) before the kill: %s %s", code, stdout.String(), strings.Join(stderr.all, "\n"))
				}
			}
			require.NoError(t, cl.Kill(owner))
			code := <-codeC
			stderr.mu.Lock()
			lines := strings.Join(stderr.all, "\n")
			stderr.mu.Unlock()
			require.Equal(t, 0, code, "stderr:\n%s\nstdout:\n%s", lines, stdout.String())

			var r benchReport
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &r), stdout.String())
			t.Logf("%s: sent %d acked %d, delivered %d, errors %+v, client %+v", ack, r.Verify.Sent, r.Verify.Acked, r.Delivered.Records, r.Errors, r.Client)
			require.True(t, r.Verify.Checked)
			require.False(t, r.Verify.Incomplete)
			require.Zero(t, r.Verify.LostAcked, "no acknowledged record lost: %v", r.Verify.FirstLost)
			require.Positive(t, r.Verify.Acked)
			require.GreaterOrEqual(t, r.Client.Resumes, int64(2), "both subscribers resumed on the new owner")
			require.Positive(t, r.Client.Disconnects, "the killed node's connections were lost")
			var errs int64
			for _, e := range r.Errors {
				errs += e.Count
			}
			require.Positive(t, r.Client.Retries+errs, "the publishers saw the failover (retried, or reported in doubt)")
			for _, s := range r.Subscribers {
				require.GreaterOrEqual(t, uint64(s.Records), r.Verify.Acked, "%s got at least every acknowledged record", s.Name)
			}
			if ack == benchAckIdempotent {
				require.Zero(t, r.Verify.Duplicates, "an idempotent producer's re-sends are written once")
			}
			// The progress lines show the failover as it happens.
			require.Regexp(t, `resumes [1-9]`, lines)
		})
	}
}

// An interrupted run still reports what it measured, does not call the
// records in flight lost, and exits 0 as every interrupted command.
func TestBenchInterrupted(t *testing.T) {
	b := startTestBroker(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &lineWriter{lines: make(chan string, 64)}
	var stdout bytes.Buffer
	codeC := make(chan int, 1)
	go func() {
		codeC <- run(ctx, append(append([]string{"bench", "pubsub"}, b...), "-json", "-duration", "1m", "-progress", "50ms", "intr"), strings.NewReader(""), &stdout, stderr)
	}()
	<-stderr.lines // running
	cancel()
	require.Equal(t, 0, <-codeC)
	var r benchReport
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &r), stdout.String())
	require.True(t, r.Interrupted)
	require.False(t, r.Verify.Checked)
	require.Zero(t, r.Verify.LostAcked)
	require.Positive(t, r.Published.Records)
	stderr.mu.Lock()
	defer stderr.mu.Unlock()
	require.Contains(t, stderr.all[len(stderr.all)-1], "felix bench: interrupted: the report covers the run until then")
}
