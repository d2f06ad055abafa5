package felix_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// The answer errors live in the codec now; their rules are tested here,
// where they are defined, as well as through the client's decision table.
func TestBrokerErrorIsAuthRefusedOnlyForAuth(t *testing.T) {
	auth := &felix.BrokerError{Message: "no", Code: felix.CodeUnauthenticated, Auth: true}
	other := &felix.BrokerError{Message: "busy", Code: felix.CodeOverloaded}
	require.ErrorIs(t, auth, felix.ErrAuthRefused)
	require.NotErrorIs(t, other, felix.ErrAuthRefused, "only a refused auth is ErrAuthRefused")
	require.NotErrorIs(t, auth, context.Canceled, "a refused auth matches no other sentinel")
	require.Contains(t, auth.Error(), "check the tenant id and the token")
}

func TestBrokerErrorRetryClass(t *testing.T) {
	for _, c := range []struct {
		e    *felix.BrokerError
		want felix.RetryClass
	}{
		{&felix.BrokerError{}, felix.RetryFatal},
		{&felix.BrokerError{Code: felix.CodeOverloaded}, felix.CodeOverloaded.DefaultRetry()},
		{&felix.BrokerError{Code: felix.CodeOverloaded, Retry: felix.RetryFatal}, felix.RetryFatal},
		{&felix.BrokerError{Code: felix.CodeNotFound, Retry: felix.RetryAfter, RetryAfter: time.Second}, felix.RetryAfter},
	} {
		require.Equal(t, c.want, c.e.RetryClass(), "%+v", c.e)
	}
}

func TestFrameLimitErrorIsFrameTooLarge(t *testing.T) {
	err := error(&felix.FrameLimitError{Size: 20 << 20, Limit: felix.DefaultMaxFrameBytes})
	require.ErrorIs(t, err, felix.ErrFrameTooLarge)
	var fe *felix.Error
	require.ErrorAs(t, err, &fe)
	require.Contains(t, err.Error(), "nothing was sent")
}

func TestPublishRefusedTail(t *testing.T) {
	_, ok := (&felix.PublishRefusedError{}).Tail()
	require.False(t, ok, "no refusal, no tail")
	e := &felix.PublishRefusedError{Refusal: &felix.PublishRefused{Reason: felix.PublishRefusalReason{Kind: felix.RefusalOffsetMismatch, Tail: 42}}}
	tail, ok := e.Tail()
	require.True(t, ok)
	require.Equal(t, uint64(42), tail)
}
