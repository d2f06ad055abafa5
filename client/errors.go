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
	// ErrClosed: the Client, Subscription, Watch or Producer was closed by
	// this side. It is conn.ErrClosed itself: one closed error whichever
	// layer noticed the close first.
	ErrClosed = conn.ErrClosed
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

	// The sentinels of the layers below that a client call's error
	// matches, under client names (each is the lower layer's own value, so
	// errors.Is accepts either name). docs/errors.md §10 says what to do
	// about each.

	// ErrNotAdvertised: the broker did not advertise the feature the call
	// (or an option it sets) needs; nothing was sent. Retrying the same
	// broker cannot help.
	ErrNotAdvertised = felix.ErrNotAdvertised
	// ErrProtocol: the broker answered something the protocol does not
	// allow there; the connection was dropped.
	ErrProtocol = felix.ErrProtocol
	// ErrFrameTooLarge matches a *FrameLimitError: the request is larger
	// than the frame limit and was not sent.
	ErrFrameTooLarge = felix.ErrFrameTooLarge
	// ErrBadAddress matches a *DialError: a seed or learnt address cannot
	// be dialled as written (no port, a host that does not resolve).
	ErrBadAddress = conn.ErrBadAddress
	// ErrNoAnswer matches a *DialError: nothing answered the QUIC
	// handshake at the address (no broker listening, a firewall, a broker
	// still starting).
	ErrNoAnswer = conn.ErrNoAnswer
	// ErrCertUntrusted matches a *DialError: the broker's certificate was
	// refused (see Config.CAFile, Config.TLS).
	ErrCertUntrusted = conn.ErrCertUntrusted
	// ErrBrokerBusy matches a *DialError: the broker refused the
	// connection for now (CONNECTION_REFUSED: at its connection or
	// handshake limits). Calls dial it again after a back-off within
	// their deadline and retry budget; a call returns it only when that
	// runs out.
	ErrBrokerBusy = conn.ErrBrokerBusy
	// ErrAuthRefused: the broker refused the credentials (Config.TenantID,
	// Config.Token). The error is also a *BrokerError (errors.As) with the
	// broker's answer. It is the codec's own sentinel (one name across the module).
	ErrAuthRefused = felix.ErrAuthRefused
	// ErrBrokerShutdown matches a *TransportError: the broker closed the
	// connection because it is shutting down or draining.
	ErrBrokerShutdown = conn.ErrBrokerShutdown
)

// AmbiguousError reports a request whose outcome is unknown: the broker
// answered with retry class outcome_unknown, or the connection was lost or
// the call's context ended after the request was sent and before its
// answer. The client does not re-send such a request by default (a
// publish could land twice), and neither must the caller; use
// PublishBatchMayDuplicate or an idempotent Producer to re-send. For a
// Producer's batch (Op "publish_idempotent"), Producer and Sequence name
// the batch, which the Producer itself re-sends, same sequence, before the
// route's next batch.
type AmbiguousError struct {
	// Op is the operation ("publish", "counter_add", ...).
	Op string
	// Addr is the broker the request was last sent to.
	Addr string
	// Producer and Sequence name an idempotent batch (Op
	// "publish_idempotent").
	Producer, Sequence uint64
	// Err is the cause (a *felix.BrokerError, a *conn.TransportError, the
	// context's error joined with the last failure, ...).
	Err error

	// resent: the request was re-sent (a safe one) and the re-send's
	// answer cannot tell what the first attempt did (a cache_delete that
	// found nothing).
	resent bool
}

// Error formats the error.
func (e *AmbiguousError) Error() string {
	if e.Op == opIdempotent {
		return fmt.Sprintf("client: %s (producer %d, sequence %d) on %s: outcome unknown; the producer re-sends it under the same sequence before its next batch, do not re-send these payloads: %v",
			e.Op, e.Producer, e.Sequence, e.Addr, e.Err)
	}
	if e.resent {
		return fmt.Sprintf("client: %s on %s: outcome unknown (re-sent after a lost answer): %v", e.Op, e.Addr, e.Err)
	}
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

// RetryClassOf returns the retry class an error calls for, read off the
// decision table the client itself acts on (see decide): the broker's
// class for a broker answer it would retry or follow, felix.RetryRedirect
// for not_leader, felix.RetryOutcomeUnknown for an ambiguous outcome and
// for a lost connection, felix.RetryRetry for a failure before anything
// was sent, felix.RetryFatal for everything the client returns at once
// (refusals, not_found after its short promotion window, permanent dial
// failures, cursor errors, capabilities not advertised, a cancelled or
// expired context, a closed client).
func RetryClassOf(err error) felix.RetryClass {
	if err == nil {
		return 0
	}
	return decide(err, true).class
}

// action is what the retry loop does after a failure.
type action uint8

const (
	actReturn    action = iota // give the error to the caller
	actRedirect                // follow an owner hint; free
	actRetry                   // wait and retry (same or any broker)
	actFailover                // the broker failed: another broker first
	actAmbiguous               // may have been applied and not safe to re-send
	// The rows of an event stream's end (see the resumer).
	actMoved   // shard_moved: resume on the owner named, at resume_from
	actLagged  // lagged: resume without a gap, or end when asked to
	actEndLive // a clean end: ends if the broker is live, else failover
)

var actionNames = [...]string{"return", "redirect", "retry", "failover", "ambiguous", "moved", "lagged", "end_if_live"}

func (a action) String() string { return actionNames[a] }

// verdict is the decision about one failure.
type verdict struct {
	act        action
	retryAfter time.Duration
	hint       *ownerHint // redirect target or owner learnt, when known
	// budget caps the retries of the call below Config.MaxAttempts (0: no
	// cap of its own).
	budget int
	// class is the retry class RetryClassOf reports for the error.
	class felix.RetryClass
	// resumeFrom is where a moved or lagged event stream resumes, when
	// the broker said (hasResumeFrom).
	resumeFrom    uint64
	hasResumeFrom bool
	// busy: the broker refused the dial for now (ErrBrokerBusy); the call
	// dials again after a back-off instead of reporting its failed dials.
	busy bool
}

// errEndOfStream is a clean end of an event stream: conn's io.EOF from an
// event stream's Next, which the table tells apart from an io.EOF under a
// request (a lost connection). See endOfStream.
var errEndOfStream = errors.New("client: event stream ended by the broker")

// endOfStream is the error an event stream's Next ended with, as the
// table reads it.
func endOfStream(err error) error {
	if err == io.EOF {
		return errEndOfStream
	}
	return err
}

// notSent marks a failure that happened before the request was written
// (a failed dial): re-sending cannot apply anything twice.
type notSent struct{ err error }

func (e *notSent) Error() string { return e.err.Error() }
func (e *notSent) Unwrap() error { return e.err }

// bare returns err without its notSent mark: callers get the dial's own
// error.
func bare(err error) error {
	if ns, ok := err.(*notSent); ok {
		return ns.err
	}
	return err
}

// notFoundAttempts is the retry budget of not_found: it is retryable only
// because a freshly promoted broker may not have learnt the name yet, and
// a name that does not exist must not keep the caller waiting long.
const notFoundAttempts = 2

// decide is the decision table, the only place a failure is judged: what
// to do about err from a call that is safe (true) or not safe to re-send
// after an ambiguous outcome. Row by row:
//
//	error                                       safe         unsafe
//	*AmbiguousError                             ambiguous    ambiguous
//	caller's context cancelled / expired        return       ambiguous
//	failure before sending (notSent):
//	  permanent cause (see below)               return       return
//	  anything else (unreachable, timeout)      failover     failover
//	permanent: bad address, unknown port,
//	  certificate not trusted, auth refused     return       return
//	*felix.NotLeaderError, not_leader refusal    redirect     redirect
//	other *felix.PublishRefusedError             return       return
//	*felix.BrokerError by retry class:
//	  redirect                                  redirect     redirect
//	  not_found (any class)                     retry ≤2     retry ≤2
//	  retry / retry_after (auth, draining)      failover     failover
//	  retry / retry_after                       retry        retry
//	  outcome_unknown                           retry        ambiguous
//	  fatal                                     return       return
//	felix.ErrNotAdvertised, *felix.Error,
//	  *felix.CursorError                         return       return
//	an event stream's end (the resumer):
//	  *felix.ShardMovedError                     moved        moved
//	  *felix.LaggedError                         lagged       lagged
//	  *felix.StreamDeletedError                  return       return
//	  clean end (errEndOfStream)                end if live  end if live
//	lost connection: *conn.TransportError,
//	  felix.ErrProtocol, conn.ErrClosed, io.EOF  failover     ambiguous
//	anything else                               return       return
//
// A request the broker refused to accept before writing it is free to be
// re-sent (retry), and a redirect never spends the retry budget (the
// retry loop, Client.run, counts neither). An event stream's end is
// judged here too, every other row as for a safe call: moved resumes on
// the owner named (retry class redirect), lagged resumes gaplessly or
// ends when the caller asked (class retry), a clean end by a live broker
// ends the stream and one by a broker going away fails over.
func decide(err error, safe bool) verdict {
	var (
		amb *AmbiguousError
		ns  *notSent
		nl  *felix.NotLeaderError
		pr  *felix.PublishRefusedError
		be  *felix.BrokerError
		te  *conn.TransportError
		fe  *felix.Error
		ce  *felix.CursorError
		sm  *felix.ShardMovedError
		lag *felix.LaggedError
	)
	switch {
	case err == errEndOfStream:
		return verdict{act: actEndLive, class: felix.RetryFatal}
	case errors.As(err, &sm):
		return verdict{act: actMoved, class: felix.RetryRedirect, hint: &ownerHint{nodeID: sm.NodeID, addr: sm.Addr, gen: sm.Generation},
			resumeFrom: sm.ResumeFrom, hasResumeFrom: sm.HasResumeFrom}
	case errors.As(err, &lag):
		return verdict{act: actLagged, class: felix.RetryRetry, resumeFrom: lag.ResumeFrom, hasResumeFrom: true}
	case errors.As(err, new(*felix.StreamDeletedError)):
		return verdict{act: actReturn, class: felix.RetryFatal}
	case errors.As(err, &amb):
		return verdict{act: actAmbiguous, class: felix.RetryOutcomeUnknown}
	case errors.As(err, &ns):
		// A dial timeout is a context error too: the loop, not the table,
		// notices the caller's context.
		if permanent(err) {
			return verdict{act: actReturn, class: felix.RetryFatal}
		}
		return verdict{act: actFailover, class: felix.RetryRetry, busy: errors.Is(err, conn.ErrBrokerBusy)}
	case isContext(err):
		if !safe {
			return verdict{act: actAmbiguous, class: felix.RetryOutcomeUnknown}
		}
		return verdict{act: actReturn, class: felix.RetryFatal}
	case permanent(err):
		return verdict{act: actReturn, class: felix.RetryFatal}
	case errors.As(err, &nl):
		return verdict{act: actRedirect, class: felix.RetryRedirect, hint: &ownerHint{nodeID: nl.NodeID, addr: nl.Addr, gen: nl.Generation}}
	case errors.As(err, &pr):
		if pr.Reason == "not_leader" {
			v := verdict{act: actRedirect, class: felix.RetryRedirect}
			if pr.Refusal != nil {
				r := pr.Refusal.Reason
				v.hint = &ownerHint{nodeID: r.NodeID, addr: r.Addr.V}
			}
			return v
		}
		return verdict{act: actReturn, class: felix.RetryFatal}
	case errors.As(err, &be):
		return brokerVerdict(be, safe)
	case errors.Is(err, felix.ErrNotAdvertised), errors.As(err, &fe), errors.As(err, &ce):
		return verdict{act: actReturn, class: felix.RetryFatal}
	case errors.As(err, &te), errors.Is(err, felix.ErrProtocol), errors.Is(err, conn.ErrClosed), errors.Is(err, io.EOF):
		if !safe {
			return verdict{act: actAmbiguous, class: felix.RetryOutcomeUnknown}
		}
		return verdict{act: actFailover, class: felix.RetryOutcomeUnknown}
	}
	return verdict{act: actReturn, class: felix.RetryFatal}
}

// brokerVerdict is the table's rows for a broker's error answer.
func brokerVerdict(be *felix.BrokerError, safe bool) verdict {
	class := be.RetryClass()
	v := verdict{retryAfter: be.RetryAfter, class: class}
	if be.HasOwner {
		v.hint = &ownerHint{nodeID: be.Owner.NodeID, addr: be.Owner.Addr, gen: be.Owner.Generation}
	}
	switch {
	case class == felix.RetryRedirect:
		v.act = actRedirect
	case be.Code == felix.CodeNotFound:
		v.act, v.budget, v.class = actRetry, notFoundAttempts, felix.RetryFatal
	case class == felix.RetryRetry || class == felix.RetryAfter:
		v.act = actRetry
		if be.Auth || be.Code == felix.CodeDraining {
			v.act = actFailover // the broker is going away
		}
	case class == felix.RetryOutcomeUnknown:
		v.act = actRetry
		if !safe {
			v.act = actAmbiguous
		}
	default:
		v.act = actReturn
	}
	return v
}

// isContext reports a context's cancellation or expiry.
func isContext(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// permanent reports a failure that no retry can mend: conn's judgement of
// a failed dial (an address that cannot be resolved or has no valid port,
// a certificate the client does not trust: conn.Dial wraps every such
// cause in a *conn.DialError of that kind), or credentials the broker
// refused outright (a refused auth is judged by its BrokerError, since a
// throttled or shutting-down broker refuses with a retryable class).
func permanent(err error) bool {
	if errors.Is(err, conn.ErrBadAddress) || errors.Is(err, conn.ErrCertUntrusted) {
		return true
	}
	var be *felix.BrokerError
	return errors.As(err, &be) && be.Auth && be.RetryClass() == felix.RetryFatal
}
