package felix

import (
	"strconv"
	"strings"
)

// ErrorCode is a protocol error code in its string form, as carried by JSON
// "code" members. Known codes have a u16 number used by binary acks
// (FlagBinaryPublishAckCode). Codes outside the table are kept as received:
// an unknown JSON string stays that string, and an unknown binary number n
// becomes "code_<n>", which encodes back to n (a project rule: upstream
// writes 0), so decode→encode is the identity.
type ErrorCode string

// The known error codes (docs/errors.md §3).
const (
	CodeUnauthenticated  ErrorCode = "unauthenticated"   // 1, fatal
	CodeForbidden        ErrorCode = "forbidden"         // 2, fatal
	CodeNotFound         ErrorCode = "not_found"         // 3, retry_after
	CodeInvalidRequest   ErrorCode = "invalid_request"   // 4, fatal
	CodeShardUnavailable ErrorCode = "shard_unavailable" // 5, retry
	CodeNotLeader        ErrorCode = "not_leader"        // 6, redirect
	CodeQuorumTimeout    ErrorCode = "quorum_timeout"    // 7, outcome_unknown
	CodeLeadershipLost   ErrorCode = "leadership_lost"   // 8, outcome_unknown
	CodeUnacknowledged   ErrorCode = "unacknowledged"    // 9, outcome_unknown
	CodeOverloaded       ErrorCode = "overloaded"        // 10, retry_after
	CodeLimitExceeded    ErrorCode = "limit_exceeded"    // 11, fatal
	CodeDraining         ErrorCode = "draining"          // 12, retry
	CodeInternal         ErrorCode = "internal"          // 13, outcome_unknown
	CodeStorage          ErrorCode = "storage"           // 14, outcome_unknown
	CodeStaleClaim       ErrorCode = "stale_claim"       // 15, retry
	// CodeRevoked is known in JSON only: its binary number is unconfirmed,
	// so it encodes as 0 in a binary ack.
	CodeRevoked ErrorCode = "revoked"
	// CodeStaleWidth is known in JSON only: its binary number is unconfirmed,
	// so it encodes as 0 in a binary ack.
	CodeStaleWidth ErrorCode = "stale_width"
)

var codeTable = [...]struct {
	code  ErrorCode
	retry RetryClass
}{
	1:  {CodeUnauthenticated, RetryFatal},
	2:  {CodeForbidden, RetryFatal},
	3:  {CodeNotFound, RetryAfter},
	4:  {CodeInvalidRequest, RetryFatal},
	5:  {CodeShardUnavailable, RetryRetry},
	6:  {CodeNotLeader, RetryRedirect},
	7:  {CodeQuorumTimeout, RetryOutcomeUnknown},
	8:  {CodeLeadershipLost, RetryOutcomeUnknown},
	9:  {CodeUnacknowledged, RetryOutcomeUnknown},
	10: {CodeOverloaded, RetryAfter},
	11: {CodeLimitExceeded, RetryFatal},
	12: {CodeDraining, RetryRetry},
	13: {CodeInternal, RetryOutcomeUnknown},
	14: {CodeStorage, RetryOutcomeUnknown},
	15: {CodeStaleClaim, RetryRetry},
}

// ErrorCodeFromNumber returns the code for binary number n: a known code,
// or "code_<n>" for any other number (including 0).
func ErrorCodeFromNumber(n uint16) ErrorCode {
	if n > 0 && int(n) < len(codeTable) {
		return codeTable[n].code
	}
	return ErrorCode("code_" + strconv.FormatUint(uint64(n), 10))
}

// Number returns the u16 written in a binary ack: the table number of a
// known code, n for "code_<n>" (canonical decimal, n ≤ 65535), else 0.
func (c ErrorCode) Number() uint16 {
	for i := 1; i < len(codeTable); i++ {
		if codeTable[i].code == c {
			return uint16(i)
		}
	}
	if s, ok := strings.CutPrefix(string(c), "code_"); ok && s != "" && (s == "0" || s[0] != '0') {
		if n, err := strconv.ParseUint(s, 10, 16); err == nil {
			return uint16(n)
		}
	}
	return 0
}

// Known reports whether c is one of the codes of the protocol table
// (including the JSON-only CodeRevoked and CodeStaleWidth).
func (c ErrorCode) Known() bool {
	if c == CodeRevoked || c == CodeStaleWidth {
		return true
	}
	for i := 1; i < len(codeTable); i++ {
		if codeTable[i].code == c {
			return true
		}
	}
	return false
}

// DefaultRetry returns the retry class brokers send with c by default.
// Unknown codes (and revoked / stale_width, whose defaults are unconfirmed)
// return RetryFatal.
func (c ErrorCode) DefaultRetry() RetryClass {
	for i := 1; i < len(codeTable); i++ {
		if codeTable[i].code == c {
			return codeTable[i].retry
		}
	}
	return RetryFatal
}

// String returns the code's string form.
func (c ErrorCode) String() string { return string(c) }

// RetryClass tells a client what to do after a failure. Its value is the
// byte carried in binary acks.
type RetryClass uint8

// Retry classes.
const (
	RetryRetry          RetryClass = 1 // nothing applied; resending is safe
	RetryAfter          RetryClass = 2 // nothing applied; wait first
	RetryRedirect       RetryClass = 3 // nothing applied; send to the shard owner
	RetryOutcomeUnknown RetryClass = 4 // may have been applied; resend only idempotent requests
	RetryFatal          RetryClass = 5 // will fail the same way again
)

var retryNames = [...]string{
	RetryRetry:          "retry",
	RetryAfter:          "retry_after",
	RetryRedirect:       "redirect",
	RetryOutcomeUnknown: "outcome_unknown",
	RetryFatal:          "fatal",
}

// RetryClassFromByte reads a binary retry byte; an unknown byte (including 0)
// reads as RetryFatal.
func RetryClassFromByte(b byte) RetryClass {
	if b >= 1 && b <= 5 {
		return RetryClass(b)
	}
	return RetryFatal
}

// ParseRetryClass reads a JSON retry string; an unknown string reads as
// RetryFatal.
func ParseRetryClass(s string) RetryClass {
	for i := 1; i < len(retryNames); i++ {
		if retryNames[i] == s {
			return RetryClass(i)
		}
	}
	return RetryFatal
}

// String returns the JSON form ("retry", "retry_after", ...). A value
// outside 1..5 renders as "fatal", the way it would be read.
func (r RetryClass) String() string {
	if r >= 1 && r <= 5 {
		return retryNames[r]
	}
	return retryNames[RetryFatal]
}

// AckMode says when a publish is acknowledged. Its value is the byte carried
// in the binary acked prefix (AckNone has no binary form).
type AckMode uint8

// Ack modes.
const (
	AckNone       AckMode = 0 // fire-and-forget (JSON only)
	AckPerMessage AckMode = 1 // one answer per message
	AckPerBatch   AckMode = 2 // one answer per batch
)

// String returns the JSON form: "none", "per_message" or "per_batch".
func (m AckMode) String() string {
	switch m {
	case AckNone:
		return "none"
	case AckPerMessage:
		return "per_message"
	case AckPerBatch:
		return "per_batch"
	}
	return "ack_mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseAckMode reads the JSON form of an ack mode.
func ParseAckMode(s string) (AckMode, bool) {
	switch s {
	case "none":
		return AckNone, true
	case "per_message":
		return AckPerMessage, true
	case "per_batch":
		return AckPerBatch, true
	}
	return 0, false
}
