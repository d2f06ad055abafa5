package conn

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

func TestAuthSentinelsMatchBothNames(t *testing.T) {
	be := &felix.BrokerError{Type: "error", Message: "bad token", Auth: true}
	require.ErrorIs(t, be, felix.ErrAuthRefused)
	require.ErrorIs(t, be, felix.ErrAuthRefused)
	ae := &felix.AuthError{Answer: &felix.ErrorMessage{Message: "bad token"}}
	require.ErrorIs(t, ae, felix.ErrAuthRefused)
	require.ErrorIs(t, ae, felix.ErrAuthRefused)
	require.NotErrorIs(t, &felix.BrokerError{Message: "x"}, felix.ErrAuthRefused)
	require.False(t, errors.Is(errors.New("x"), felix.ErrAuthRefused))
}

func TestBrokerErrorEmptyType(t *testing.T) {
	e := &felix.BrokerError{Message: "stream not found", Code: felix.CodeNotFound}
	require.Equal(t, "felix: broker error: stream not found [not_found]", e.Error())
	e = &felix.BrokerError{Type: "publish_error", RequestID: 3, Message: "m", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry}
	require.Equal(t, "felix: broker publish_error (request 3): m [shard_unavailable, retry]", e.Error())
	e = &felix.BrokerError{Message: "auth failed", Code: felix.CodeUnauthenticated, Retry: felix.RetryFatal, Auth: true}
	require.Equal(t, "felix: broker error: auth failed [unauthenticated, fatal] (check the tenant id and the token)", e.Error())
}
