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

// Every flag is checked before anything listens, and a flag that a
// cluster would ignore is refused instead.
func TestBrokerFlagsRefusedBeforeListening(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-max-conns", "-5"}, "-max-conns -5"},
		{[]string{"-max-streams", "0"}, "-max-streams 0"},
		{[]string{"-max-unauth-streams", "0"}, "-max-unauth-streams 0"},
		{[]string{"-conn-inflight-bytes", "0"}, "-conn-inflight-bytes 0"},
		{[]string{"-nodes", "-1"}, "-nodes -1"},
		{[]string{"-stats", "127.0.0.1:99999"}, "-stats"},
		{[]string{"-nodes", "3", "-control", "8.8.8.8:80"}, "loopback"},
		{[]string{"-nodes", "3", "-stream", "bad"}, "want tenant/namespace/name"},
		{[]string{"-nodes", "3", "-max-conns", "10", "-strict"}, "-max-conns, -strict: not supported with -nodes"},
	} {
		err := run(append([]string{"-addr", "127.0.0.1:0"}, tc.args...))
		require.ErrorContains(t, err, tc.want, tc.args)
	}
}

// -h lists the environment variables the broker reads.
func TestBrokerHelpListsEnvironment(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-h")
	cmd.Env = append(os.Environ(), "FELIX_BROKER_MAIN=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	for _, s := range []string{"-max-conns", "(default 8192)", "FELIX_TOKENS ", "FELIX_TOKENS_FILE", "SSLKEYLOGFILE"} {
		require.Contains(t, string(out), s)
	}
}
