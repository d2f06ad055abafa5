// Package api is the Felix request surface: every one-answer request of
// the protocol (caches, counters, conditional writes, atomic commits and
// state, consumer groups, stream reads, offsets by time, inspection and
// cluster queries) as a typed call, written once over a Requestor.
//
// A Requestor sends one request and returns its answer. Two implement it:
//
//   - *client.Client, the client applications use: it sends each request
//     to the broker that serves it (the stream shard's leader for a
//     routed request, any broker otherwise), follows redirects, retries
//     failures by the client's one decision table, and reports an unknown
//     outcome of a request that is not safe to re-send as an
//     *client.AmbiguousError. Every call below is also a method of the
//     client itself (c.CachePut(ctx, ...)), generated from Calls' method
//     set by internal/gen/clientgen, and every exported name of this
//     package is a name of package client too (client.GroupRef, ...), so
//     that an application imports client alone.
//   - *conn.Client, one connection to one broker, no retries, typed errors
//     passed through: api.New(cc).CachePut(ctx, ...).
//
// Whether a request may be re-sent, which feature gates it and how it is
// routed are the protocol facts of felix.LookupRequest; the typed calls
// only build the request and read its answer. A request whose feature
// (or the feature of an option it sets) the broker did not advertise
// fails with felix.ErrNotAdvertised and nothing is sent.
//
// What stays outside this package is what only a connection or the
// cluster-aware client can do: the handshake, publish streams with their
// windows and idempotent producers, subscriptions and cache watches
// (event streams that resume), in conn and client.
package api

import (
	"context"
	"fmt"

	"github.com/flxproto/felix"
)

// Requestor sends one client request and returns its answer: one of the
// success answers of the request's felix.RequestFacts, or an error (a
// failure answer as its typed error: *felix.BrokerError,
// *felix.NotLeaderError, *felix.PublishRefusedError, *felix.CursorError,
// felix.ErrNotAdvertised). It sets the request's request id.
// *conn.Client and *client.Client implement it.
type Requestor interface {
	Request(ctx context.Context, req felix.Message) (felix.Message, error)
}

// Calls are the typed requests over one Requestor. The zero value has no
// Requestor and must not be used; make one with New.
type Calls struct {
	r Requestor
}

// New returns the typed calls over r.
func New(r Requestor) Calls { return Calls{r: r} }

// do sends req and returns its answer as a T (the legacy answers a
// request may also get, such as ok to cache_put, are the caller's to
// read).
func do[T felix.Message](ctx context.Context, x Calls, req felix.Message) (T, error) {
	var zero T
	ans, err := x.r.Request(ctx, req)
	if err != nil {
		return zero, err
	}
	if a, ok := ans.(T); ok {
		return a, nil
	}
	return zero, fmt.Errorf("%w: %s answered with %s, not %T", felix.ErrProtocol, req.MessageType(), ans.MessageType(), zero)
}
