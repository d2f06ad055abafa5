package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
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
		_, err = c.Publish(t.Context(), felix.Topic{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.LinkStream},
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
		{[]string{"-max-unauth-conns", "0"}, "-max-unauth-conns 0"},
		{[]string{"-nodes", "3", "-max-unauth-conns", "10"}, "-max-unauth-conns: not supported with -nodes"},
		{[]string{"-conn-inflight-bytes", "0"}, "-conn-inflight-bytes 0"},
		{[]string{"-nodes", "-1"}, "-nodes -1"},
		{[]string{"-stats", "127.0.0.1:99999"}, "-stats"},
		{[]string{"-nodes", "3", "-control", "8.8.8.8:80"}, "loopback"},
		{[]string{"-nodes", "3", "-stream", "bad"}, "want tenant/namespace/name"},
		{[]string{"-nodes", "3", "-max-conns", "10", "-strict"}, "-max-conns: not supported with -nodes"},
		{[]string{"-nodes", "3", "-cache", "t1/ns"}, "-cache \"t1/ns\": want tenant/namespace/name"},
		{[]string{"-cache", "t1//c"}, "want tenant/namespace/name"},
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
	for _, s := range []string{"-max-conns", "(default 8192)", "-max-unauth-conns", "(default 256)", "FELIX_TOKENS ", "FELIX_TOKENS_FILE", "SSLKEYLOGFILE"} {
		require.Contains(t, string(out), s)
	}
}

// -stats with -nodes serves the cluster's figures per node: /stats has one
// entry per node (its own server counters), /metrics labels every series
// with the node, and -stats-log logs one line per node.
func TestBrokerCommandClusterStats(t *testing.T) {
	b := startBroker(t, nil, "-nodes", "2", "-stream", "t1/ns/s", "-stats", "127.0.0.1:0", "-stats-log", "20ms")
	var url string
	for l := range b.lines {
		if _, after, ok := strings.Cut(l, "msg=\"stats endpoint\" url="); ok {
			url = strings.Fields(after)[0]
			break
		}
	}
	require.NotEmpty(t, url, "stats endpoint logged")
	getStats := func() cluster.Snapshot {
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var snap cluster.Snapshot
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&snap))
		return snap
	}
	snap := getStats()
	require.Len(t, snap.Nodes, 2)
	require.Equal(t, b.addr, snap.Nodes[0].Addr)

	// Node 0: one connection, one acknowledged publish. Node 1: one
	// refused auth (counted before the refusal is answered).
	require.NoError(t, b.publish(t, "demo-token"))
	_, err := conn.Dial(t.Context(), snap.Nodes[1].Addr, &conn.Config{TLS: &tls.Config{RootCAs: b.pool}, TenantID: "t1", Token: "guess"})
	require.Error(t, err)

	snap = getStats()
	for i, n := range snap.Nodes {
		require.Equal(t, "broker-"+strconv.Itoa(i), n.Node)
		require.True(t, n.Alive)
		require.NotNil(t, n.Stats)
		require.Equal(t, uint64(1), n.Stats.Connections, n.Node)
		require.Positive(t, n.Stats.Goroutines)
		require.Equal(t, snap.Nodes[0].Stats.Streams, n.Stats.Streams, "the shared engine's streams, in every entry")
	}
	require.Zero(t, snap.Nodes[0].Stats.AuthFailures)
	require.Positive(t, snap.Nodes[0].Stats.Requests)
	require.Equal(t, uint64(1), snap.Nodes[1].Stats.AuthFailures)
	require.Zero(t, snap.Nodes[1].Stats.Requests)

	// /metrics: the hooks of each node, labelled with its id. The refusal's
	// hook runs after the refusal is written: wait for it.
	metricsText := func() string {
		resp, err := http.Get(strings.TrimSuffix(url, "/stats") + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		mb, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(mb)
	}
	refused := `felix_streams_refused_total{node="broker-1",reason="unauthenticated",side="server"} 1`
	mt := metricsText()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(mt, refused) {
		select {
		case <-t.Context().Done():
			t.Fatalf("no %s in\n%s", refused, mt)
		case <-tick.C:
		}
		mt = metricsText()
	}
	for _, want := range []string{
		`felix_connections_opened_total{node="broker-0",side="server"} 1`,
		`felix_connections_opened_total{node="broker-1",side="server"} 1`,
		`felix_streams_authenticated_total{node="broker-0",side="server"} 1`,
		`felix_frames_total{direction="read",layout="binary_acked_publish_batch",node="broker-0",side="server"} 1`,
	} {
		require.Contains(t, mt, want)
	}
	require.NotContains(t, mt, `felix_streams_authenticated_total{node="broker-1"`)
	require.NotContains(t, mt, `felix_streams_refused_total{node="broker-0"`)

	// -stats-log: a line per node, naming it.
	seen := map[string]bool{}
	for l := range b.lines {
		if strings.Contains(l, `msg="broker stats"`) {
			for _, id := range []string{"broker-0", "broker-1"} {
				if strings.Contains(l, "node="+id+" ") {
					seen[id] = true
				}
			}
		}
		if len(seen) == 2 {
			break
		}
	}
	require.Len(t, seen, 2, "a stats line for each node")
	b.stop(t)
}
