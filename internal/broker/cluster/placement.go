package cluster

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/interposer"
	"github.com/flxproto/felix/internal/broker/server"
)

// shardKey names one shard of a stream or cache.
type shardKey struct {
	kind             felix.ShardKind
	tenant, ns, name string
	shard            uint32
}

func streamKey(tenant, ns, name string, shard uint32) shardKey {
	return shardKey{kind: felix.ShardKindStream, tenant: tenant, ns: ns, name: name, shard: shard}
}

func cacheKey(tenant, ns, name string) shardKey {
	return shardKey{kind: felix.ShardKindCache, tenant: tenant, ns: ns, name: name}
}

// assignment is a shard's place in the cluster map.
type assignment struct {
	owner  int
	gen    uint64
	moved  context.Context // cancelled when the shard leaves owner
	cancel context.CancelFunc
	fence  *fence // a planned move in progress
}

// fence is a planned move: the shard is refused until it cuts over to to.
type fence struct {
	to    int
	timer *time.Timer
}

// ErrPlacement is returned by Fence and Partition when the request cannot
// be carried out (unknown stream, no node to move to, a move already in
// progress).
var ErrPlacement = fmt.Errorf("cluster: placement")

// homeLocked is where a shard is placed first: its pinned node, else a
// hash of its name and index over the nodes.
func (c *Cluster) homeLocked(k shardKey) int {
	if h, ok := c.homes[k]; ok {
		return h
	}
	f := fnv.New64a()
	_, _ = f.Write([]byte(string(k.kind) + "\x00" + k.tenant + "\x00" + k.ns + "\x00" + k.name + "\x00" +
		strconv.FormatUint(uint64(k.shard), 10)))
	return int(f.Sum64() % uint64(len(c.nodes)))
}

// nextAliveLocked is the first live node after from (wrapping), other than
// from itself; -1 when there is none.
func (c *Cluster) nextAliveLocked(from int) int {
	for d := 1; d < len(c.nodes); d++ {
		if j := (from + d) % len(c.nodes); c.nodes[j].alive {
			return j
		}
	}
	return -1
}

// survivorLocked is where a shard goes when its owner dies: its home if
// that is alive, else the next live node after its owner.
func (c *Cluster) survivorLocked(k shardKey) int {
	if h := c.homeLocked(k); c.nodes[h].alive {
		return h
	}
	if a := c.shards[k]; a != nil {
		return c.nextAliveLocked(a.owner)
	}
	return c.nextAliveLocked(c.homeLocked(k))
}

// assignLocked returns k's assignment, placing it on first use.
func (c *Cluster) assignLocked(k shardKey) *assignment {
	if a := c.shards[k]; a != nil {
		return a
	}
	owner := c.homeLocked(k)
	if !c.nodes[owner].alive {
		if s := c.nextAliveLocked(owner); s >= 0 {
			owner = s
		}
	}
	a := &assignment{owner: owner, gen: 1}
	a.moved, a.cancel = context.WithCancel(context.Background())
	c.shards[k] = a
	return a
}

// cutoverLocked moves a shard to node to (no-op when to < 0): the
// generation advances and the subscriptions served by the old owner end
// with shard_moved.
func (c *Cluster) cutoverLocked(k shardKey, a *assignment, to int) {
	if a.fence != nil {
		if a.fence.timer != nil {
			a.fence.timer.Stop()
			delete(c.timers, a.fence.timer)
		}
		a.fence = nil
	}
	if to < 0 {
		return
	}
	a.cancel()
	a.owner = to
	a.gen++
	a.moved, a.cancel = context.WithCancel(context.Background())
	c.log.Info("shard moved", "kind", k.kind, "name", k.name, "shard", k.shard, "owner", c.nodes[to].id, "generation", a.gen)
}

// Owner returns the owner of shard of a stream in the fixture's tenant
// and namespace, and its generation.
func (c *Cluster) Owner(stream string, shard uint32) (node int, gen uint64) {
	return c.OwnerOf(engine.Topic{Tenant: c.cfg.Tenant, Namespace: c.cfg.Namespace, Stream: stream}, shard)
}

// OwnerOf returns the owner of shard of stream t, and its generation
// (placing the shard when nothing has yet).
func (c *Cluster) OwnerOf(t engine.Topic, shard uint32) (node int, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.assignLocked(streamKey(t.Tenant, t.Namespace, t.Stream, shard))
	return a.owner, a.gen
}

// Move moves shard of a stream of the fixture's namespace to node to at
// once (a planned move with no hold).
func (c *Cluster) Move(stream string, shard uint32, to int) error {
	return c.MoveShard(engine.Topic{Tenant: c.cfg.Tenant, Namespace: c.cfg.Namespace, Stream: stream}, shard, to)
}

// MoveShard moves shard of stream t to node to at once (a planned move
// with no hold): when it returns, the new owner serves the shard and the
// subscriptions served by the old one have been told shard_moved.
func (c *Cluster) MoveShard(t engine.Topic, shard uint32, to int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if to < 0 || to >= len(c.nodes) || !c.nodes[to].alive {
		return fmt.Errorf("%w: node %d cannot take a shard", ErrPlacement, to)
	}
	k := streamKey(t.Tenant, t.Namespace, t.Stream, shard)
	if info, ok := c.eng.StreamInfo(t); !ok || shard >= max(info.Shards, 1) {
		return fmt.Errorf("%w: unknown stream shard %q/%d", ErrPlacement, t.Stream, shard)
	}
	a := c.assignLocked(k)
	if a.owner != to {
		c.cutoverLocked(k, a, to)
	}
	return nil
}

// Fence starts a planned move of shard of a stream in the fixture's
// namespace to the next live node: until it cuts over, hold from now
// (0 = Config.FenceHold), every publish, subscribe and read of the shard
// is refused with shard_unavailable, reason "moving", retry class retry.
// At cutover the subscriptions on the old owner end with shard_moved.
// It returns the node the shard moves to.
func (c *Cluster) Fence(stream string, shard uint32, hold time.Duration) (int, error) {
	if hold <= 0 {
		hold = c.cfg.FenceHold
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := streamKey(c.cfg.Tenant, c.cfg.Namespace, stream, shard)
	info, ok := c.eng.StreamInfo(engine.Topic{Tenant: k.tenant, Namespace: k.ns, Stream: k.name})
	if !ok || shard >= max(info.Shards, 1) {
		return 0, fmt.Errorf("%w: unknown stream shard %q/%d", ErrPlacement, stream, shard)
	}
	a := c.assignLocked(k)
	if a.fence != nil {
		return 0, fmt.Errorf("%w: %q/%d is already moving", ErrPlacement, stream, shard)
	}
	to := c.nextAliveLocked(a.owner)
	if to < 0 {
		return 0, fmt.Errorf("%w: no live node to move %q/%d to", ErrPlacement, stream, shard)
	}
	f := &fence{to: to}
	a.fence = f
	f.timer = time.AfterFunc(hold, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if a.fence == f && !c.closed {
			dest := f.to
			if !c.nodes[dest].alive {
				dest = c.nextAliveLocked(a.owner)
			}
			c.cutoverLocked(k, a, dest)
		}
	})
	c.timers[f.timer] = struct{}{}
	c.log.Info("shard fenced", "stream", stream, "shard", shard, "to", c.nodes[to].id, "hold", hold)
	return to, nil
}

// Partition cuts the leader of a quorum stream of the fixture's namespace
// off from its replicas: its writes then fail with quorum_timeout until
// Heal. It returns the leader.
func (c *Cluster) Partition(stream string) (int, error) {
	if stream != QuorumStream {
		return 0, fmt.Errorf("%w: %q is not a quorum stream", ErrPlacement, stream)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.assignLocked(streamKey(c.cfg.Tenant, c.cfg.Namespace, stream, 0))
	c.parted[a.owner] = true
	select {
	case <-c.healed:
		c.healed = make(chan struct{})
	default:
	}
	c.log.Info("partitioned", "node", c.nodes[a.owner].id)
	return a.owner, nil
}

// CutNodes cuts the link between nodes a and b (until Heal): neither
// forwards a publish to a shard the other owns any more; such a publish is
// refused with shard_unavailable (reason owner_unavailable, retry class
// retry), as a node that cannot reach the owner refuses it. Reads,
// subscribes and watches are redirected to the owner as before (the
// client reaches it directly).
func (c *Cluster) CutNodes(a, b int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a < 0 || b < 0 || a >= len(c.nodes) || b >= len(c.nodes) || a == b {
		return fmt.Errorf("%w: no link between nodes %d and %d", ErrPlacement, a, b)
	}
	c.cuts[[2]int{min(a, b), max(a, b)}] = true
	c.log.Info("nodes cut", "a", c.nodes[a].id, "b", c.nodes[b].id)
	return nil
}

// Heal ends every partition, every cut between nodes and every link drop
// or stall (of the link interposer and of every node's).
func (c *Cluster) Heal() {
	c.mu.Lock()
	clear(c.parted)
	clear(c.cuts)
	var relays []*interposer.Relay
	for _, n := range c.nodes {
		if n.relay != nil {
			relays = append(relays, n.relay)
		}
	}
	select {
	case <-c.healed:
	default:
		close(c.healed)
	}
	c.mu.Unlock()
	if c.link != nil {
		c.link.Heal()
	}
	for _, r := range relays {
		r.Heal()
	}
	c.log.Info("healed")
}

// quorumLocked reports whether a write led by leader can reach a majority
// of the quorum stream's replicas (every node).
func (c *Cluster) quorumLocked(leader int) bool {
	if c.parted[leader] || !c.nodes[leader].alive {
		return false
	}
	n := 0
	for _, nd := range c.nodes {
		if nd.alive {
			n++
		}
	}
	return n >= len(c.nodes)/2+1
}

func shardUnavailable(reason string) *engine.Error {
	return &engine.Error{Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry, Reason: reason,
		Message: "shard unavailable: " + reason}
}

// router is node i's view of the cluster map (server.Router).
type router struct {
	c *Cluster
	i int
}

var _ server.Router = (*router)(nil)

// place answers for k, a shard of an existing stream or cache (the
// callers serve an unknown one locally, so that the engine gives its own
// answer); shards is the stream's shard count: the first use of one
// shard places them all, so that State lists the whole stream.
func (r *router) place(k shardKey, shards uint32, write bool) server.Placement {
	c := r.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return server.Placement{Refuse: &engine.Error{Code: felix.CodeDraining, Retry: felix.RetryRetry, Message: "cluster shutting down"}}
	}
	a := c.shards[k]
	if a == nil {
		for s := range shards {
			sk := k
			sk.shard = s
			c.assignLocked(sk)
		}
		a = c.assignLocked(k)
	}
	if a.fence != nil {
		c.mu.Unlock()
		return server.Placement{Refuse: shardUnavailable(felix.ReasonMoving)}
	}
	if !c.nodes[a.owner].alive {
		c.mu.Unlock()
		return server.Placement{Refuse: shardUnavailable(felix.ReasonOwnerUnavailable)}
	}
	if write && a.owner != r.i && c.cuts[[2]int{min(a.owner, r.i), max(a.owner, r.i)}] {
		c.mu.Unlock()
		return server.Placement{Refuse: shardUnavailable(felix.ReasonOwnerUnavailable)}
	}
	p := server.Placement{Local: a.owner == r.i, Owner: c.endpointLocked(a.owner), Generation: a.gen, Moved: a.moved}
	if !write || k.kind != felix.ShardKindStream || k.name != QuorumStream || k.ns != c.cfg.Namespace || k.tenant != c.cfg.Tenant {
		c.mu.Unlock()
		return p
	}
	if c.quorumLocked(a.owner) {
		c.mu.Unlock()
		return p
	}
	healed := c.healed
	c.mu.Unlock()
	t := time.NewTimer(c.cfg.QuorumTimeout)
	defer t.Stop()
	select {
	case <-t.C:
	case <-healed:
	}
	c.mu.Lock()
	ok := !c.closed && c.quorumLocked(a.owner)
	c.mu.Unlock()
	if !ok {
		return server.Placement{Refuse: &engine.Error{Code: felix.CodeQuorumTimeout, Retry: felix.RetryOutcomeUnknown,
			Message: "quorum timeout: a majority of the replicas did not confirm the write in time"}}
	}
	return p
}

// Stream implements server.Router.
func (r *router) Stream(t engine.Topic, shard uint32, write bool) server.Placement {
	info, ok := r.c.eng.StreamInfo(t)
	if !ok || shard >= max(info.Shards, 1) {
		return server.Placement{Local: true} // the engine refuses it
	}
	return r.place(streamKey(t.Tenant, t.Namespace, t.Stream, shard), max(info.Shards, 1), write)
}

// CacheWatch implements server.Router.
func (r *router) CacheWatch(ref engine.CacheRef) server.Placement {
	if _, _, err := r.c.eng.CacheOffsets(ref); err != nil {
		return server.Placement{Local: true}
	}
	return r.place(cacheKey(ref.Tenant, ref.Namespace, ref.Cache), 1, false)
}

// Topology implements server.Router: every live node.
func (r *router) Topology() []felix.BrokerEndpoint {
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []felix.BrokerEndpoint{}
	for i, n := range c.nodes {
		if n.alive {
			out = append(out, c.endpointLocked(i))
		}
	}
	return out
}

// ShardOwners implements server.Router.
func (r *router) ShardOwners(kind felix.ShardKind, tenant, ns, name string) []felix.ShardOwner {
	c := r.c
	var n uint32
	switch kind {
	case felix.ShardKindStream:
		info, ok := c.eng.StreamInfo(engine.Topic{Tenant: tenant, Namespace: ns, Stream: name})
		if !ok {
			return nil
		}
		n = max(info.Shards, 1)
	case felix.ShardKindCache:
		if _, _, err := c.eng.CacheOffsets(engine.CacheRef{Tenant: tenant, Namespace: ns, Cache: name}); err != nil {
			return nil
		}
		n = 1
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]felix.ShardOwner, 0, n)
	for s := range n {
		k := shardKey{kind: kind, tenant: tenant, ns: ns, name: name, shard: s}
		if kind == felix.ShardKindCache {
			k = cacheKey(tenant, ns, name)
		}
		a := c.assignLocked(k)
		o := felix.ShardOwner{Shard: s, Generation: a.gen}
		switch {
		case !c.nodes[a.owner].alive:
			o.Unavailable = felix.Some(felix.ReasonOwnerUnavailable)
		default:
			ep := c.endpointLocked(a.owner)
			o.NodeID, o.Addr = felix.Some(ep.NodeID), felix.Some(ep.Addr)
			if a.fence != nil {
				o.Unavailable = felix.Some(felix.ReasonMoving)
			}
		}
		out = append(out, o)
	}
	return out
}
