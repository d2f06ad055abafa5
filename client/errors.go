package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// Sentinel errors.
var (
	// ErrAmbiguous matches an *AmbiguousError: the request may or may not
	// have been applied, and the client did not re-send it.
	ErrAmbiguous = errors.New("client: outcome unknown")
	// ErrClosed: the Client, Subscription or Watch was closed by this side.
	ErrClosed = errors.New("client: closed")
	// ErrNoBrokers: no broker address is known (no seeds).
	ErrNoBrokers = errors.New("client: no broker address")
	// ErrUnknownStream: the broker reports 0 shards for the stream (it does
	// not exist), so a sharded subscription refuses it.
	ErrUnknownStream = errors.New("client: unknown stream (0 shards)")
	// ErrCannotResume: a subscription lost its event stream after
	// delivering records without offsets (an in-memory stream), so it
	// cannot resume without a gap or a duplicate; it ends with this error
	// (wrapping the cause) instead.
	ErrCannotResume = errors.New("client: subscription cannot resume exactly")
	// ErrProducerStopped matches every publish of an idempotent Producer
	// after the broker refused one of its batches (publish_refused other
	// than not_leader): a gap, an unknown producer or a reused sequence
	// cannot be mended by re-sending. Create a new Producer.
	ErrProducerStopped = errors.New("client: producer stopped")
)

// AmbiguousError reports a request whose outcome is unknown: the broker
// answered with retry class outcome_unknown, or the connection was lost
// after the request was sent and before its answer. The client does not
// re-send such a request by default (a publish could land twice); use
// PublishBatchMayDuplicate or an idempotent Producer to re-send.
type AmbiguousError struct {
	// Op is the operation ("publish", "counter_add", ...).
	Op string
	// Addr is the broker the request was sent to.
	Addr string
	// Err is the cause (a *conn.BrokerError, a *conn.TransportError, ...).
	Err error
}

// Error formats the error.
func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("client: %s on %s: outcome unknown (not re-sent): %v", e.Op, e.Addr, e.Err)
}

// Unwrap returns the cause.
func (e *AmbiguousError) Unwrap() error { return e.Err }

// Is matches ErrAmbiguous.
func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

// ShardLostError is yielded by a sharded subscription when one shard's
// subscription ended with Err; the other shards keep delivering.
type ShardLostError struct {
	Shard uint32
	Err   error
}

// Error formats the error.
func (e *ShardLostError) Error() string {
	return fmt.Sprintf("client: shard %d lost: %v", e.Shard, e.Err)
}

// Unwrap returns the cause.
func (e *ShardLostError) Unwrap() error { return e.Err }

// RetryClassOf returns the retry class an error calls for, as the client
// judges it: the broker's class for broker answers, felix.RetryRedirect
// for not_leader, felix.RetryOutcomeUnknown for an ambiguous outcome,
// felix.RetryRetry for a transport failure, felix.RetryFatal otherwise
// (refusals, cursor errors, capabilities not advertised, closed clients).
func RetryClassOf(err error) felix.RetryClass {
	var be *conn.BrokerError
	var nl *conn.NotLeaderError
	var pr *conn.PublishRefusedError
	var te *conn.TransportError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrAmbiguous):
		return felix.RetryOutcomeUnknown
	case errors.As(err, &nl):
		return felix.RetryRedirect
	case errors.As(err, &pr):
		if pr.Reason == "not_leader" {
			return felix.RetryRedirect
		}
		return felix.RetryFatal
	case errors.As(err, &be):
		return be.RetryClass()
	case errors.As(err, &te):
		return felix.RetryRetry
	}
	return felix.RetryFatal
}

// action is what the retry loop does after a failure.
type action uint8

const (
	actReturn    action = iota // give the error to the caller
	actRedirect                // follow an owner hint; free
	actRetry                   // wait and retry (same or any broker)
	actFailover                // the broker failed: another broker first
	actAmbiguous               // may have been applied and not safe to re-send
)

// verdict is the decision about one failure.
type verdict struct {
	act        action
	retryAfter time.Duration
	hint       *ownerHint // redirect target, when known
}

// classify decides what to do about err from a call that is safe (true)
// or not safe to re-send after an ambiguous outcome.
func (c *Client) classify(ctx context.Context, err error, safe bool) verdict {
	if ctx.Err() != nil && (errors.Is(err, ctx.Err()) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return verdict{act: actReturn}
	}
	if c.closed.Load() {
		return verdict{act: actReturn}
	}
	var nl *conn.NotLeaderError
	var pr *conn.PublishRefusedError
	var be *conn.BrokerError
	var te *conn.TransportError
	var fe *felix.Error
	switch {
	case errors.As(err, &nl):
		return verdict{act: actRedirect, hint: &ownerHint{nodeID: nl.NodeID, addr: nl.Addr, gen: nl.Generation}}
	case errors.As(err, &pr):
		if pr.Reason == "not_leader" && pr.Refusal != nil {
			r := pr.Refusal.Reason
			return verdict{act: actRedirect, hint: &ownerHint{nodeID: r.NodeID, addr: r.Addr.V}}
		}
		return verdict{act: actReturn}
	case errors.As(err, &be):
		v := verdict{retryAfter: be.RetryAfter}
		if be.HasOwner {
			v.hint = &ownerHint{nodeID: be.Owner.NodeID, addr: be.Owner.Addr, gen: be.Owner.Generation}
		}
		switch be.RetryClass() {
		case felix.RetryRedirect:
			v.act = actRedirect
		case felix.RetryRetry, felix.RetryAfter:
			v.act = actRetry
			if be.Auth || be.Code == felix.CodeDraining {
				v.act = actFailover // the broker is going away
			}
		case felix.RetryOutcomeUnknown:
			v.act = actRetry
			if !safe {
				v.act = actAmbiguous
			}
		default:
			v.act = actReturn
		}
		return v
	case errors.Is(err, conn.ErrNotAdvertised), errors.As(err, &fe):
		return verdict{act: actReturn}
	case errors.As(err, &te), errors.Is(err, conn.ErrProtocol), errors.Is(err, conn.ErrClosed), errors.Is(err, io.EOF):
		if !safe {
			return verdict{act: actAmbiguous}
		}
		return verdict{act: actFailover}
	}
	return verdict{act: actReturn}
}
