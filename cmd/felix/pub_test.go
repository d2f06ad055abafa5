package main

import (
	"bufio"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// startTestBroker runs the reference broker in-process and returns the
// client flags that reach it (with its certificate written to a file).
func startTestBroker(t *testing.T) []string {
	t.Helper()
	_, flags := listenTestBroker(t, server.Config{Engine: engine.Config{DefaultStream: engine.StreamConfig{Durable: true}}})
	return flags
}

// listenTestBroker serves a reference broker of cfg on a loopback port
// for the test and returns it with the flags that reach it.
func listenTestBroker(t *testing.T, cfg server.Config) (*server.Server, []string) {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	srv, err := server.Listen(cfg)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		require.NoError(t, <-done)
	})
	cert := filepath.Join(t.TempDir(), "broker.pem")
	require.NoError(t, srv.WriteCertificate(cert))
	return srv, []string{"-addr", srv.Addr().String(), "-cert", cert}
}

func cmd(verb []string, flags []string, rest ...string) []string {
	out := append(append([]string{}, verb...), flags...)
	return append(out, rest...)
}

func TestPubSubCLI(t *testing.T) {
	b := startTestBroker(t)
	code, out, errb := felixRun(t, "", cmd([]string{"pub"}, b, "orders", "one", "two")...)
	require.Equal(t, 0, code, errb)
	require.Equal(t, "published 1 message(s) to default/orders at offset 0\npublished 1 message(s) to default/orders at offset 1\n", out)

	code, out, errb = felixRun(t, "three\nfour\n", cmd([]string{"pub"}, b, "-json", "-batch", "2", "orders")...)
	require.Equal(t, 0, code, errb)
	require.Equal(t, `{"stream":"orders","count":2,"acked":true,"offset":2}`+"\n", out)

	code, out, errb = felixRun(t, "", cmd([]string{"pub"}, b, "-ack", "none", "orders", "five")...)
	require.Equal(t, 0, code, errb)
	require.Contains(t, out, "(unacknowledged)")

	code, out, errb = felixRun(t, "", cmd([]string{"sub"}, b, "-from", "earliest", "-n", "5", "orders")...)
	require.Equal(t, 0, code, errb)
	require.Equal(t, "0\tone\n1\ttwo\n2\tthree\n3\tfour\n4\tfive\n", out)

	code, out, errb = felixRun(t, "", cmd([]string{"sub"}, b, "-json", "-from", "3", "-n", "1", "orders")...)
	require.Equal(t, 0, code, errb)
	var ev map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &ev))
	require.Equal(t, float64(3), ev["offset"])
	require.Equal(t, "four", ev["payload"])
	require.Equal(t, "t1", ev["publisher"])
	require.Contains(t, ev, "timestamp_micros")

	code, _, errb = felixRun(t, "", cmd([]string{"sub"}, b, "-from", "99", "orders")...)
	require.Equal(t, 1, code)
	require.Contains(t, errb, "in_future")
	oneErrLine(t, errb)

	// -insecure instead of the certificate file
	insecure := []string{b[0], b[1], "-insecure"}
	code, _, errb = felixRun(t, "", cmd([]string{"pub"}, insecure, "orders", "six")...)
	require.Equal(t, 0, code, errb)
	// without either, the self-signed certificate is refused
	code, _, errb = felixRun(t, "", cmd([]string{"pub"}, []string{b[0], b[1], "-timeout", "3s"}, "orders", "x")...)
	require.Equal(t, 1, code)
	oneErrLine(t, errb)
	// bad token
	code, _, errb = felixRun(t, "", cmd([]string{"pub"}, b, "-token", "nope", "orders", "x")...)
	require.Equal(t, 1, code)
	require.Contains(t, errb, "auth")
	oneErrLine(t, errb)
}

func TestSubLiveCLI(t *testing.T) {
	b := startTestBroker(t)
	// Bounded by the test binary's -timeout only (t.Context): how long the
	// subscriber takes to start on a loaded machine is not asserted.
	ctx := t.Context()
	got := make(chan string, 1)
	go func() {
		var out, errb strings.Builder
		code := run(ctx, cmd([]string{"sub"}, b, "-n", "2", "live"), strings.NewReader(""), &out, &errb)
		got <- strings.TrimSpace(out.String() + errb.String() + " code=" + string(rune('0'+code)))
	}()
	// publish until the live subscriber has seen two messages
	for {
		select {
		case s := <-got:
			require.True(t, strings.HasSuffix(s, "code=0"), s)
			lines := strings.Split(strings.TrimSpace(strings.TrimSuffix(s, " code=0")), "\n")
			require.Len(t, lines, 2)
			return
		case <-time.After(100 * time.Millisecond):
		}
		code, _, errb := felixRun(t, "", cmd([]string{"pub"}, b, "live", "m")...)
		require.Equal(t, 0, code, errb)
	}
}

func TestCacheCLI(t *testing.T) {
	b := startTestBroker(t)
	code, out, errb := felixRun(t, "", cmd([]string{"cache", "put"}, b, "sessions", "u1", "alice")...)
	require.Equal(t, 0, code, errb)
	require.Equal(t, "stored u1\n", out)
	code, out, _ = felixRun(t, "", cmd([]string{"cache", "get"}, b, "sessions", "u1")...)
	require.Equal(t, 0, code)
	require.Equal(t, "alice\n", out)
	code, out, _ = felixRun(t, "", cmd([]string{"cache", "get"}, b, "-json", "sessions", "u1")...)
	require.Equal(t, 0, code)
	require.Equal(t, `{"op":"get","key":"u1","found":true,"value":"alice"}`+"\n", out)
	code, out, _ = felixRun(t, "", cmd([]string{"cache", "put"}, b, "-ttl", "100ms", "sessions", "u2", "bob")...)
	require.Equal(t, 0, code)
	require.Equal(t, "stored u2 (expires in 100ms)\n", out)
	time.Sleep(200 * time.Millisecond)
	code, out, errb = felixRun(t, "", cmd([]string{"cache", "get"}, b, "sessions", "u2")...)
	require.Equal(t, exitAbsent, code, "a miss exits 3")
	require.Empty(t, out, "a miss prints nothing on stdout")
	require.Equal(t, "felix cache get: key \"u2\" is absent from cache sessions\n", errb)
	code, out, _ = felixRun(t, "", cmd([]string{"cache", "del"}, b, "sessions", "u1")...)
	require.Equal(t, 0, code)
	require.Equal(t, "deleted u1: alice\n", out)
	code, out, _ = felixRun(t, "", cmd([]string{"cache", "watch"}, b, "-prefix", "-from", "0", "-n", "3", "sessions", "u")...)
	require.Equal(t, 0, code)
	require.Equal(t, "0\tput u1 = alice\n1\tput u2 = bob (expires ", out[:len("0\tput u1 = alice\n1\tput u2 = bob (expires ")])
	require.True(t, strings.HasSuffix(out, "2\tdelete u1\n"), out)
	code, out, _ = felixRun(t, "", cmd([]string{"cache", "watch"}, b, "-json", "-from", "2", "-n", "1", "sessions", "u1")...)
	require.Equal(t, 0, code)
	require.Equal(t, `{"op":"delete","key":"u1","offset":2}`+"\n", out)

	code, _, errb = felixRun(t, "", "cache", "frob")
	require.Equal(t, 2, code)
	oneErrLine(t, errb)
	code, _, errb = felixRun(t, "", cmd([]string{"cache", "put"}, b, "sessions", "k")...)
	require.Equal(t, 2, code)
	oneErrLine(t, errb)
}

// felix sub says why it ended when the broker went away, with the offset
// to resume from, and exits 1; an interrupt (ctx) still exits 0.
func TestSubBrokerGoneCLI(t *testing.T) {
	srv, err := server.Listen(server.Config{Addr: "127.0.0.1:0",
		Engine: engine.Config{DefaultStream: engine.StreamConfig{Durable: true}}})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	cert := filepath.Join(t.TempDir(), "broker.pem")
	require.NoError(t, srv.WriteCertificate(cert))
	b := []string{"-addr", srv.Addr().String(), "-cert", cert}
	code, _, errb := felixRun(t, "", cmd([]string{"pub"}, b, "gone", "a", "b")...)
	require.Equal(t, 0, code, errb)

	type result struct {
		code int
		err  string
	}
	got := make(chan result, 1)
	pr, pw := io.Pipe()
	go func() {
		var errb strings.Builder
		code := run(t.Context(), cmd([]string{"sub"}, b, "-from", "earliest", "gone"), strings.NewReader(""), pw, &errb)
		pw.Close()
		got <- result{code: code, err: errb.String()}
	}()
	// Wait for both events to be printed, then take the broker away.
	sc := bufio.NewScanner(pr)
	for range 2 {
		require.True(t, sc.Scan())
	}
	go io.Copy(io.Discard, pr)
	srv.Close()
	require.NoError(t, <-done)
	r := <-got
	t.Log(r.err)
	require.Equal(t, 1, r.code, r.err)
	oneErrLine(t, r.err)
	require.Contains(t, r.err, "subscription to gone ended")
	require.Contains(t, r.err, "after 2 event(s)")
	require.Contains(t, r.err, srv.Addr().String())
	require.Contains(t, r.err, "resume with -from 2")
}
