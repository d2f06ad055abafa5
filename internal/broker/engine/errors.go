package engine

import (
	"errors"
	"strconv"

	"github.com/flxproto/felix"
)

// ErrClosed is returned by Subscription.Next and Watch.Next once the
// subscription or watch has ended (closed by its owner or by Engine.Close).
var ErrClosed = errors.New("engine: closed")

// Error is a refusal with a protocol error code, for the transport to turn
// into an error or publish_error frame.
type Error struct {
	// Code is the protocol error code.
	Code felix.ErrorCode
	// Retry is the retry class to send with it.
	Retry felix.RetryClass
	// Message is the prose sent to every client.
	Message string
	// Reason is the optional detail.reason.
	Reason string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

func errorf(code felix.ErrorCode, msg string) *Error {
	return &Error{Code: code, Retry: code.DefaultRetry(), Message: msg}
}

// CursorError says a start position cannot be served
// (subscribe_cursor_error).
type CursorError struct {
	// Reason is "too_old" or "in_future".
	Reason string
	// Requested is the offset that was asked for.
	Requested uint64
	// Available is the oldest retained offset (too_old) or the tail
	// (in_future).
	Available uint64
}

// Cursor error reasons.
const (
	CursorTooOld   = "too_old"
	CursorInFuture = "in_future"
)

// Error describes the cursor error.
func (e *CursorError) Error() string {
	return "engine: cursor " + e.Reason + ": requested " + strconv.FormatUint(e.Requested, 10) +
		", available " + strconv.FormatUint(e.Available, 10)
}

// RefusalReason is why an idempotent publish was not applied.
type RefusalReason uint8

// Refusal reasons (publish_refused).
const (
	RefusedUnknownProducer RefusalReason = iota + 1
	RefusedSequenceExpired
	RefusedSequenceReused
	RefusedSequenceGap
	RefusedOffsetMismatch
)

// String returns the wire name of the reason.
func (r RefusalReason) String() string {
	switch r {
	case RefusedUnknownProducer:
		return "unknown_producer"
	case RefusedSequenceExpired:
		return "sequence_expired"
	case RefusedSequenceReused:
		return "sequence_reused"
	case RefusedSequenceGap:
		return "sequence_gap"
	case RefusedOffsetMismatch:
		return "offset_mismatch"
	}
	return "refusal(" + strconv.Itoa(int(r)) + ")"
}

// Refusal is an idempotent publish that was not applied (publish_refused).
type Refusal struct {
	// Reason is the typed reason.
	Reason RefusalReason
	// Expected is the next sequence the shard would append (sequence_gap).
	Expected uint64
	// Tail is the shard's next offset as checked (offset_mismatch).
	Tail uint64
	// Message is the prose for the message field.
	Message string
}

// Error returns the message.
func (r *Refusal) Error() string { return r.Message }
