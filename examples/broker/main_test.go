package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	pemenc "encoding/pem"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/webpki"
)

// TestMain lets the test binary act as the broker command when re-executed
// with FELIX_BROKER_MAIN=1 (the signal test runs it as a child process).
func TestMain(m *testing.M) {
	if os.Getenv("FELIX_BROKER_MAIN") == "1" {
		if err := run(os.Args[1:]); err != nil {
			os.Stderr.WriteString("broker: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// waitForFile waits until the broker process wrote path (atomically) and
// returns its trimmed content; it fails the test if the process exits
// first (exited receives the result of its Wait).
func waitForFile(t *testing.T, path string, exited <-chan error, stderr *bytes.Buffer) string {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			return strings.TrimSpace(string(b))
		}
		select {
		case err := <-exited:
			t.Fatalf("broker exited (%v) before writing %s: %s", err, path, stderr.String())
		case <-tick.C:
		}
	}
}

// The broker command serves clients with its exported certificate and, on
// SIGTERM, shuts down gracefully: connections closed with code 0, exit 0.
func TestBrokerCommandSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			certFile, addrFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "addr")
			// Port 0: the broker picks a free port and reports it, so no
			// other process can take the port between choice and bind.
			cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-cert-out", certFile, "-addr-out", addrFile,
				"-tokens", "t1:secret:alice", "-stream", "t1/ns/keyed:durable:shards=2")
			cmd.Env = append(os.Environ(), "FELIX_BROKER_MAIN=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			defer cmd.Process.Kill()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			addr := waitForFile(t, addrFile, exited, &stderr)
			pem, err := os.ReadFile(certFile) // complete: written before the address
			require.NoError(t, err)
			pool := x509.NewCertPool()
			require.True(t, pool.AppendCertsFromPEM(pem))
			ctx := t.Context()
			c, err := conn.Dial(ctx, addr, &conn.Config{TLS: &tls.Config{RootCAs: pool}, TenantID: "t1", Token: "secret",
				Flags: felix.DefaultClientFlags() | felix.FlagEventBatchPublisher})
			require.NoError(t, err)
			defer c.Close()
			// With rustls/webpki semantics (the certificate must not be a
			// CA), with only the PEM as trust anchor.
			block, _ := pemenc.Decode(pem)
			require.NotNil(t, block)
			wv, err := webpki.New(block.Bytes)
			require.NoError(t, err)
			rc, err := conn.Dial(ctx, addr, &conn.Config{TLS: &tls.Config{InsecureSkipVerify: true,
				VerifyPeerCertificate: wv.VerifyPeerCertificate("localhost")}, TenantID: "t1", Token: "secret"})
			require.NoError(t, err, "webpki-style verification of the -cert-out certificate")
			require.NoError(t, rc.Close())
			topic := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "orders"}
			sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{})
			require.NoError(t, err)
			res, err := c.Publish(ctx, topic, []byte("hi"), conn.PublishOptions{Ack: felix.AckPerBatch})
			require.NoError(t, err)
			require.True(t, res.HasOffset, "streams are durable by default")
			ev, err := sub.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, "alice", string(ev.Publisher), "the token's principal")

			require.NoError(t, cmd.Process.Signal(sig))
			require.NoError(t, <-exited, stderr.String())
			select {
			case <-c.Context().Done():
			case <-time.After(10 * time.Second):
				t.Fatal("connection still open")
			}
			var ae *quic.ApplicationError
			require.True(t, errors.As(context.Cause(c.Context()), &ae))
			require.Equal(t, quic.ApplicationErrorCode(0), ae.ErrorCode)
			require.Contains(t, stderr.String(), "broker stopped")
		})
	}
}

func TestParseStreamSpec(t *testing.T) {
	def := engine.StreamConfig{Durable: true, Shards: 1, RetainRecords: 10}
	tp, c, err := ParseStreamSpec("t1/ns/s:ephemeral:shards=4:retain=5:retain-bytes=100", def)
	require.NoError(t, err)
	require.Equal(t, engine.Topic{Tenant: "t1", Namespace: "ns", Stream: "s"}, tp)
	require.Equal(t, engine.StreamConfig{Durable: false, Shards: 4, RetainRecords: 5, RetainBytes: 100}, c)
	_, c, err = ParseStreamSpec("t1/ns/s", def)
	require.NoError(t, err)
	require.Equal(t, def, c)
	_, c, err = ParseStreamSpec("t1/ns/s:ephemeral:shards=8:routing=jump_hash:ring=64", def)
	require.NoError(t, err)
	require.Equal(t, engine.StreamConfig{Durable: false, Shards: 8, Routing: felix.RoutingJumpHash, RetainRecords: 10, RingRecords: 64}, c)
	_, c, err = ParseStreamSpec("t1/ns/s:routing=modulo", engine.StreamConfig{Routing: felix.RoutingJumpHash})
	require.NoError(t, err)
	require.Equal(t, felix.RoutingModulo, c.Routing)
	for _, bad := range []string{"t1/ns", "t1//s", "t1/ns/s:shards=0", "t1/ns/s:frob", "t1/ns/s:retain=-1", "t1/ns/s:durable=1",
		"t1/ns/s:routing=", "t1/ns/s:routing=ring", "t1/ns/s:ring=0", "t1/ns/s:routing"} {
		_, _, err := ParseStreamSpec(bad, def)
		require.Error(t, err, bad)
	}
}

func TestBadFlags(t *testing.T) {
	require.Error(t, run([]string{"-log-level", "loud"}))
	require.Error(t, run([]string{"-tokens", "nocolon"}))
	require.Error(t, run([]string{"-routing", "ring"}))
	require.Error(t, run([]string{"-ring-records", "0"}))
	require.Error(t, run([]string{"-cert", "/nonexistent.pem", "-key", "/nonexistent.key"}))
}

// Every flag is validated before the broker listens: with the port taken by
// someone else, a bad flag is still reported as itself, not as "address in
// use".
func TestFlagsValidatedBeforeListening(t *testing.T) {
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	addr := busy.LocalAddr().String()
	cases := map[string][]string{
		"-stream":             {"-stream", "t1/ns"},
		"shards=0":            {"-stream", "t1/ns/s:shards=0"},
		"-shards":             {"-shards", "0"},
		"-retain-records":     {"-retain-records", "-1"},
		"-queue-max":          {"-queue", "10", "-queue-max", "5"},
		"-max-subs-per-conn":  {"-max-subs-per-conn", "0"},
		"-drain":              {"-drain", "0s"},
		"-cert and -key":      {"-cert", "x.pem"},
		"unexpected argument": {"stray"},
	}
	for want, args := range cases {
		err := run(append([]string{"-addr", addr}, args...))
		require.Error(t, err, args)
		require.Contains(t, err.Error(), strings.Trim(want, "\""), args)
		require.NotContains(t, err.Error(), "address already in use", args)
	}
}
