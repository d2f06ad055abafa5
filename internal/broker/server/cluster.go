package server

import (
	"context"
	"strconv"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/engine"
)

// ClusterFlags and ClusterFeatures are added to what a Server advertises
// when it is one node of a cluster (Config.Router set): forwarded acks
// carry the owner section, and topology, redirects, shard owners and
// shard_moved are served.
const (
	ClusterFlags    = felix.FlagBinaryPublishAckOwner
	ClusterFeatures = felix.FeatureTopology | felix.FeatureRedirect | felix.FeatureShardOwners | felix.FeatureShardMoved
)

// Placement is how one node may serve a request for one shard.
type Placement struct {
	// Local is true when this node owns the shard.
	Local bool
	// Owner is the shard's owner (Addr "" when not published) and
	// Generation the ownership epoch; both are meaningful when Refuse is
	// nil.
	Owner      felix.BrokerEndpoint
	Generation uint64
	// Refuse, when set, refuses the request with this error (a fenced or
	// unowned shard, a write no quorum confirmed).
	Refuse *engine.Error
	// Moved, for a local placement, is done once the shard has left this
	// node: subscriptions served here then end with shard_moved.
	Moved context.Context
}

// Router makes a Server one node of a cluster whose nodes share the
// server's engine. The server consults it before serving any request for a
// shard; nil Router means a standalone broker.
type Router interface {
	// Stream places shard of stream t. A write (publish) may block while
	// the router waits for replicas and then refuse it.
	Stream(t engine.Topic, shard uint32, write bool) Placement
	// CacheWatch places a cache (one shard) for cache_watch, which only
	// the owner serves; other cache requests are served by any node (the
	// cache lives in the shared engine).
	CacheWatch(r engine.CacheRef) Placement
	// Topology lists every node's client endpoint.
	Topology() []felix.BrokerEndpoint
	// ShardOwners answers shard_owners (nil for an unknown name).
	ShardOwners(kind felix.ShardKind, tenant, namespace, name string) []felix.ShardOwner
}

// shardOf returns the shard a publish to t with the given key lands on:
// the stream's routing (felix.Routing), as the engine places it.
func (s *Server) shardOf(t engine.Topic, keyed bool, key []byte) uint32 {
	c, ok := s.eng.StreamInfo(t)
	if !ok {
		return 0
	}
	return c.Routing.ShardOf(key, keyed, max(c.Shards, 1))
}

// placeWrite asks the router (if any) about a publish; a zero Placement
// with Local set is returned for a standalone broker.
func (h *handler) placeWrite(t engine.Topic, keyed bool, key []byte) Placement {
	if h.s.cfg.Router == nil {
		return Placement{Local: true}
	}
	return h.s.cfg.Router.Stream(t, h.s.shardOf(t, keyed, key), true)
}

// placeRead asks the router (if any) about a read of shard.
func (h *handler) placeRead(t engine.Topic, shard uint32) Placement {
	if h.s.cfg.Router == nil {
		return Placement{Local: true}
	}
	return h.s.cfg.Router.Stream(t, shard, false)
}

// redirect answers a request that only the owner serves and ends the
// stream: not_leader to a client that offered FeatureRedirect, else an
// error with code not_leader naming the owner in prose; a refusal as an
// error.
func (h *handler) redirect(p Placement) bool {
	if p.Refuse != nil {
		h.write(errorMessage(p.Refuse))
		h.st.Close()
		return false
	}
	if h.peer.Features.Has(felix.FeatureRedirect) {
		nl := &felix.NotLeader{NodeID: p.Owner.NodeID, Generation: p.Generation}
		if p.Owner.Addr != "" {
			nl.Addr = felix.Some(p.Owner.Addr)
		}
		h.write(nl)
		h.st.Close()
		return false
	}
	return h.refuse(felix.CodeNotLeader, "not leader: shard owned by "+p.Owner.NodeID+" at "+p.Owner.Addr+
		" (generation "+strconv.FormatUint(p.Generation, 10)+")")
}

// owner is the ack owner section for a forwarded publish.
func (p Placement) owner() felix.AckOwner {
	return felix.AckOwner{NodeID: p.Owner.NodeID, Addr: p.Owner.Addr, Generation: p.Generation}
}

// notLeaderRefusal is the publish_refused reason for an idempotent publish
// sent to a node that does not lead its shard.
func notLeaderRefusal(rid uint64, p Placement) *felix.PublishRefused {
	r := felix.PublishRefusalReason{Kind: felix.RefusalNotLeader, NodeID: p.Owner.NodeID}
	if p.Owner.Addr != "" {
		r.Addr = felix.Some(p.Owner.Addr)
	}
	return &felix.PublishRefused{RequestID: rid, Reason: r, Message: "not leader: shard owned by " + p.Owner.NodeID}
}

// clusterRequest answers topology and shard_owners; ok is false when the
// message is neither.
func (h *handler) clusterRequest(m felix.Message) (more, ok bool) {
	r := h.s.cfg.Router
	switch m := m.(type) {
	case *felix.Topology:
		if r == nil {
			return h.unsupported(m.MessageType(), "", felix.Opt[uint64]{}), true
		}
		return h.write(&felix.TopologyView{Brokers: r.Topology()}), true
	case *felix.ShardOwners:
		if r == nil {
			return h.unsupported(m.MessageType(), "", felix.Some(m.RequestID)), true
		}
		if m.TenantID != h.id.Tenant {
			return h.refuse(felix.CodeForbidden, "tenant mismatch"), true
		}
		owners := r.ShardOwners(m.Kind, m.TenantID, m.Namespace, m.Name)
		if owners == nil {
			owners = []felix.ShardOwner{}
		}
		return h.write(&felix.ShardOwnersView{Owners: owners, RequestID: m.RequestID}), true
	}
	return false, false
}

// placeCache asks the router (if any) about a cache watch.
func (h *handler) placeCache(r engine.CacheRef) Placement {
	if h.s.cfg.Router == nil {
		return Placement{Local: true}
	}
	return h.s.cfg.Router.CacheWatch(r)
}

// Abort stops the server at once, the way a crash looks to its clients:
// the listener and every connection are closed (application code 0)
// without draining requests or finishing event streams, so no
// subscription sees a clean end. It waits for the server's goroutines.
// Shutdown and Abort share one stop: whichever runs first wins.
func (s *Server) Abort() {
	s.stopOnce.Do(func() {
		s.draining.Store(true)
		s.cancel()
		_ = s.ln.Close()
		s.wg.Wait()
		s.endSubs()
		if s.cfg.SharedEngine == nil {
			s.eng.Close()
		}
		s.log.Info("broker aborted")
	})
}

// leaderOnly places the requests only a shard's leader serves (consumer
// groups, commit, state_get, publish_if, offset_for_time): it returns the
// placement and true when this node must not serve m (the caller then
// answers with redirect). Requests for another tenant are left to the
// handlers' own refusal.
func (h *handler) leaderOnly(m felix.Message) (Placement, bool) {
	if h.s.cfg.Router == nil {
		return Placement{}, false
	}
	var t engine.Topic
	var shard uint32
	write := false
	keyed := func(key []byte, has bool) uint32 { return h.s.shardOf(t, has, key) }
	switch m := m.(type) {
	case *felix.GroupPoll:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.GroupAck:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.GroupNack:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.GroupExtend:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.GroupDeadLetter:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.GroupDeadLetters:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.GroupDiscard:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.GroupRedrive:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.GroupSeek:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.GroupDescribe:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.GroupDelete:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.OffsetForTime:
		t, shard = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard
	case *felix.Commit:
		t, write = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, true
		shard = keyed(m.EntityKey, true)
	case *felix.StateGet:
		t = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
		shard = keyed(m.EntityKey, true)
	case *felix.PublishIf:
		t, write = engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, true
		shard = keyed(m.Key.V, m.Key.Set)
	default:
		return Placement{}, false
	}
	if t.Tenant != h.id.Tenant {
		return Placement{}, false
	}
	p := h.s.cfg.Router.Stream(t, shard, write)
	return p, !p.Local || p.Refuse != nil
}
