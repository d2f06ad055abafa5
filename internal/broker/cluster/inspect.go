package cluster

import (
	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/server"
)

// The router describes its node to shard_inspect and subscriptions_list
// (server.Inspector). The nodes share one engine, so a shard has no
// replicas to ship to: the view names the owner as leader and every other
// node as holding no role for the shard.

var _ server.Inspector = (*router)(nil)

// NodeID implements server.Inspector.
func (r *router) NodeID() string { return r.c.nodes[r.i].id }

// InspectShard implements server.Inspector.
func (r *router) InspectShard(kind felix.ShardKind, tenant, ns, name string, shard uint32) felix.ShardInspection {
	c := r.c
	k := shardKey{kind: kind, tenant: tenant, ns: ns, name: name, shard: shard}
	if kind == felix.ShardKindCache {
		k = cacheKey(tenant, ns, name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.assignLocked(k)
	asg := felix.ShardAssignment{Generation: a.gen, Leader: c.nodes[a.owner].id, Replicas: []string{}}
	if a.fence != nil {
		asg.Successor = felix.Some(c.nodes[a.fence.to].id)
	}
	v := felix.ShardInspection{Generation: felix.Some(a.gen), Assignment: felix.Some(asg)}
	switch {
	case a.owner != r.i:
		v.Role, v.Phase, v.Reason = "none", "unassigned", felix.Some("not_assigned_here")
	case a.fence != nil:
		v.Role, v.Phase, v.Reason = "leader", "fencing", felix.Some("fencing")
		v.Lease = felix.Some(felix.ShardLease{Held: true})
	default:
		v.Role, v.Phase, v.Serving = "leader", "active", true
		v.Lease = felix.Some(felix.ShardLease{Held: true})
	}
	return v
}
