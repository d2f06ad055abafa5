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

// ErrorAnswer makes the error a server answers and invents nothing
// for an error no broker sent (a context's end).
func TestErrorAnswerInventsNothingForAContext(t *testing.T) {
	for _, err := range []error{nil, context.Canceled, context.DeadlineExceeded, fmt.Errorf("publish: %w", context.Canceled)} {
		require.Nil(t, conn.ErrorAnswer(err), "%v", err)
	}
	be := conn.ErrorAnswer(&felix.NotLeaderError{NodeID: "n1", Addr: "a:1", Generation: 2})
	require.Equal(t, felix.CodeNotLeader, be.Code)
	require.True(t, be.HasOwner)
	be = conn.ErrorAnswer(errors.New("disk on fire"))
	require.Equal(t, felix.CodeInternal, be.Code)
	require.Equal(t, felix.RetryOutcomeUnknown, be.RetryClass())
}
