package conn

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flxproto/felix"
	"github.com/quic-go/quic-go"
)

// Application close codes on client connections (docs/transport.md §1).
const (
	// CloseShuttingDown (0) closes a connection because its owner is going
	// away (broker shutting down, client closing).
	CloseShuttingDown quic.ApplicationErrorCode = 0
	// CloseAuthTimeout (1) closes a connection on which no stream
	// authenticated within the auth timeout, one that opened too many
	// unauthenticated streams, or the oldest unauthenticated connection
	// when a new one arrives while ServerConfig.MaxUnauthConns are
	// unauthenticated ("too many unauthenticated connections").
	CloseAuthTimeout quic.ApplicationErrorCode = 1
)

// Sentinel errors.
var (
	// ErrNotAdvertised: the request, field or encoding needs a flag or
	// feature bit the peer did not advertise (client side) or offer
	// (server side) on the stream it would travel on. The request or frame
	// was not sent.
	ErrNotAdvertised = errors.New("conn: not advertised by the peer")
	// ErrClosed: the Client, Subscription, Listener or stream was closed by
	// this side.
	ErrClosed = errors.New("conn: closed")
	// ErrAnswerTimeout: a server stream's answer was not taken by the
	// client within ServerConfig.AnswerWriteTimeout (it does not read its
	// answers): the answer was cut or never begun, and the stream was
	// reset. Forget the stream: its client is not reading.
	ErrAnswerTimeout = errors.New("conn: answer write timed out (the client does not read)")
	// ErrAuthRejected: the broker refused the auth of a stream. The error
	// that wraps it is a *BrokerError carrying the broker's answer. It is
	// the same sentinel as felix.ErrAuthRefused (the codec's name, matched
	// by felix.AuthError), so errors.Is accepts either name for a refusal
	// from either package.
	ErrAuthRejected = felix.ErrAuthRefused
	// ErrProtocol: the peer sent something the protocol does not allow at
	// that point (an unexpected message type, an answer to an unknown
	// request id, a malformed frame). The stream it came on is abandoned.
	ErrProtocol = errors.New("conn: protocol violation")
	// ErrBrokerShutdown: the broker closed the connection with
	// CloseShuttingDown (it is shutting down or draining); reconnect, to
	// another broker if need be. A client call that failed because of it
	// returns a *TransportError wrapping the *quic.ApplicationError, which
	// errors.Is matches with ErrBrokerShutdown. A subscription or cache
	// watch ends with io.EOF when Next read the end of its event stream
	// (the broker finishes every event stream before it closes) and with
	// an ErrBrokerShutdown error when the connection closed first: QUIC
	// then discards what Next had not read yet, so resume from the last
	// offset seen.
	ErrBrokerShutdown = errors.New("conn: broker shut down")
)

// BrokerError is an error answered by the broker: an error message, a
// publish_error, a failed binary ack, or the error that ends an event stream.
// Code, Retry and the detail fields are set only when the client offered
// FeatureErrorCodes (or the ack code flag) and the broker sent them.
type BrokerError struct {
	// Type is the message that carried the error: "error",
	// "publish_error" or "publish_ack" (binary ack).
	Type string
	// RequestID is the request the error answers, 0 when none.
	RequestID uint64
	// Message is the broker's prose.
	Message string
	// Code is the error code, "" when not sent.
	Code felix.ErrorCode
	// Retry is the retry class; 0 when not sent (use RetryClass).
	Retry felix.RetryClass
	// Reason is detail.reason, "" when not sent.
	Reason string
	// RetryAfter is detail.retry_after_ms, 0 when not sent.
	RetryAfter time.Duration
	// Auth is set when the error answered an auth (see ErrAuthRejected).
	Auth bool
	// Owner names the shard owner of a forwarded batch whose binary ack
	// failed, valid when HasOwner (flag 0x0080).
	Owner    felix.AckOwner
	HasOwner bool
}

// Error formats the error: "conn: broker <type> (request N): message
// [code, retry] reason R", with type "error" when Type is empty; a refused
// auth adds what to check (the broker never says whether the tenant or
// the token was wrong).
func (e *BrokerError) Error() string {
	typ := e.Type
	if typ == "" {
		typ = "error"
	}
	s := "conn: broker " + typ
	if e.RequestID != 0 {
		s += " (request " + strconv.FormatUint(e.RequestID, 10) + ")"
	}
	s += ": " + e.Message
	if e.Code != "" {
		s += " [" + string(e.Code)
		if e.Retry != 0 {
			s += ", " + e.Retry.String()
		}
		s += "]"
	}
	if e.Reason != "" {
		s += " reason " + e.Reason
	}
	if e.Auth {
		s += " (check the tenant id and the token)"
	}
	return s
}

// RetryClass returns the retry class the broker sent, or the code's default
// when it sent none (RetryFatal when there is no code either).
func (e *BrokerError) RetryClass() felix.RetryClass {
	if e.Retry != 0 {
		return e.Retry
	}
	if e.Code != "" {
		return e.Code.DefaultRetry()
	}
	return felix.RetryFatal
}

// Is makes errors.Is(err, ErrAuthRejected) (alias felix.ErrAuthRefused)
// true for a refused auth.
func (e *BrokerError) Is(target error) bool { return target == ErrAuthRejected && e.Auth }

// NotLeaderError is a not_leader answer: the request must go to the shard
// owner named here.
type NotLeaderError struct {
	// NodeID is the shard owner's node id.
	NodeID string
	// Addr is the owner's client address, "" when not published.
	Addr string
	// Generation is the ownership generation of the answer.
	Generation uint64
}

// Error formats the error.
func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("conn: not leader; owner %q at %q (generation %d)", e.NodeID, e.Addr, e.Generation)
}

// CursorError is a subscribe_cursor_error: the start position of a
// subscription or watch cannot be served.
type CursorError struct {
	// Reason is "too_old" or "in_future".
	Reason string
	// Requested is the offset the client asked for.
	Requested uint64
	// Available is the nearest offset the broker can serve: the oldest
	// retained one (too_old) or the next to be written (in_future).
	Available uint64
}

// Error formats the error.
func (e *CursorError) Error() string {
	return fmt.Sprintf("conn: subscribe cursor %s: requested %d, available %d", e.Reason, e.Requested, e.Available)
}

// PublishRefusedError is a publish_refused answer (idempotent or conditional
// publishes).
type PublishRefusedError struct {
	// RequestID is the refused request.
	RequestID uint64
	// Reason is the refusal reason's word: "unknown_producer",
	// "sequence_expired", "sequence_reused", "sequence_gap",
	// "offset_mismatch" or "not_leader".
	Reason string
	// Message is the broker's prose.
	Message string
	// Refusal is the decoded publish_refused message.
	Refusal *felix.PublishRefused
}

// Tail returns the shard's next offset of an offset_mismatch refusal (a
// conditional publish or commit whose expected offset was stale).
func (e *PublishRefusedError) Tail() (uint64, bool) {
	if e.Refusal == nil || e.Refusal.Reason.Kind != felix.RefusalOffsetMismatch {
		return 0, false
	}
	return e.Refusal.Reason.Tail, true
}

// Error formats the error.
func (e *PublishRefusedError) Error() string {
	return "conn: publish " + strconv.FormatUint(e.RequestID, 10) + " refused (" + e.Reason + "): " + e.Message
}

// ShardMovedError ends an event stream whose shard moved to another broker.
type ShardMovedError struct {
	// SubscriptionID is the subscription that ended.
	SubscriptionID uint64
	// ResumeFrom is the first offset not offered, valid when HasResumeFrom
	// (false on in-memory streams).
	ResumeFrom    uint64
	HasResumeFrom bool
	// NodeID and Addr name the new owner (Addr "" when not published).
	NodeID, Addr string
	// Generation is the new ownership generation.
	Generation uint64
}

// Error formats the error.
func (e *ShardMovedError) Error() string {
	return fmt.Sprintf("conn: subscription %d: shard moved to %q at %q (generation %d)", e.SubscriptionID, e.NodeID, e.Addr, e.Generation)
}

// LaggedError ends a subscription (subscription_lagged) or cache watch
// (cache_watch_lagged) that fell too far behind; resume from ResumeFrom.
type LaggedError struct {
	// SubscriptionID is the subscription that ended, 0 for a cache watch.
	SubscriptionID uint64
	// ResumeFrom is the first offset the client did not get.
	ResumeFrom uint64
	// Watch is set for cache_watch_lagged.
	Watch bool
}

// Error formats the error.
func (e *LaggedError) Error() string {
	if e.Watch {
		return fmt.Sprintf("conn: cache watch lagged; resume from %d", e.ResumeFrom)
	}
	return fmt.Sprintf("conn: subscription %d lagged; resume from %d", e.SubscriptionID, e.ResumeFrom)
}

// StreamDeletedError ends a subscription whose stream was deleted.
type StreamDeletedError struct {
	// SubscriptionID is the subscription that ended.
	SubscriptionID uint64
}

// Error formats the error.
func (e *StreamDeletedError) Error() string {
	return fmt.Sprintf("conn: subscription %d: stream deleted", e.SubscriptionID)
}

// TransportError wraps an error of the QUIC layer (connection closed, idle
// timeout, stream reset, ...). Unwrap reaches the quic-go error, e.g.
// *quic.ApplicationError with ErrorCode CloseShuttingDown when the broker
// went away; on the client side errors.Is(err, ErrBrokerShutdown) reports
// that case.
type TransportError struct {
	// Op is the operation that failed ("dial", "read event stream", ...).
	Op string
	// Err is the underlying (usually quic-go) error.
	Err error

	// client marks an error of a Client, for which a remote close with
	// CloseShuttingDown is a broker shutdown.
	client bool
}

// Is makes errors.Is(err, ErrBrokerShutdown) true for a client error caused
// by the broker closing the connection with CloseShuttingDown.
func (e *TransportError) Is(target error) bool {
	return target == ErrBrokerShutdown && e.client && isRemoteShutdown(e.Err)
}

// isRemoteShutdown reports whether err is the peer's connection close with
// CloseShuttingDown.
func isRemoteShutdown(err error) bool {
	var ae *quic.ApplicationError
	return errors.As(err, &ae) && ae.Remote && ae.ErrorCode == CloseShuttingDown
}

// Error formats the error.
func (e *TransportError) Error() string { return "conn: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *TransportError) Unwrap() error { return e.Err }

// transportErr wraps err in a *TransportError unless it already is one or
// is one of this package's or the codec's typed errors.
func transportErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var te *TransportError
	var fe *felix.Error
	var be *BrokerError
	if errors.As(err, &te) || errors.As(err, &fe) || errors.As(err, &be) || errors.Is(err, ErrClosed) || errors.Is(err, ErrProtocol) {
		return err
	}
	return &TransportError{Op: op, Err: err}
}

// clientErr is transportErr for the client side: the resulting
// *TransportError matches ErrBrokerShutdown when the broker closed the
// connection with CloseShuttingDown.
func clientErr(op string, err error) error {
	err = transportErr(op, err)
	if te, ok := err.(*TransportError); ok {
		te.client = true
	}
	return err
}

// protocolErr builds an ErrProtocol error with a detail.
func protocolErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
}

// notAdvertised builds an ErrNotAdvertised error naming what was missing.
func notAdvertised(what string) error {
	return fmt.Errorf("%w: %s", ErrNotAdvertised, what)
}
