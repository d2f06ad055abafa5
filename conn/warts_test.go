package conn

import (
	"errors"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

func TestAuthSentinelsMatchBothNames(t *testing.T) {
	be := &BrokerError{Type: "error", Message: "bad token", Auth: true}
	require.ErrorIs(t, be, ErrAuthRejected)
	require.ErrorIs(t, be, felix.ErrAuthRefused)
	ae := &felix.AuthError{Answer: &felix.ErrorMessage{Message: "bad token"}}
	require.ErrorIs(t, ae, ErrAuthRejected)
	require.ErrorIs(t, ae, felix.ErrAuthRefused)
	require.NotErrorIs(t, &BrokerError{Message: "x"}, ErrAuthRejected)
	require.False(t, errors.Is(errors.New("x"), ErrAuthRejected))
}

func TestBrokerErrorEmptyType(t *testing.T) {
	e := &BrokerError{Message: "stream not found", Code: felix.CodeNotFound}
	require.Equal(t, "conn: broker error: stream not found [not_found]", e.Error())
	e = &BrokerError{Type: "publish_error", RequestID: 3, Message: "m", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry}
	require.Equal(t, "conn: broker publish_error (request 3): m [shard_unavailable, retry]", e.Error())
	e = &BrokerError{Message: "auth failed", Code: felix.CodeUnauthenticated, Retry: felix.RetryFatal, Auth: true}
	require.Equal(t, "conn: broker error: auth failed [unauthenticated, fatal] (check the tenant id and the token)", e.Error())
}
