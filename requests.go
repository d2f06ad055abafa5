package felix

import (
	"iter"
	"slices"
	"strconv"
)

// Route says which broker can serve a request (docs/messages.md §4,
// docs/routing.md).
type Route uint8

const (
	// RouteAny: any broker of the cluster serves the request.
	RouteAny Route = iota
	// RouteStreamShard: only the leader of the request's stream shard
	// serves it; another broker answers not_leader (or an error, or
	// publish_refused with reason not_leader for publish_idempotent).
	RouteStreamShard
	// RouteCacheShard: only the owner of the request's cache shard serves
	// it; another broker answers not_leader.
	RouteCacheShard
)

// String returns "any", "stream_shard" or "cache_shard".
func (r Route) String() string {
	switch r {
	case RouteAny:
		return "any"
	case RouteStreamShard:
		return "stream_shard"
	case RouteCacheShard:
		return "cache_shard"
	}
	return "route(" + strconv.Itoa(int(r)) + ")"
}

// RequestFacts are the protocol facts of one client → broker request, as
// the table internal/gen/msggen/messages.txt states them (the only place
// they are written).
type RequestFacts struct {
	// Type is the request's JSON type tag, e.g. "cache_get".
	Type string
	// Gate is the feature bit a broker must advertise before a client
	// sends the request (0: none needed; see Capabilities.CanRequest).
	Gate Features
	// Route says which broker can serve the request.
	Route Route
	// Safe is true when re-sending the request after an unknown outcome
	// (a lost answer) cannot apply it twice or change its answer, so a
	// client may retry it on its own; false when such a retry must be
	// reported as ambiguous instead (publish, counter_add, conditional
	// writes, group settlements). A publish sent at-least-once by the
	// caller's choice is outside this fact.
	Safe bool

	answers []string
}

// Answers yields the broker → client types that answer the request when
// it is served. error and unsupported may answer any request and
// not_leader any request whose Route is not RouteAny; they are not
// listed.
func (r RequestFacts) Answers() iter.Seq[string] { return slices.Values(r.answers) }

// LookupRequest returns the facts of the client → broker request typ, and
// false when typ is not one (a broker → client type or an unknown one).
func LookupRequest(typ string) (RequestFacts, bool) {
	if i := requestIndex(typ); i >= 0 {
		return requestFacts[i], true
	}
	return RequestFacts{}, false
}

// Requests yields the facts of every client → broker request, in the
// order of docs/messages.md.
func Requests() iter.Seq[RequestFacts] {
	return func(yield func(RequestFacts) bool) {
		for _, r := range requestFacts {
			if !yield(r) {
				return
			}
		}
	}
}

// RouteTarget is the shard a routed request names (RouteTargetOf): the
// stream or cache, and either the shard itself or the routing key that
// picks it. For a RouteAny request it holds the stream or cache names
// only (Kind, TenantID, Namespace, Name), for the checks a client makes
// before sending.
//
// A client routes by Shard when it is set, else by Key when Keyed
// (Routing.Shard with the stream's shard count), else to shard 0 — a
// publish without a key lands there.
type RouteTarget struct {
	// Kind is ShardKindStream for a request of RouteStreamShard and
	// ShardKindCache for one of RouteCacheShard.
	Kind ShardKind
	// TenantID and Namespace are the request's tenant_id and namespace.
	TenantID, Namespace string
	// Name is the request's stream (or cache) member.
	Name string
	// Shard is the request's shard member, set when the request has one
	// and it is present (a required shard, as on stream_read and the group
	// requests, is always set).
	Shard Opt[uint32]
	// Key is the routing key: the bytes of an optional key member
	// (publish, publish_batch, publish_idempotent, publish_if) when it is
	// present, or of entity_key (commit, state_get), which is always a
	// routing key. An empty present key is a key too: Key is then a non-nil
	// empty slice. Key aliases the message's bytes.
	Key []byte
	// Keyed reports whether Key is a routing key. It is false when the
	// request has no routing key member or its optional key is absent.
	Keyed bool
}

// routingKey returns k, or a non-nil empty slice for an empty key: an
// empty present key still routes.
func routingKey(k []byte) []byte {
	if k == nil {
		return []byte{}
	}
	return k
}

// featureName returns the spec name of the feature f, e.g.
// "FEATURE_CACHE_DELETE" (f a single bit).
func featureName(f Features) string { return "FEATURE_" + f.String() }
