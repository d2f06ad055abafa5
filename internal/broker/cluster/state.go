package cluster

import (
	"cmp"
	"slices"

	"github.com/flxproto/felix/internal/broker/engine"
)

// MaxStateShards bounds the shards a State lists (State.ShardsTotal counts
// them all): streams created on first use place shards without bound
// other than the engine's per-tenant limits.
const MaxStateShards = 4096

// State is the cluster as its control endpoint's GET /state shows it.
type State struct {
	// Nodes are every node, in node order.
	Nodes []NodeState `json:"nodes"`
	// Link is the interposer and the faults in force on it.
	Link LinkState `json:"link"`
	// Shards are the placed stream and cache shards, ordered by kind,
	// tenant, namespace, name and shard; at most MaxStateShards of them.
	// A shard is placed when it is declared or first routed (publish,
	// subscribe, read, watch, shard_owners), so a cache only ever read and
	// written through one node may not appear yet.
	Shards []ShardState `json:"shards"`
	// ShardsTotal counts every placed shard, listed or not.
	ShardsTotal int `json:"shards_total"`
}

// NodeState is one node of a State.
type NodeState struct {
	Node string `json:"node"`
	Addr string `json:"addr"`
	// Alive is false between Kill and Restart.
	Alive bool `json:"alive"`
	// Partitioned is true while Partition cuts the node off from the
	// quorum stream's replicas.
	Partitioned bool `json:"partitioned"`
}

// LinkState is the interposer of a State.
type LinkState struct {
	// Addr is the interposer's address, Node the node behind it.
	Addr string `json:"addr"`
	Node string `json:"node"`
	// DropMs and StallMs are how long the drop and the stall in force
	// still last, in milliseconds (0: none).
	DropMs  int64 `json:"drop_ms"`
	StallMs int64 `json:"stall_ms"`
}

// ShardState is one shard's placement in a State.
type ShardState struct {
	// Kind is "stream" or "cache" (a cache has one shard, 0).
	Kind      string `json:"kind"`
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Shard     uint32 `json:"shard"`
	// Owner is the owning node's id and Generation the shard's placement
	// generation; OwnerAlive is false while the owner is down (the shard
	// then moves or is refused owner_unavailable).
	Owner      string `json:"owner"`
	OwnerAlive bool   `json:"owner_alive"`
	Generation uint64 `json:"generation"`
	// MovingTo names the node a fenced shard moves to (empty when none).
	MovingTo string `json:"moving_to,omitempty"`
}

// CreateStream declares a stream in the shared engine (its shards are
// listed by State from now on). It fails as engine.Engine.CreateStream.
func (c *Cluster) CreateStream(t engine.Topic, sc engine.StreamConfig) error {
	if err := c.eng.CreateStream(t, sc); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range max(sc.Shards, 1) {
		c.decls = append(c.decls, streamKey(t.Tenant, t.Namespace, t.Stream, s))
	}
	return nil
}

// CreateCache declares a cache in the shared engine (listed by State from
// now on).
func (c *Cluster) CreateCache(r engine.CacheRef) {
	c.eng.CreateCache(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.decls = append(c.decls, cacheKey(r.Tenant, r.Namespace, r.Cache))
}

// State returns the cluster's state now: nodes, faults, shard owners.
// Declared shards not placed yet are placed first.
func (c *Cluster) State() State {
	drop, stall := c.link.Held()
	c.mu.Lock()
	defer c.mu.Unlock()
	st := State{Link: LinkState{Addr: c.link.Addr().String(), Node: c.nodes[c.linkN].id,
		DropMs: drop.Milliseconds(), StallMs: stall.Milliseconds()}}
	for _, n := range c.nodes {
		st.Nodes = append(st.Nodes, NodeState{Node: n.id, Addr: n.public(), Alive: n.alive})
	}
	for i := range c.parted {
		st.Nodes[i].Partitioned = true
	}
	if !c.closed {
		for _, k := range c.decls {
			c.assignLocked(k)
		}
	}
	keys := make([]shardKey, 0, len(c.shards))
	for k := range c.shards {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b shardKey) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.ns, b.ns),
			cmp.Compare(a.name, b.name), cmp.Compare(a.shard, b.shard))
	})
	st.ShardsTotal = len(keys)
	st.Shards = make([]ShardState, 0, min(len(keys), MaxStateShards))
	for _, k := range keys[:min(len(keys), MaxStateShards)] {
		a := c.shards[k]
		s := ShardState{Kind: string(k.kind), Tenant: k.tenant, Namespace: k.ns, Name: k.name, Shard: k.shard,
			Owner: c.nodes[a.owner].id, OwnerAlive: c.nodes[a.owner].alive, Generation: a.gen}
		if a.fence != nil {
			s.MovingTo = c.nodes[a.fence.to].id
		}
		st.Shards = append(st.Shards, s)
	}
	return st
}
