package felix

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The answer errors: what a broker answered instead of a success, decoded
// into types a program matches with errors.As, whichever layer (conn, api,
// client) returned them. They carry no transport state, so the codec
// defines them once for every layer above it.

// ErrNotAdvertised: the request, field or encoding needs a flag or feature
// bit the peer did not advertise (client side) or offer (server side) on
// the stream it would travel on. The request or frame was not sent.
var ErrNotAdvertised = errors.New("felix: not advertised by the peer")

// ErrProtocol: the peer sent something the protocol does not allow at
// that point (an unexpected message type, an answer to an unknown
// request id, a malformed frame). The stream it came on is abandoned.
var ErrProtocol = errors.New("felix: protocol violation")

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
	Code ErrorCode
	// Retry is the retry class; 0 when not sent (use RetryClass).
	Retry RetryClass
	// Reason is detail.reason, "" when not sent.
	Reason string
	// RetryAfter is detail.retry_after_ms, 0 when not sent.
	RetryAfter time.Duration
	// Auth is set when the error answered an auth (see ErrAuthRefused).
	Auth bool
	// Owner names the shard owner of a forwarded batch whose binary ack
	// failed, valid when HasOwner (flag 0x0080).
	Owner    AckOwner
	HasOwner bool
}

// Error formats the error: "felix: broker <type> (request N): message
// [code, retry] reason R", with type "error" when Type is empty; an auth
// refused for good (retry class fatal) adds what to check (the broker
// never says whether the tenant or the token was wrong).
func (e *BrokerError) Error() string {
	typ := e.Type
	if typ == "" {
		typ = "error"
	}
	s := "felix: broker " + typ
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
	if e.Auth && e.RetryClass() == RetryFatal {
		// A retryable refusal (draining, throttled) says nothing about
		// the credentials.
		s += " (check the tenant id and the token)"
	}
	return s
}

// RetryClass returns the retry class the broker sent, or the code's default
// when it sent none (RetryFatal when there is no code either).
func (e *BrokerError) RetryClass() RetryClass {
	if e.Retry != 0 {
		return e.Retry
	}
	if e.Code != "" {
		return e.Code.DefaultRetry()
	}
	return RetryFatal
}

// Is makes errors.Is(err, ErrAuthRefused) true for a refused auth.
func (e *BrokerError) Is(target error) bool { return target == ErrAuthRefused && e.Auth }

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
	return fmt.Sprintf("felix: not leader; owner %q at %q (generation %d)", e.NodeID, e.Addr, e.Generation)
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

// Error formats the error with what to do about it.
func (e *CursorError) Error() string {
	s := fmt.Sprintf("felix: subscribe cursor %s: requested %d, available %d", e.Reason, e.Requested, e.Available)
	switch e.Reason {
	case "too_old":
		return s + fmt.Sprintf(": the records before %d were trimmed by retention; start at %d (or earliest) and accept the gap, or read faster than retention trims", e.Available, e.Available)
	case "in_future":
		return s + fmt.Sprintf(": the shard holds no record at %d yet (its next offset is %d); start at latest or earliest (or an offset below %d). An offset that existed before means the broker lost the stream (a broker that keeps streams in memory restarted) or this is another stream or broker", e.Requested, e.Available, e.Available)
	}
	return s
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
	Refusal *PublishRefused
}

// Tail returns the shard's next offset of an offset_mismatch refusal (a
// conditional publish or commit whose expected offset was stale).
func (e *PublishRefusedError) Tail() (uint64, bool) {
	if e.Refusal == nil || e.Refusal.Reason.Kind != RefusalOffsetMismatch {
		return 0, false
	}
	return e.Refusal.Reason.Tail, true
}

// Error formats the error.
func (e *PublishRefusedError) Error() string {
	return "felix: publish " + strconv.FormatUint(e.RequestID, 10) + " refused (" + e.Reason + "): " + e.Message
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
	return fmt.Sprintf("felix: subscription %d: shard moved to %q at %q (generation %d)", e.SubscriptionID, e.NodeID, e.Addr, e.Generation)
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
		return fmt.Sprintf("felix: cache watch lagged; resume from %d", e.ResumeFrom)
	}
	return fmt.Sprintf("felix: subscription %d lagged; resume from %d", e.SubscriptionID, e.ResumeFrom)
}

// StreamDeletedError ends a subscription whose stream was deleted.
type StreamDeletedError struct {
	// SubscriptionID is the subscription that ended.
	SubscriptionID uint64
}

// Error formats the error.
func (e *StreamDeletedError) Error() string {
	return fmt.Sprintf("felix: subscription %d: stream deleted", e.SubscriptionID)
}

// FrameLimitError refuses a request whose frame would be larger than the
// frame limit, before anything is written: nothing was sent and the
// stream stays usable. The limit is the client's configured frame limit
// (conn.Config.MaxFrameBytes, default DefaultMaxFrameBytes, 16 MiB, which is also a broker's default:
// a broker resets a stream that sends a larger frame)). errors.Is matches
// ErrFrameTooLarge; errors.As reaches the *Error.
type FrameLimitError struct {
	// Size is the frame's payload size in bytes.
	Size int
	// Limit is the frame limit in bytes.
	Limit uint32
}

// Error says how large the frame is, the limit and what to do.
func (e *FrameLimitError) Error() string {
	return "felix: request of " + strconv.Itoa(e.Size) + " bytes exceeds the frame limit of " +
		strconv.FormatUint(uint64(e.Limit), 10) + " bytes; nothing was sent (split the batch, or shrink the payloads)"
}

// Unwrap returns the codec's frame_too_large error.
func (e *FrameLimitError) Unwrap() error {
	return FrameTooLarge(uint64(e.Size), e.Limit)
}
