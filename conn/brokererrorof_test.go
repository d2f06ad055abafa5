package conn_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// BrokerErrorOf converts what a broker would answer and invents nothing
// for an error no broker sent (a context's end).
func TestBrokerErrorOfInventsNothing(t *testing.T) {
	for _, err := range []error{nil, context.Canceled, context.DeadlineExceeded, fmt.Errorf("publish: %w", context.Canceled)} {
		require.Nil(t, conn.BrokerErrorOf(err), "%v", err)
	}
	be := conn.BrokerErrorOf(&felix.NotLeaderError{NodeID: "n1", Addr: "a:1", Generation: 2})
	require.Equal(t, felix.CodeNotLeader, be.Code)
	require.True(t, be.HasOwner)
	be = conn.BrokerErrorOf(errors.New("disk on fire"))
	require.Equal(t, felix.CodeInternal, be.Code)
	require.Equal(t, felix.RetryOutcomeUnknown, be.RetryClass())
}
