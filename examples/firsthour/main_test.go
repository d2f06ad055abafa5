package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
)

// startCluster starts a three-node reference cluster with the programs'
// streams declared and its control endpoint served, as the command in
// main.go's doc does, and returns its fixture file.
func startCluster(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := cluster.Start(ctx, cluster.Config{Nodes: 3})
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	tn, ns := cluster.DefaultTenant, cluster.DefaultNamespace
	require.NoError(t, cl.CreateStream(engine.Topic{Tenant: tn, Namespace: ns, Stream: "events"}, engine.StreamConfig{Durable: true, Shards: 6}))
	require.NoError(t, cl.CreateStream(engine.Topic{Tenant: tn, Namespace: ns, Stream: ordersStream}, engine.StreamConfig{Durable: true, Shards: 1}))
	_, err = cl.ServeControl("127.0.0.1:0")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "fixture.json")
	require.NoError(t, cl.WriteFixture(path))
	return path
}

// The stream program runs clean: every acknowledged record is delivered
// once, on its shard, through six node kills (a smaller run than main's
// 100k).
func TestStreamThroughNodeKills(t *testing.T) {
	path := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fx, err := loadFixture(path)
	require.NoError(t, err)
	rep, err := streamRun(ctx, fx, streamOptions{stream: "events", records: 12_000, kills: 6, batch: 100}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, 12_000, rep.acked)
	require.Equal(t, rep.acked, rep.delivered)
	require.Equal(t, 6, rep.kills)
	require.Len(t, rep.perShard, 6)
	sum := 0
	for s, n := range rep.perShard {
		require.Positive(t, n, "shard %d got records", s)
		sum += n
	}
	require.Equal(t, rep.acked, sum)
}

// The cache and orders programs run clean from the command line, and say
// so for every check they make.
func TestCacheAndOrdersPrograms(t *testing.T) {
	path := startCluster(t)
	for _, tc := range []struct {
		program string
		checks  int
		last    string
	}{
		{"cache", 12, "no expiry and no counter events"},
		{"orders", 16, "a call after Close: client.ErrClosed"},
	} {
		t.Run(tc.program, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out bytes.Buffer
			require.NoError(t, run(ctx, []string{"-fixture", path, tc.program}, &out), out.String())
			require.Equal(t, tc.checks, strings.Count("\n"+out.String(), "\nok: "), out.String())
			require.Contains(t, out.String(), tc.last)
		})
	}
}

// A wrong command line says what to write.
func TestUsage(t *testing.T) {
	ctx := context.Background()
	require.ErrorContains(t, run(ctx, nil, &bytes.Buffer{}), "usage: firsthour -fixture FILE")
	path := startCluster(t)
	require.ErrorContains(t, run(ctx, []string{"-fixture", path, "nope"}, &bytes.Buffer{}), `unknown program "nope"`)
	require.ErrorContains(t, run(ctx, []string{"-fixture", filepath.Join(t.TempDir(), "none.json"), "cache"}, &bytes.Buffer{}), "none.json")
}
