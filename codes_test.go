package felix_test

import (
	"strconv"
	"testing"

	"github.com/flxproto/felix"
)

// The code table of docs/errors.md §3, restated independently.
var specCodes = []struct {
	code  felix.ErrorCode
	str   string
	num   uint16
	retry string
}{
	{felix.CodeUnauthenticated, "unauthenticated", 1, "fatal"},
	{felix.CodeForbidden, "forbidden", 2, "fatal"},
	{felix.CodeNotFound, "not_found", 3, "retry_after"},
	{felix.CodeInvalidRequest, "invalid_request", 4, "fatal"},
	{felix.CodeShardUnavailable, "shard_unavailable", 5, "retry"},
	{felix.CodeNotLeader, "not_leader", 6, "redirect"},
	{felix.CodeQuorumTimeout, "quorum_timeout", 7, "outcome_unknown"},
	{felix.CodeLeadershipLost, "leadership_lost", 8, "outcome_unknown"},
	{felix.CodeUnacknowledged, "unacknowledged", 9, "outcome_unknown"},
	{felix.CodeOverloaded, "overloaded", 10, "retry_after"},
	{felix.CodeLimitExceeded, "limit_exceeded", 11, "fatal"},
	{felix.CodeDraining, "draining", 12, "retry"},
	{felix.CodeInternal, "internal", 13, "outcome_unknown"},
	{felix.CodeStorage, "storage", 14, "outcome_unknown"},
	{felix.CodeStaleClaim, "stale_claim", 15, "retry"},
}

func TestErrorCodeTable(t *testing.T) {
	for _, sc := range specCodes {
		if string(sc.code) != sc.str || sc.code.String() != sc.str {
			t.Errorf("code %q, want %q", sc.code, sc.str)
		}
		if sc.code.Number() != sc.num {
			t.Errorf("%s.Number() = %d, want %d", sc.str, sc.code.Number(), sc.num)
		}
		if got := felix.ErrorCodeFromNumber(sc.num); got != sc.code {
			t.Errorf("ErrorCodeFromNumber(%d) = %q, want %q", sc.num, got, sc.code)
		}
		if got := sc.code.DefaultRetry().String(); got != sc.retry {
			t.Errorf("%s default retry %q, want %q", sc.str, got, sc.retry)
		}
		if !sc.code.Known() {
			t.Errorf("%s not Known", sc.str)
		}
	}
	// revoked and stale_width: known in JSON, no confirmed number.
	for _, c := range []felix.ErrorCode{felix.CodeRevoked, felix.CodeStaleWidth} {
		if !c.Known() || c.Number() != 0 || c.DefaultRetry() != felix.RetryFatal {
			t.Errorf("%s: known %v number %d retry %v", c, c.Known(), c.Number(), c.DefaultRetry())
		}
	}
	if felix.CodeRevoked != "revoked" || felix.CodeStaleWidth != "stale_width" {
		t.Error("revoked / stale_width strings")
	}
}

// Every u16 decodes to a code that encodes back to the same number.
func TestErrorCodeNumberRoundTrip(t *testing.T) {
	for n := range 1 << 16 {
		c := felix.ErrorCodeFromNumber(uint16(n))
		if c.Number() != uint16(n) {
			t.Fatalf("ErrorCodeFromNumber(%d) = %q, Number() = %d", n, c, c.Number())
		}
		if n == 0 || n > 15 {
			if want := "code_" + strconv.Itoa(n); string(c) != want {
				t.Fatalf("ErrorCodeFromNumber(%d) = %q, want %q", n, c, want)
			}
			if c.Known() {
				t.Fatalf("%q reported Known", c)
			}
		}
	}
	// Strings that are neither known nor canonical code_<u16> have number 0.
	for _, s := range []string{"", "code_", "code_65536", "code_007", "code_-1", "code_+3", "CODE_3", "teapot", "code_1x"} {
		if n := felix.ErrorCode(s).Number(); n != 0 {
			t.Errorf("%q.Number() = %d, want 0", s, n)
		}
		if felix.ErrorCode(s).DefaultRetry() != felix.RetryFatal {
			t.Errorf("%q default retry not fatal", s)
		}
	}
}

func TestRetryClass(t *testing.T) {
	names := []string{"", "retry", "retry_after", "redirect", "outcome_unknown", "fatal"}
	for b := range 256 {
		rc := felix.RetryClassFromByte(byte(b))
		want := felix.RetryFatal
		if b >= 1 && b <= 5 {
			want = felix.RetryClass(b)
		}
		if rc != want {
			t.Fatalf("RetryClassFromByte(%d) = %d, want %d", b, rc, want)
		}
	}
	for i := 1; i <= 5; i++ {
		rc := felix.RetryClass(i)
		if rc.String() != names[i] || felix.ParseRetryClass(names[i]) != rc {
			t.Errorf("retry %d: String %q, parse %d", i, rc.String(), felix.ParseRetryClass(names[i]))
		}
	}
	if felix.RetryRetry != 1 || felix.RetryAfter != 2 || felix.RetryRedirect != 3 || felix.RetryOutcomeUnknown != 4 || felix.RetryFatal != 5 {
		t.Error("retry class byte values")
	}
	for _, s := range []string{"", "Retry", "later", "fatal "} {
		if felix.ParseRetryClass(s) != felix.RetryFatal {
			t.Errorf("ParseRetryClass(%q) not fatal", s)
		}
	}
	if felix.RetryClass(0).String() != "fatal" || felix.RetryClass(9).String() != "fatal" {
		t.Error("out-of-range retry class should render as fatal")
	}
}

func TestAckMode(t *testing.T) {
	tests := []struct {
		m    felix.AckMode
		s    string
		wire byte
	}{
		{felix.AckNone, "none", 0},
		{felix.AckPerMessage, "per_message", 1},
		{felix.AckPerBatch, "per_batch", 2},
	}
	for _, tc := range tests {
		if tc.m.String() != tc.s || byte(tc.m) != tc.wire {
			t.Errorf("%d: %q", tc.m, tc.m.String())
		}
		if m, ok := felix.ParseAckMode(tc.s); !ok || m != tc.m {
			t.Errorf("ParseAckMode(%q) = %v, %v", tc.s, m, ok)
		}
	}
	if _, ok := felix.ParseAckMode("per_stream"); ok {
		t.Error("ParseAckMode accepted an unknown mode")
	}
	if s := felix.AckMode(7).String(); s != "ack_mode(7)" {
		t.Errorf("AckMode(7) = %q", s)
	}
}
