package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/conn"
	"github.com/stretchr/testify/require"
)

// -nodes serves a cluster, writes the fixture once ready, and stops on
// SIGTERM with exit status 0.
func TestBrokerCommandCluster(t *testing.T) {
	dir := t.TempDir()
	fx := filepath.Join(dir, "f.json")
	cmd := exec.Command(os.Args[0], "-nodes", "2", "-fixture-out", fx, "-control", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "FELIX_BROKER_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var f conformance.Fixture
	require.NoError(t, json.Unmarshal([]byte(waitForFile(t, fx, exited, &stderr)), &f))
	require.Len(t, f.Addrs, 2)
	require.NotEmpty(t, f.ControlURL)
	require.NotEmpty(t, f.LinkAddr)
	pem, err := os.ReadFile(f.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	for _, a := range append(f.Addrs, f.LinkAddr) {
		c, err := conn.Dial(t.Context(), a, &conn.Config{TLS: &tls.Config{RootCAs: pool}, TenantID: f.TenantID, Token: f.Token})
		require.NoError(t, err)
		_, err = c.Publish(t.Context(), conn.Topic{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.LinkStream},
			[]byte("x"), conn.PublishOptions{Ack: felix.AckPerMessage})
		require.NoError(t, err, a)
		require.NoError(t, c.Close())
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-exited, stderr.String())
}

func TestClusterFlagsNeedNodes(t *testing.T) {
	require.Error(t, run([]string{"-fixture-out", "x.json"}))
	require.Error(t, run([]string{"-control", "127.0.0.1:0"}))
}
