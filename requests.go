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
