package cluster

import (
	"context"
	"net/http"
	"time"

	"github.com/flxproto/felix/internal/broker/server"
)

// Snapshot is a cluster's stats endpoint document: one entry per node, in
// node order. The figures are per node, not aggregated: each running
// node's Stats is its server's Snapshot, whose server counters
// (connections, streams, requests, auth failures, ...) and
// OpenConnections are the node's own, and restart from zero when the node
// is restarted. The engine figures (Streams, Caches, the byte gauges,
// Stats.Engine) are the shared engine's and the memory figures the
// process's, the same in every entry: do not sum them.
type Snapshot struct {
	Nodes []NodeSnapshot
	Time  time.Time
}

// NodeSnapshot is one node's entry of a Snapshot.
type NodeSnapshot struct {
	// Node is the node id (the "node" label of the cluster's metrics),
	// Addr its client address.
	Node, Addr string
	Alive      bool
	// Stats is the node's server snapshot; nil while the node is down.
	Stats *server.Snapshot
}

// Snapshot returns every node's figures now. It reads runtime.MemStats
// once per running node: call it at a human pace.
func (c *Cluster) Snapshot() Snapshot {
	c.mu.Lock()
	out := Snapshot{Nodes: make([]NodeSnapshot, len(c.nodes))}
	srvs := make([]*server.Server, len(c.nodes))
	for i, n := range c.nodes {
		out.Nodes[i] = NodeSnapshot{Node: n.id, Addr: n.public(), Alive: n.alive}
		if n.alive {
			srvs[i] = n.srv
		}
	}
	c.mu.Unlock()
	for i, srv := range srvs {
		if srv != nil {
			st := srv.Snapshot()
			out.Nodes[i].Stats = &st
		}
	}
	out.Time = time.Now().UTC()
	return out
}

// StatsHandler serves Snapshot as JSON (GET only); serve it with
// server.ServeStatsHandler.
func (c *Cluster) StatsHandler() http.Handler {
	return server.JSONHandler(func() any { return c.Snapshot() })
}

// LogStats logs one "broker stats" line per running node (with its node
// id) at info level every interval until ctx ends.
func (c *Cluster) LogStats(ctx context.Context, every time.Duration) {
	server.Every(ctx, every, func() {
		for i := range c.nodes {
			if srv := c.Server(i); srv != nil {
				srv.LogSnapshot(ctx)
			}
		}
	})
}
