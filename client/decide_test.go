package client

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// The decision table over every error kind × safe to re-send: the action
// the retry loop takes and the retry class RetryClassOf reports.
func TestDecisionTable(t *testing.T) {
	owner := felix.AckOwner{NodeID: "n2", Addr: "127.0.0.1:9", Generation: 4}
	broker := func(code felix.ErrorCode, retry felix.RetryClass) *felix.BrokerError {
		return &felix.BrokerError{Type: "error", Code: code, Retry: retry, Message: string(code)}
	}
	te := &conn.TransportError{Op: "read", Err: io.ErrUnexpectedEOF}
	cases := []struct {
		name         string
		err          error
		safe, unsafe action
		class        felix.RetryClass
		budget       int
		hint         bool
	}{
		{"ambiguous", &AmbiguousError{Op: "publish", Err: te}, actAmbiguous, actAmbiguous, felix.RetryOutcomeUnknown, 0, false},
		{"context canceled", context.Canceled, actReturn, actAmbiguous, felix.RetryFatal, 0, false},
		{"deadline", fmt.Errorf("publish: %w", context.DeadlineExceeded), actReturn, actAmbiguous, felix.RetryFatal, 0, false},
		{"dial unreachable", &notSent{context.DeadlineExceeded}, actFailover, actFailover, felix.RetryRetry, 0, false},
		{"dial refused transport", &notSent{te}, actFailover, actFailover, felix.RetryRetry, 0, false},
		{"dial missing port", &notSent{&conn.DialError{Addr: "localhost", Kind: conn.ErrBadAddress, Err: &net.AddrError{Err: "missing port in address", Addr: "localhost"}}}, actReturn, actReturn, felix.RetryFatal, 0, false},
		{"dial unknown port", &notSent{&conn.DialError{Addr: "localhost:fleix", Kind: conn.ErrBadAddress, Err: &net.DNSError{Err: "unknown port", Name: "udp/fleix", IsNotFound: true}}}, actReturn, actReturn, felix.RetryFatal, 0, false},
		{"dial untrusted certificate", &notSent{&conn.DialError{Addr: "127.0.0.1:7447", Kind: conn.ErrCertUntrusted, Err: fmt.Errorf("CRYPTO_ERROR: %w", x509.UnknownAuthorityError{})}}, actReturn, actReturn, felix.RetryFatal, 0, false},
		{"dial credentials refused", &notSent{&felix.BrokerError{Auth: true, Code: felix.CodeUnauthenticated}}, actReturn, actReturn, felix.RetryFatal, 0, false},
		{"auth retryable", &felix.BrokerError{Auth: true, Code: felix.CodeOverloaded}, actFailover, actFailover, felix.RetryAfter, 0, false},
		{"not leader", &felix.NotLeaderError{NodeID: "n2", Addr: "127.0.0.1:9", Generation: 3}, actRedirect, actRedirect, felix.RetryRedirect, 0, true},
		{"not leader refusal", &felix.PublishRefusedError{Reason: "not_leader"}, actRedirect, actRedirect, felix.RetryRedirect, 0, false},
		{"sequence gap", &felix.PublishRefusedError{Reason: "sequence_gap"}, actReturn, actReturn, felix.RetryFatal, 0, false},
		{"broker redirect", &felix.BrokerError{Code: felix.CodeNotLeader, Retry: felix.RetryRedirect, HasOwner: true, Owner: owner}, actRedirect, actRedirect, felix.RetryRedirect, 0, true},
		{"broker redirect no owner", broker(felix.CodeNotLeader, felix.RetryRedirect), actRedirect, actRedirect, felix.RetryRedirect, 0, false},
		{"not found", broker(felix.CodeNotFound, 0), actRetry, actRetry, felix.RetryFatal, notFoundAttempts, false},
		{"retry", broker(felix.CodeOverloaded, felix.RetryRetry), actRetry, actRetry, felix.RetryRetry, 0, false},
		{"retry after", &felix.BrokerError{Code: felix.CodeOverloaded, Retry: felix.RetryAfter, RetryAfter: time.Second}, actRetry, actRetry, felix.RetryAfter, 0, false},
		{"retry with owner", &felix.BrokerError{Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry, HasOwner: true, Owner: owner}, actRetry, actRetry, felix.RetryRetry, 0, true},
		{"draining", broker(felix.CodeDraining, 0), actFailover, actFailover, felix.RetryRetry, 0, false},
		{"outcome unknown", broker(felix.CodeInternal, felix.RetryOutcomeUnknown), actRetry, actAmbiguous, felix.RetryOutcomeUnknown, 0, false},
		{"fatal", broker(felix.CodeForbidden, 0), actReturn, actReturn, felix.RetryFatal, 0, false},
		{"no code", &felix.BrokerError{Message: "old broker"}, actReturn, actReturn, felix.RetryFatal, 0, false},
		{"not advertised", fmt.Errorf("x: %w", felix.ErrNotAdvertised), actReturn, actReturn, felix.RetryFatal, 0, false},
		{"codec", &felix.Error{Class: felix.ErrInvalidValue}, actReturn, actReturn, felix.RetryFatal, 0, false},
		{"cursor", &felix.CursorError{Reason: "too_old"}, actReturn, actReturn, felix.RetryFatal, 0, false},
		{"transport", te, actFailover, actAmbiguous, felix.RetryOutcomeUnknown, 0, false},
		{"protocol", fmt.Errorf("x: %w", felix.ErrProtocol), actFailover, actAmbiguous, felix.RetryOutcomeUnknown, 0, false},
		{"closed under the call", ErrClosed, actFailover, actAmbiguous, felix.RetryOutcomeUnknown, 0, false},
		{"eof", io.EOF, actFailover, actAmbiguous, felix.RetryOutcomeUnknown, 0, false},
		{"unknown", errors.New("something else"), actReturn, actReturn, felix.RetryFatal, 0, false},
		// An event stream's end (the resumer's rows).
		{"shard moved", &felix.ShardMovedError{NodeID: "n2", Addr: "127.0.0.1:9", Generation: 5, HasResumeFrom: true, ResumeFrom: 7}, actMoved, actMoved, felix.RetryRedirect, 0, true},
		{"lagged", &felix.LaggedError{ResumeFrom: 3}, actLagged, actLagged, felix.RetryRetry, 0, false},
		{"stream deleted", &felix.StreamDeletedError{}, actReturn, actReturn, felix.RetryFatal, 0, false},
		{"stream ended", endOfStream(io.EOF), actEndLive, actEndLive, felix.RetryFatal, 0, false},
		{"stream lost", endOfStream(te), actFailover, actAmbiguous, felix.RetryOutcomeUnknown, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, safe := range []bool{true, false} {
				v := decide(tc.err, safe)
				want := tc.unsafe
				if safe {
					want = tc.safe
				}
				require.Equal(t, want.String(), v.act.String(), "safe=%v", safe)
				require.Equal(t, tc.budget, v.budget, "safe=%v", safe)
				require.Equal(t, tc.hint, v.hint != nil, "safe=%v", safe)
			}
			require.Equal(t, tc.class.String(), RetryClassOf(tc.err).String(), "RetryClassOf reads the table")
		})
	}
	v := decide(&felix.BrokerError{Code: felix.CodeOverloaded, Retry: felix.RetryAfter, RetryAfter: 1500 * time.Millisecond}, true)
	require.Equal(t, 1500*time.Millisecond, v.retryAfter, "retry_after reaches the wait")
	v = decide(&felix.NotLeaderError{NodeID: "n2", Addr: "a:1", Generation: 3}, true)
	require.Equal(t, ownerHint{nodeID: "n2", addr: "a:1", gen: 3}, *v.hint)
	require.Zero(t, RetryClassOf(nil))
	v = decide(&felix.ShardMovedError{NodeID: "n2", Addr: "a:1", Generation: 5, HasResumeFrom: true, ResumeFrom: 7}, true)
	require.Equal(t, ownerHint{nodeID: "n2", addr: "a:1", gen: 5}, *v.hint, "the owner shard_moved names")
	require.Equal(t, uint64(7), v.resumeFrom)
	require.True(t, v.hasResumeFrom)
	v = decide(&felix.ShardMovedError{NodeID: "n2", Addr: "a:1"}, true)
	require.False(t, v.hasResumeFrom, "no resume_from: none")
	v = decide(&felix.LaggedError{ResumeFrom: 3}, true)
	require.Equal(t, uint64(3), v.resumeFrom)
	v = decide(&felix.BrokerError{Code: felix.CodeOverloaded, Retry: felix.RetryAfter, RetryAfter: time.Hour}, true)
	require.Equal(t, time.Hour, v.retryAfter, "an event stream's end with retry_after waits it")
}
