package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// brokerProc is a broker command running as a child process.
type brokerProc struct {
	addr   string
	pool   *x509.CertPool
	lines  chan string // stderr, line by line; closed when the process ends
	exited chan error
	cmd    *exec.Cmd
}

// startBroker runs the broker command with args and extra environment
// variables (FELIX_TOKENS* are cleared first, so the test's own
// environment does not leak in).
func startBroker(t *testing.T, env []string, args ...string) *brokerProc {
	t.Helper()
	dir := t.TempDir()
	certFile, addrFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "addr")
	cmd := exec.Command(os.Args[0], append([]string{"-addr", "127.0.0.1:0", "-cert-out", certFile, "-addr-out", addrFile}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FELIX_TOKENS") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(cmd.Env, "FELIX_BROKER_MAIN=1"), env...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	b := &brokerProc{lines: make(chan string, 1024), exited: make(chan error, 1), cmd: cmd}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			b.lines <- sc.Text()
		}
		close(b.lines) // all reads before Wait
		b.exited <- cmd.Wait()
	}()
	b.addr = waitForFile(t, addrFile, b.exited, new(bytes.Buffer))
	pem, err := os.ReadFile(certFile)
	require.NoError(t, err)
	b.pool = x509.NewCertPool()
	require.True(t, b.pool.AppendCertsFromPEM(pem))
	return b
}

// dial connects with token and publishes one acknowledged record.
func (b *brokerProc) publish(t *testing.T, token string) error {
	t.Helper()
	ctx := t.Context()
	c, err := conn.Dial(ctx, b.addr, &conn.Config{TLS: &tls.Config{RootCAs: b.pool}, TenantID: "t1", Token: token})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Publish(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}, []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
	return err
}

// stop sends SIGTERM and requires a clean exit; it returns the rest of the log.
func (b *brokerProc) stop(t *testing.T) string {
	t.Helper()
	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	var rest strings.Builder
	for l := range b.lines {
		rest.WriteString(l + "\n")
	}
	require.NoError(t, <-b.exited, rest.String())
	return rest.String()
}

// Tokens come from the environment: FELIX_TOKENS_FILE names a token file
// (and wins over FELIX_TOKENS), FELIX_TOKENS holds the list itself; the
// demo token is then not accepted.
func TestBrokerCommandTokensFromEnvironment(t *testing.T) {
	t.Run("FELIX_TOKENS_FILE", func(t *testing.T) {
		tokFile := filepath.Join(t.TempDir(), "tokens")
		require.NoError(t, os.WriteFile(tokFile, []byte("# from the environment\nt1:file-token:alice\n"), 0o600))
		b := startBroker(t, []string{"FELIX_TOKENS_FILE=" + tokFile, "FELIX_TOKENS=t1:env-token"})
		require.NoError(t, b.publish(t, "file-token"))
		require.Error(t, b.publish(t, "env-token"), "the file wins over FELIX_TOKENS")
		require.Error(t, b.publish(t, "demo-token"))
		logs := b.stop(t)
		require.NotContains(t, logs, "env-token", "tokens are never logged")
	})
	t.Run("FELIX_TOKENS", func(t *testing.T) {
		b := startBroker(t, []string{"FELIX_TOKENS=t1:env-token:erin"})
		require.NoError(t, b.publish(t, "env-token"))
		require.Error(t, b.publish(t, "demo-token"))
		b.stop(t)
	})
	t.Run("unreadable FELIX_TOKENS_FILE", func(t *testing.T) {
		cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "FELIX_BROKER_MAIN=1", "FELIX_TOKENS_FILE="+filepath.Join(t.TempDir(), "missing"))
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "a missing token file stops the broker before it listens")
		require.Contains(t, string(out), "missing")
	})
}

// -stats-log writes one "broker stats" line per interval with the broker's
// figures; a connected client shows in open_connections.
func TestBrokerCommandStatsLog(t *testing.T) {
	b := startBroker(t, nil, "-stats-log", "20ms")
	ctx := t.Context()
	c, err := conn.Dial(ctx, b.addr, &conn.Config{TLS: &tls.Config{RootCAs: b.pool}, TenantID: "t1", Token: "demo-token"})
	require.NoError(t, err)
	_, err = c.Publish(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}, []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	var line string
	for l := range b.lines {
		if strings.Contains(l, `msg="broker stats"`) && strings.Contains(l, "open_connections=1 ") && strings.Contains(l, "streams=1 ") {
			line = l
			break
		}
	}
	require.NotEmpty(t, line, "a stats line with the client's connection and stream")
	for _, k := range []string{"caches=", "subscriptions=", "queued_bytes=", "log_bytes=", "cache_log_bytes=", "cache_live_bytes=",
		"producer_states=", "auth_failures=0", "auth_throttled=0", "goroutines=", "heap_alloc=", "sys="} {
		require.Contains(t, line, k)
	}
	c.Close()
	b.stop(t)
}
