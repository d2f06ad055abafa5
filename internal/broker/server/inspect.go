package server

import (
	"cmp"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/engine"
)

// The inspection requests (FEATURE_INSPECT, docs/features.md, high word
// bit 0): shard_inspect → shard_inspect_info and subscriptions_list →
// subscriptions_list_info (docs/messages.md §4). Both need a token granted
// node.view:cluster:* (PermNodeView); any other token is answered
// forbidden and the stream stays open. Neither is forwarded: each broker
// describes itself.

// Subscription list page sizes (docs/transport.md §limits).
const (
	defaultSubsPage = 100
	maxSubsPage     = 1000
)

// Inspector is implemented by a Router that describes its node to the
// inspection requests. A Router without it is described as a standalone
// broker would be (node id "", every known shard led here).
type Inspector interface {
	// NodeID is this node's id.
	NodeID() string
	// InspectShard returns this node's view of a shard that exists:
	// role, phase, serving, reason, generation, assignment, fence and
	// lease. The server fills node_id, shards, tail and committed.
	InspectShard(kind felix.ShardKind, tenant, namespace, name string, shard uint32) felix.ShardInspection
}

// subRegistry lists the subscriptions a server serves, for
// subscriptions_list.
type subRegistry struct {
	mu   sync.Mutex
	next uint64
	subs map[uint64]*subEntry
}

// subEntry is one listed subscription.
type subEntry struct {
	id        uint64 // subscriber id: unique on this server
	topic     engine.Topic
	shard     uint32
	sub       *engine.Subscription
	peer      string
	principal string
	since     time.Time
}

// add registers a subscription and returns its removal.
func (r *subRegistry) add(e *subEntry) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.subs == nil {
		r.subs = make(map[uint64]*subEntry)
	}
	r.next++
	e.id = r.next
	r.subs[e.id] = e
	return func() {
		r.mu.Lock()
		delete(r.subs, e.id)
		r.mu.Unlock()
	}
}

// snapshot returns every entry.
func (r *subRegistry) snapshot() []*subEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*subEntry, 0, len(r.subs))
	for _, e := range r.subs {
		out = append(out, e)
	}
	return out
}

// registerSub lists a subscription opened on h's stream until the
// returned function runs.
func (h *handler) registerSub(t engine.Topic, shard uint32, sub *engine.Subscription) func() {
	peer := ""
	if a, ok := h.st.Conn().RemoteAddr().(*net.UDPAddr); ok {
		peer = a.String()
	}
	return h.s.subReg.add(&subEntry{topic: t, shard: shard, sub: sub, peer: peer, principal: h.id.Principal, since: time.Now()})
}

// inspectRequest answers shard_inspect and subscriptions_list; ok is false
// for any other message.
func (h *handler) inspectRequest(m felix.Message) (more, ok bool) {
	switch m.(type) {
	case *felix.ShardInspect, *felix.SubscriptionsList:
	default:
		return false, false
	}
	if !h.id.Allows(PermNodeView) {
		return h.write(&felix.ErrorMessage{Message: "forbidden: node.view:cluster:* required", Code: felix.Some(felix.CodeForbidden),
			Retry: felix.Some(felix.RetryFatal)}), true
	}
	switch m := m.(type) {
	case *felix.ShardInspect:
		return h.write(&felix.ShardInspectInfo{View: h.s.inspectShard(m), RequestID: m.RequestID}), true
	case *felix.SubscriptionsList:
		return h.write(h.s.listSubscriptions(m)), true
	}
	return false, false
}

// nodeID is this node's id ("" outside a cluster).
func (s *Server) nodeID() string {
	if in, ok := s.cfg.Router.(Inspector); ok {
		return in.NodeID()
	}
	return ""
}

// inspectShard builds this node's view of one shard.
func (s *Server) inspectShard(m *felix.ShardInspect) felix.ShardInspection {
	v := felix.ShardInspection{NodeID: s.nodeID(), Role: "none", Phase: "unassigned"}
	var durable bool
	switch m.Kind {
	case felix.ShardKindStream:
		c, ok := s.eng.StreamInfo(engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Name})
		if ok {
			v.Shards, durable = max(c.Shards, 1), c.Durable
		}
	case felix.ShardKindCache:
		if _, _, err := s.eng.CacheOffsets(engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Name}); err == nil {
			v.Shards = 1
		}
	}
	if m.Shard >= v.Shards {
		v.Reason = felix.Some("not_assigned_here")
		return v
	}
	if in, ok := s.cfg.Router.(Inspector); ok {
		r := in.InspectShard(m.Kind, m.TenantID, m.Namespace, m.Name, m.Shard)
		r.NodeID, r.Shards = v.NodeID, v.Shards
		v = r
	} else {
		v.Role, v.Phase, v.Serving = "leader", "active", true
	}
	if v.Role == "leader" {
		switch {
		case m.Kind == felix.ShardKindStream:
			if _, tail, err := s.eng.Tail(engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Name}, m.Shard); err == nil && durable {
				v.Tail, v.Committed = felix.Some(tail), felix.Some(tail)
			}
		case m.Kind == felix.ShardKindCache:
			if _, next, err := s.eng.CacheOffsets(engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Name}); err == nil {
				v.Tail, v.Committed = felix.Some(next), felix.Some(next)
			}
		}
	}
	return v
}

// subKey orders listed subscriptions: tenant, namespace, stream, shard,
// subscriber id (the cursor's members).
func subKey(e *subEntry) felix.SubscriptionsCursor {
	return felix.SubscriptionsCursor{TenantID: e.topic.Tenant, Namespace: e.topic.Namespace, Stream: e.topic.Stream,
		Shard: e.shard, SubscriberID: e.id}
}

func compareCursor(a, b felix.SubscriptionsCursor) int {
	return cmp.Or(cmp.Compare(a.TenantID, b.TenantID), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Stream, b.Stream),
		cmp.Compare(a.Shard, b.Shard), cmp.Compare(a.SubscriberID, b.SubscriberID))
}

// listSubscriptions answers one page of subscriptions_list.
func (s *Server) listSubscriptions(m *felix.SubscriptionsList) *felix.SubscriptionsListInfo {
	limit := defaultSubsPage
	if m.Limit.Set && m.Limit.V > 0 {
		limit = min(int(m.Limit.V), maxSubsPage)
	}
	f := m.Filter
	type row struct {
		e  *subEntry
		qs engine.QueueStats
	}
	var rows []row
	for _, e := range s.subReg.snapshot() {
		if (f.TenantID.Set && f.TenantID.V != e.topic.Tenant) || (f.Namespace.Set && f.Namespace.V != e.topic.Namespace) ||
			(f.Stream.Set && f.Stream.V != e.topic.Stream) || (f.Shard.Set && f.Shard.V != e.shard) ||
			(f.Principal.Set && f.Principal.V != e.principal) {
			continue
		}
		if m.Cursor.Set && compareCursor(subKey(e), m.Cursor.V) <= 0 {
			continue
		}
		qs := e.sub.QueueStats()
		if f.Dropping && qs.Dropped == 0 {
			continue
		}
		rows = append(rows, row{e, qs})
	}
	slices.SortFunc(rows, func(a, b row) int { return compareCursor(subKey(a.e), subKey(b.e)) })
	ans := &felix.SubscriptionsListInfo{NodeID: s.nodeID(), Subscriptions: []felix.SubscriptionInfo{}, RequestID: m.RequestID}
	if len(rows) > limit {
		rows = rows[:limit]
		ans.NextCursor = felix.Some(subKey(rows[limit-1].e))
	}
	now := time.Now()
	for _, r := range rows {
		e := r.e
		info := felix.SubscriptionInfo{TenantID: e.topic.Tenant, Namespace: e.topic.Namespace, Stream: e.topic.Stream, Shard: e.shard,
			SubscriberID: e.id, SubscriptionID: felix.Some(e.sub.ID()), Policy: "drop_new",
			Depth: uint64(r.qs.Depth), Capacity: uint64(r.qs.Capacity), Dropped: r.qs.Dropped,
			AgeMs: uint64(max(now.Sub(e.since), 0) / time.Millisecond)}
		if e.peer != "" {
			info.Peer = felix.Some(e.peer)
		}
		if e.principal != "" {
			info.Principal = felix.Some(e.principal)
		}
		if _, tail, err := s.eng.Tail(e.topic, e.shard); err == nil {
			info.Tail = tail
		}
		ans.Subscriptions = append(ans.Subscriptions, info)
	}
	return ans
}
