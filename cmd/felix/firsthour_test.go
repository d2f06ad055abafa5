package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// syncWriter is a strings.Builder safe to read while a command writes.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
func (w *syncWriter) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.b.String() }

// felix pub streams stdin: a line written into its stdin reaches a
// subscriber while stdin is still open, and so does the next one; an
// interrupt then ends it with exit status 0 and the count.
func TestPubStreamsStdin(t *testing.T) {
	b := startTestBroker(t)
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncWriter
	code := make(chan int, 1)
	go func() { code <- run(ctx, cmd([]string{"pub"}, b, "live"), pr, &stdout, &stderr) }()

	for i, line := range []string{"first", "second"} {
		_, err := io.WriteString(pw, line+"\n")
		require.NoError(t, err)
		// A subscriber reads it while pub's stdin is still open.
		c, out, errb := felixRun(t, "", cmd([]string{"sub"}, b, "-from", fmt.Sprint(i), "-n", "1", "-timeout", "20s", "live")...)
		require.Equal(t, 0, c, errb)
		require.Equal(t, fmt.Sprintf("%d\t%s\n", i, line), out)
	}
	cancel() // Ctrl-C, stdin still open
	require.Equal(t, 0, <-code, stderr.String())
	require.Equal(t, "felix pub: interrupted: published 2 message(s) read from stdin until the interrupt\n", stderr.String())
	require.Equal(t, "published 1 message(s) to default/live at offset 0\npublished 1 message(s) to default/live at offset 1\n", stdout.String())
}

// Lines that arrive together go in one publish (up to -batch); a line
// above the frame limit is refused with the limit, after the lines before
// it were published.
func TestPubBatchesLinesThatArriveTogether(t *testing.T) {
	b := startTestBroker(t)
	var in strings.Builder
	for i := range 250 {
		fmt.Fprintf(&in, "line-%d\n", i)
	}
	code, out, errb := felixRun(t, in.String(), cmd([]string{"pub"}, b, "-batch", "100", "bulk")...)
	require.Equal(t, 0, code, errb)
	require.Equal(t, "published 100 message(s) to default/bulk at offset 0..99\n"+
		"published 100 message(s) to default/bulk at offset 100..199\n"+
		"published 50 message(s) to default/bulk at offset 200..249\n", out)

	code, out, errb = felixRun(t, "ok\r\n"+strings.Repeat("x", maxMessageLine+1)+"\n", cmd([]string{"pub"}, b, "bulk")...)
	require.Equal(t, 1, code)
	require.Equal(t, "published 1 message(s) to default/bulk at offset 250\n", out)
	require.Contains(t, errb, "stdin line 2 is longer than the frame limit")
	oneErrLine(t, errb)
}

// felix sub -shard all reads every shard of a sharded stream.
func TestSubEveryShard(t *testing.T) {
	srv, b := listenTestBroker(t, server.Config{Engine: engine.Config{NoAutoCreateStreams: true}})
	require.NoError(t, srv.Engine().CreateStream(engine.Topic{Tenant: "t1", Namespace: "default", Stream: "orders4"},
		engine.StreamConfig{Durable: true, Shards: 4}))
	const records = 40
	for i := range records {
		code, _, errb := felixRun(t, "", cmd([]string{"pub"}, b, "-key", fmt.Sprint("k", i), "orders4", fmt.Sprint("r", i))...)
		require.Equal(t, 0, code, errb)
	}
	code, out, errb := felixRun(t, "", cmd([]string{"sub"}, b, "-shard", "all", "-from", "earliest", "-n", fmt.Sprint(records), "orders4")...)
	require.Equal(t, 0, code, errb)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, records)
	shards := map[string]bool{}
	seen := map[string]bool{}
	for _, l := range lines {
		pos, payload, ok := strings.Cut(l, "\t")
		require.True(t, ok, l)
		shard, _, ok := strings.Cut(pos, ":")
		require.True(t, ok, "SHARD:OFFSET: %s", l)
		shards[shard] = true
		seen[payload] = true
	}
	require.Len(t, seen, records, "every record, from every shard")
	require.Greater(t, len(shards), 1)

	code, _, errb = felixRun(t, "", cmd([]string{"sub"}, b, "-shard", "all", "-from", "3", "orders4")...)
	require.Equal(t, 2, code)
	require.Contains(t, errb, "offsets are per shard")
	code, _, errb = felixRun(t, "", cmd([]string{"sub"}, b, "-shard", "some", "orders4")...)
	require.Equal(t, 2, code)
	require.Contains(t, errb, `bad -shard "some"`)
}

// Ctrl-C ends every long-running command the same way: exit status 0 and
// one "interrupted" line on stderr.
func TestInterruptExitsTheSameWay(t *testing.T) {
	b := startTestBroker(t)
	for _, args := range [][]string{
		cmd([]string{"sub"}, b, "quiet"),
		cmd([]string{"sub"}, b, "-shard", "all", "quiet2"),
		cmd([]string{"cache", "watch"}, b, "-prefix", "c", "k"),
		cmd([]string{"pub"}, b, "quiet"), // stdin open, nothing typed
	} {
		t.Run(strings.Join(args[:1], " "), func(t *testing.T) {
			if args[0] == "sub" && args[len(args)-1] == "quiet2" {
				// A sharded subscription needs the stream to exist.
				c, _, errb := felixRun(t, "", cmd([]string{"pub"}, b, "quiet2", "x")...)
				require.Equal(t, 0, c, errb)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pr, pw := io.Pipe()
			defer pw.Close()
			var stdout syncWriter
			stderr := &lineWriter{lines: make(chan string, 8)}
			code := make(chan int, 1)
			go func() { code <- run(ctx, args, pr, &stdout, stderr) }()
			// Interrupt once it waits: after its connection is up.
			waitConnected(t, b)
			cancel()
			select {
			case c := <-code:
				require.Equal(t, 0, c)
			case <-time.After(30 * time.Second):
				t.Fatal("the command did not end on the interrupt")
			}
			line := <-stderr.lines
			require.Contains(t, line, "interrupted")
		})
	}
}

// waitConnected gives a command started just before the time to connect:
// it returns once a client of the test can publish through the broker
// (ordering only; the interrupt is handled at any point).
func waitConnected(t *testing.T, b []string) {
	t.Helper()
	code, _, errb := felixRun(t, "", cmd([]string{"pub"}, b, "sync", "x")...)
	require.Equal(t, 0, code, errb)
}

// An ambiguous publish keeps "outcome unknown" in felix pub's message,
// even when the cause is the -timeout.
func TestExplainKeepsTheAmbiguousOutcome(t *testing.T) {
	cf := clientFlags{addr: "127.0.0.1:7447", timeout: 10 * time.Second}
	err := cf.explain("publish to orders", &client.AmbiguousError{Op: "publish", Addr: "127.0.0.1:7447", Err: context.DeadlineExceeded})
	require.Contains(t, err.Error(), "publish to orders: outcome unknown")
	require.Contains(t, err.Error(), "no answer within -timeout 10s")
	require.Contains(t, err.Error(), "not re-sent")
	require.False(t, errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "outcome unknown"))
}

// Help prints each flag's default once and the environment block once
// per help text.
func TestHelpDefaultsOncePerLine(t *testing.T) {
	code, out, _ := felixRun(t, "", "help", "all")
	require.Equal(t, 0, code)
	for _, l := range strings.Split(out, "\n") {
		require.LessOrEqual(t, strings.Count(l, "(default"), 1, "two defaults on one line: %q", l)
	}
	code, out, _ = felixRun(t, "", "help", "cache")
	require.Equal(t, 0, code)
	require.Equal(t, 1, strings.Count(out, "environment:"), out)
}

// Name mistakes from the command line name the flag or argument, not a
// Go field, and a name the protocol cannot carry is a name error.
func TestCLINameErrorsNameTheFlag(t *testing.T) {
	b := []string{"-addr", "127.0.0.1:1"} // never dialled: refused before
	code, _, errb := felixRun(t, "", cmd([]string{"pub"}, b, "-namespace", "", "orders", "x")...)
	require.Equal(t, 2, code)
	require.Contains(t, errb, "-namespace (FELIX_NAMESPACE) is empty")
	require.NotContains(t, errb, "set Namespace")
	code, _, errb = felixRun(t, "", cmd([]string{"sub"}, b, strings.Repeat("s", 70_000))...)
	require.Equal(t, 2, code)
	require.Contains(t, errb, "STREAM is 70000 bytes long; names are UTF-8 text of 1 to 65535 bytes")
	require.NotContains(t, errb, "frame")
	code, _, errb = felixRun(t, "", cmd([]string{"cache", "get"}, b, "-tenant", "", "c", "k")...)
	require.Equal(t, 2, code, errb)
	require.Contains(t, errb, "-tenant (FELIX_TENANT) is empty")
}
