package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

// startTap runs `felix tap` in-process in front of the broker at addr
// (certificate file brokerCert) and returns its address, its certificate
// pool and a stop function that ends it and returns its stderr.
func startTap(t *testing.T, addr, brokerCert, logFile string, extra ...string) (string, *x509.CertPool, func() string) {
	t.Helper()
	dir := t.TempDir()
	addrOut, certOut := filepath.Join(dir, "tap.addr"), filepath.Join(dir, "tap.pem")
	ctx, cancel := context.WithCancel(context.Background())
	var errb bytes.Buffer
	done := make(chan int, 1)
	args := append([]string{"tap", "-listen", "127.0.0.1:0", "-addr", addr, "-cert", brokerCert,
		"-addr-out", addrOut, "-cert-out", certOut, "-o", logFile}, extra...)
	go func() { done <- run(ctx, args, strings.NewReader(""), new(bytes.Buffer), &errb) }()
	var tapAddr []byte
	for {
		var err error
		if tapAddr, err = os.ReadFile(addrOut); err == nil {
			break
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("tap exited with %d: %s", code, errb.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	pemBytes, err := os.ReadFile(certOut)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pemBytes))
	var once sync.Once
	var stderr string
	stop := func() string {
		once.Do(func() {
			cancel()
			require.Equal(t, 0, <-done, errb.String())
			stderr = errb.String()
		})
		return stderr
	}
	t.Cleanup(func() { stop() })
	return strings.TrimSpace(string(tapAddr)), pool, stop
}

// readTapLog parses the log's JSON lines.
func readTapLog(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		out = append(out, m)
	}
	return out
}

// Client → tap → broker: every frame of both directions is one JSON line
// that `felix decode` reproduces from its frame_hex, tokens are redacted,
// and the traffic is unaltered (what the client read is what the broker
// wrote, frame by frame; the records arrive intact).
func TestTapEndToEnd(t *testing.T) {
	srvHooks := &frameRecorder{}
	srv, err := server.Listen(server.Config{Addr: "127.0.0.1:0", Hooks: srvHooks.hooks(),
		Engine: engine.Config{DefaultStream: engine.StreamConfig{Durable: true}}})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	defer func() { srv.Close(); <-served }()
	brokerCert := filepath.Join(t.TempDir(), "broker.pem")
	require.NoError(t, srv.WriteCertificate(brokerCert))
	logFile := filepath.Join(t.TempDir(), "tap.jsonl")
	tapAddr, tapPool, stop := startTap(t, srv.Addr().String(), brokerCert, logFile)

	cliHooks := &frameRecorder{}
	ctx := t.Context()
	c, err := conn.Dial(ctx, tapAddr, &conn.Config{TLS: &tls.Config{RootCAs: tapPool}, TenantID: server.DemoTenant,
		Token: server.DemoToken, Hooks: cliHooks.hooks()})
	require.NoError(t, err)
	topic := felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "s"}
	var sent []string
	for i := range 4 {
		batch := [][]byte{fmt.Appendf(nil, "r%d-a", i), fmt.Appendf(nil, "r%d-b", i)}
		sent = append(sent, string(batch[0]), string(batch[1]))
		_, err := c.PublishBatch(ctx, topic, batch, conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartAt(0)})
	require.NoError(t, err)
	var got []string
	for range sent {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		got = append(got, string(ev.Payload))
	}
	require.Equal(t, sent, got)
	sub.Close()
	require.NoError(t, c.Close())
	// Every connection of the tap comes from the tap's one address: take
	// what the broker wrote to this client before another one connects.
	srvWritten := srvHooks.keysOf(true, false)
	// The CLI through the tap too (a second connection).
	code, out, errb := felixRun(t, "", "pub", "-addr", tapAddr, "-insecure", "-namespace", "ns", "s", "cli")
	require.Equal(t, 0, code, errb)
	require.Contains(t, out, "published 1 message(s)")
	stderr := stop()
	require.Contains(t, stderr, "frame(s) logged")

	lines := readTapLog(t, logFile)
	require.NotEmpty(t, lines)
	raw, err := os.ReadFile(logFile)
	require.NoError(t, err)
	require.NotContains(t, string(raw), server.DemoToken, "tokens never reach the log")
	byConnDir := map[string][]frameKey{}
	var auths int
	var loggedEvents []string
	for _, l := range lines {
		for _, k := range []string{"name", "time", "conn", "stream_id", "uni", "dir", "kind", "flags", "frame_hex"} {
			require.Contains(t, l, k)
		}
		_, err := time.Parse(time.RFC3339Nano, l["time"].(string))
		require.NoError(t, err)
		// `felix decode` of the line's frame reproduces the line's view.
		code, out, errb := felixRun(t, "", "decode", l["frame_hex"].(string))
		require.Equal(t, 0, code, errb)
		var want map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &want))
		for k, v := range want {
			if k != "name" {
				require.Equal(t, v, l[k], "member %s of %s", k, l["name"])
			}
		}
		if l["message_type"] == "auth" {
			require.Equal(t, []any{"token"}, l["redacted"])
			require.Contains(t, l["payload_json"], redactedToken)
			auths++
			continue // the redacted frame is not the wire frame
		}
		fb, err := hex.DecodeString(l["frame_hex"].(string))
		require.NoError(t, err)
		h, err := felix.ParseHeader(fb)
		require.NoError(t, err)
		key := fmt.Sprintf("%v/%v", l["conn"], l["dir"])
		byConnDir[key] = append(byConnDir[key], frameKey{int64(l["stream_id"].(float64)), h.Flags, len(fb)})
		if l["kind"] == "binary_event_batch" {
			for _, p := range l["payloads_utf8"].([]any) {
				loggedEvents = append(loggedEvents, p.(string))
			}
		}
	}
	require.Equal(t, sent, loggedEvents, "the event batches logged are the ones delivered")
	require.Equal(t, 3, auths, "two streams of the conn client, one of the CLI")
	// Connection 1 (the conn client): the frames the client wrote and read,
	// stream by stream, are the ones logged (auth frames aside).
	require.Equal(t, byStream(cliHooks.keysOf(true, true)), byStream(byConnDir["1/c2b"]))
	require.Equal(t, byStream(cliHooks.keysOf(false, true)), byStream(byConnDir["1/b2c"]))
	// And what the broker wrote to connection 1 is what the client read.
	require.Equal(t, byStream(cliHooks.keysOf(false, false)), byStream(srvWritten))
}

type frameKey struct {
	sid    int64
	flags  felix.Flags
	nbytes int
}

// frameRecorder records FrameRead/FrameWritten hooks.
type frameRecorder struct {
	mu   sync.Mutex
	read []conn.FrameInfo
	writ []conn.FrameInfo
}

func (r *frameRecorder) hooks() *conn.Hooks {
	return &conn.Hooks{
		FrameRead:    func(e conn.FrameInfo) { r.mu.Lock(); r.read = append(r.read, e); r.mu.Unlock() },
		FrameWritten: func(e conn.FrameInfo) { r.mu.Lock(); r.writ = append(r.writ, e); r.mu.Unlock() },
	}
}

// keysOf returns the frames written (or read); skipAuth drops the first
// frame a client writes on each stream (its auth, logged redacted).
func (r *frameRecorder) keysOf(written, skipAuth bool) []frameKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.read
	if written {
		evs = r.writ
	}
	first := map[int64]bool{}
	var out []frameKey
	for _, e := range evs {
		if skipAuth && written && !first[e.StreamID] {
			first[e.StreamID] = true
			continue
		}
		out = append(out, frameKey{e.StreamID, e.Flags, e.Bytes})
	}
	return out
}

// byStream groups frames by stream, keeping their order within a stream.
func byStream(keys []frameKey) map[int64][]frameKey {
	out := map[int64][]frameKey{}
	for _, k := range keys {
		out[k.sid] = append(out[k.sid], k)
	}
	return out
}

// -dir and -kind select the lines; help lists the tap's flags and only the
// environment variables it reads.
func TestTapFiltersAndHelp(t *testing.T) {
	b := startTestBroker(t) // -addr ADDR -cert FILE
	logFile := filepath.Join(t.TempDir(), "tap.jsonl")
	tapAddr, _, stop := startTap(t, b[1], b[3], logFile, "-dir", "b2c", "-kind", "binary_publish_ack,auth_ok")
	code, _, errb := felixRun(t, "", "pub", "-addr", tapAddr, "-insecure", "s", "one", "two")
	require.Equal(t, 0, code, errb)
	stop()
	lines := readTapLog(t, logFile)
	var kinds []string
	for _, l := range lines {
		require.Equal(t, "b2c", l["dir"])
		k := l["kind"].(string)
		if mt, ok := l["message_type"].(string); ok {
			k = mt
		}
		kinds = append(kinds, k)
	}
	require.Equal(t, []string{"auth_ok", "binary_publish_ack", "binary_publish_ack"}, kinds)

	code, out, _ := felixRun(t, "", "help", "tap")
	require.Equal(t, 0, code)
	for _, want := range []string{"-listen", "-addr", "-cert", "-cert-out", "-addr-out", "-o", "-dir", "-kind", "FELIX_ADDR", "FELIX_CERT", "SSLKEYLOGFILE", "REDACTED"} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "FELIX_TOKEN", "tap reads no token")
	code, out2, _ := felixRun(t, "", "tap", "-h")
	require.Equal(t, 0, code)
	require.Equal(t, out, out2)
	code, _, errb = felixRun(t, "", "tap", "-dir", "sideways")
	require.Equal(t, 2, code)
	require.Contains(t, errb, "-dir")
}

// The tap verifies the broker: a broker whose certificate is not the one
// in -cert is refused, and the client is told why.
func TestTapVerifiesBroker(t *testing.T) {
	b := startTestBroker(t)
	other := startTestBroker(t) // another certificate
	logFile := filepath.Join(t.TempDir(), "tap.jsonl")
	tapAddr, _, stop := startTap(t, b[1], other[3], logFile)
	code, _, errb := felixRun(t, "", "pub", "-addr", tapAddr, "-insecure", "s", "one")
	require.Equal(t, 1, code)
	require.Contains(t, errb, "relay: cannot connect to the broker")
	stderr := stop()
	require.Contains(t, stderr, "cannot connect to the broker")
	require.Contains(t, stderr, "0 frame(s) logged")
}
