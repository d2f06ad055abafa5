package cluster_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/stretchr/testify/require"
)

// Snapshot has one entry per node, nil figures for a killed node; the
// hooks of Config.Hooks are asked once per node and serve a restarted
// node on, so its counters run on.
func TestSnapshotPerNodeAndHooksAcrossRestart(t *testing.T) {
	var asked []string
	opened := make([]atomic.Int64, 2)
	c := start(t, cluster.Config{Nodes: 2, Hooks: func(i int, id string) *conn.Hooks {
		asked = append(asked, id)
		return &conn.Hooks{ConnOpened: func(conn.ConnInfo) { opened[i].Add(1) }}
	}})
	require.Equal(t, []string{"broker-0", "broker-1"}, asked)

	dial(t, c, c.Addr(1), nil)
	snap := c.Snapshot()
	require.Len(t, snap.Nodes, 2)
	for i, n := range snap.Nodes {
		require.Equal(t, c.NodeID(i), n.Node)
		require.Equal(t, c.Addr(i), n.Addr)
		require.True(t, n.Alive)
		require.NotNil(t, n.Stats)
	}
	require.Zero(t, snap.Nodes[0].Stats.Connections)
	require.Equal(t, uint64(1), snap.Nodes[1].Stats.Connections)
	require.Equal(t, int64(1), opened[1].Load())

	require.NoError(t, c.Kill(1))
	snap = c.Snapshot()
	require.False(t, snap.Nodes[1].Alive)
	require.Nil(t, snap.Nodes[1].Stats)
	require.NoError(t, c.Restart(1))
	cl := dial(t, c, c.Addr(1), nil)
	_, err := cl.Publish(ctxT(t), topic(c, cluster.LinkStream), []byte("x"), conn.PublishOptions{Ack: felix.AckPerMessage})
	require.NoError(t, err)
	require.Len(t, asked, 2, "hooks asked once per node")
	require.Equal(t, int64(2), opened[1].Load(), "the restarted node reports to the same hooks")
	snap = c.Snapshot()
	require.Equal(t, uint64(1), snap.Nodes[1].Stats.Connections, "a restarted node's server counters start afresh")
	require.Zero(t, opened[0].Load())
}

// Read the per-node figures of a cluster: what the broker command's
// -stats serves with -nodes (Cluster.StatsHandler).
func ExampleCluster_Snapshot() {
	c, err := cluster.Start(context.Background(), cluster.Config{Nodes: 2})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	for _, n := range c.Snapshot().Nodes {
		fmt.Println(n.Node, n.Alive, n.Stats.OpenConnections)
	}
	// Output:
	// broker-0 true 0
	// broker-1 true 0
}
