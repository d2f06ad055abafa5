package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flxproto/felix/conn"
	"github.com/stretchr/testify/require"
)

// SSLKEYLOGFILE makes the broker append every connection's TLS secrets in
// NSS key log format, with a warning in its log.
// Standalone and as a cluster (-nodes).
func TestBrokerCommandKeyLog(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { testKeyLog(t) })
	t.Run("cluster", func(t *testing.T) { testKeyLog(t, "-nodes", "2") })
}

func testKeyLog(t *testing.T, extra ...string) {
	dir := t.TempDir()
	certFile, addrFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "addr"), filepath.Join(dir, "keys.log")
	args := append([]string{"-addr", "127.0.0.1:0", "-cert-out", certFile, "-addr-out", addrFile, "-tokens", "t1:secret"}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FELIX_BROKER_MAIN=1", "SSLKEYLOGFILE="+keyFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	addr := waitForFile(t, addrFile, exited, &stderr)
	pem, err := os.ReadFile(certFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	c, err := conn.Dial(t.Context(), addr, &conn.Config{TLS: &tls.Config{RootCAs: pool}, TenantID: "t1", Token: "secret"})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-exited, stderr.String())
	require.Contains(t, stderr.String(), "level=WARN msg=\"TLS key log on")
	text, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	for _, label := range []string{"CLIENT_HANDSHAKE_TRAFFIC_SECRET ", "SERVER_HANDSHAKE_TRAFFIC_SECRET ",
		"CLIENT_TRAFFIC_SECRET_0 ", "SERVER_TRAFFIC_SECRET_0 "} {
		require.Equal(t, 1, strings.Count(string(text), label), label)
	}
}
