package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// Tokens come from a file (not the command line), scoped tokens are
// enforced, and -stats serves the broker's figures as JSON on loopback.
func TestBrokerCommandTokensFileAndStats(t *testing.T) {
	dir := t.TempDir()
	certFile, addrFile, tokFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "addr"), filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokFile, []byte("# tenants\nt1:secret:alice\nt1:ro:rita:subscribe\n"), 0o600))
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-cert-out", certFile, "-addr-out", addrFile,
		"-tokens-file", tokFile, "-stats", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "FELIX_BROKER_MAIN=1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	// The stats URL is logged before serving starts.
	sc := bufio.NewScanner(stderr)
	var url string
	for url == "" && sc.Scan() {
		if _, after, ok := strings.Cut(sc.Text(), "msg=\"stats endpoint\" url="); ok {
			url = strings.Fields(after)[0]
		}
	}
	require.NotEmpty(t, url, "stats endpoint logged")
	rest := make(chan string, 1)
	exited := make(chan error, 1)
	go func() {
		b, _ := io.ReadAll(stderr) // all reads before Wait
		rest <- string(b)
		exited <- cmd.Wait()
	}()
	addr := waitForFile(t, addrFile, exited, new(bytes.Buffer))
	pem, err := os.ReadFile(certFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	ctx := t.Context()
	topic := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}
	ro, err := conn.Dial(ctx, addr, &conn.Config{TLS: &tls.Config{RootCAs: pool}, TenantID: "t1", Token: "ro"})
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.Publish(ctx, topic, []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
	_, err = conn.Dial(ctx, addr, &conn.Config{TLS: &tls.Config{RootCAs: pool}, TenantID: "t1", Token: "guess"})
	require.Error(t, err)

	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var snap server.Snapshot
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&snap))
	require.GreaterOrEqual(t, snap.OpenConnections, int64(1))
	require.Positive(t, snap.HeapAlloc)
	require.Positive(t, snap.Goroutines)
	require.Equal(t, uint64(1), snap.AuthFailures)

	// /metrics beside /stats: the Prometheus text format, fed by conn's
	// hooks (examples/metrics).
	// The refusal's hook runs after the refusal is written: wait for it.
	metricsText := func() string {
		mresp, err := http.Get(strings.TrimSuffix(url, "/stats") + "/metrics")
		require.NoError(t, err)
		defer mresp.Body.Close()
		require.Equal(t, http.StatusOK, mresp.StatusCode)
		mb, err := io.ReadAll(mresp.Body)
		require.NoError(t, err)
		return string(mb)
	}
	refused := `felix_streams_refused_total{reason="unauthenticated",side="server"} 1`
	mt := metricsText()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(mt, refused) {
		select {
		case <-ctx.Done():
			t.Fatalf("no %s in\n%s", refused, mt)
		case <-tick.C:
		}
		mt = metricsText()
	}
	for _, want := range []string{
		`felix_connections_opened_total{side="server"} 2`,
		`felix_streams_authenticated_total{side="server"} 1`,
		`felix_frames_total{direction="read",layout="binary_acked_publish_batch",side="server"} 1`,
	} {
		require.Contains(t, mt, want)
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	logs := <-rest
	require.NoError(t, <-exited, logs)
	require.Contains(t, logs, "level=WARN msg=\"auth refused\"")
	require.NotContains(t, logs, "guess", "tokens are never logged")
}
