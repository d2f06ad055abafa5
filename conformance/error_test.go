package conformance_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/stretchr/testify/require"
)

// brokerError requires err to be a broker's typed answer (not a transport
// failure) and returns it.
func (fx *Fx) brokerError(err error) *conn.BrokerError {
	fx.t.Helper()
	require.Error(fx.t, err)
	require.False(fx.t, isTransport(err), "a broker's answer, not a transport failure: %v", err)
	var be *conn.BrokerError
	require.ErrorAs(fx.t, err, &be)
	return be
}

func Test_error_unknown_stream_is_typed(t *testing.T) {
	run(t, "error.unknown_stream_is_typed", func(t *testing.T, fx *Fx) {
		c := fx.client()
		tp := fx.topic(fx.MissingStream)
		_, err := fx.publish(c, tp, []byte("x"))
		be := fx.brokerError(err)
		require.Equal(t, felix.CodeNotFound, be.Code, "typed: no text to parse")
		_, err = c.Subscribe(fx.ctx(), tp, conn.SubscribeOptions{})
		be = fx.brokerError(err)
		require.Equal(t, felix.CodeNotFound, be.Code)
	})
}

func Test_error_bad_offset_is_typed(t *testing.T) {
	run(t, "error.bad_offset_is_typed", func(t *testing.T, fx *Fx) {
		c := fx.client()
		tp := fx.topic(fx.DurableStream)
		sub := fx.subscribe(c, tp, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
		earliest := sub.Info().StartOffset.V
		if earliest == 0 {
			fx.Skip("the fixture's durable stream has discarded no offset (earliest is 0)")
		}
		err := subscribeErr(fx, c, tp, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartOffset, Offset: 0}})
		var ce *conn.CursorError
		require.ErrorAs(t, err, &ce, "identifiable")
		require.Equal(t, "too_old", ce.Reason)
		require.Equal(t, earliest, ce.Available, "recovery: restart from earliest")
	})
}

func Test_error_shard_unavailable_is_retryable(t *testing.T) {
	run(t, "error.shard_unavailable_is_retryable", func(t *testing.T, fx *Fx) {
		if fx.MovableStream == "" {
			fx.Skip("the fixture has no movable_stream")
		}
		c := fx.client()
		tp := fx.topic(fx.MovableStream)
		_, err := fx.publish(c, tp, []byte("before"))
		require.NoError(t, err)
		body, _ := json.Marshal(map[string]any{"stream": fx.MovableStream})
		fx.control("/fence", string(body))
		_, err = fx.publish(c, tp, []byte("fenced"))
		be := fx.brokerError(err)
		require.Contains(t, []felix.ErrorCode{felix.CodeShardUnavailable, felix.CodeNotLeader}, be.Code)
		require.Contains(t, []felix.RetryClass{felix.RetryRetry, felix.RetryAfter, felix.RetryRedirect}, be.RetryClass(),
			"a retry class that allows re-sending")
		// Re-sending succeeds once the move completes.
		for {
			_, err = fx.publish(c, tp, []byte("after"))
			if err == nil {
				break
			}
			be = fx.brokerError(err)
			require.Contains(t, []felix.ErrorCode{felix.CodeShardUnavailable, felix.CodeNotLeader}, be.Code)
			select {
			case <-fx.ctx().Done():
				t.Fatal("the move never completed")
			case <-time.After(5 * time.Millisecond): // a retry pace, not a timing assertion
			}
		}
	})
}

func Test_error_quorum_timeout_is_outcome_unknown(t *testing.T) {
	run(t, "error.quorum_timeout_is_outcome_unknown", func(t *testing.T, fx *Fx) {
		if fx.QuorumStream == "" {
			fx.Skip("the fixture has no quorum_stream")
		}
		c := fx.client()
		tp := fx.topic(fx.QuorumStream)
		body, _ := json.Marshal(map[string]any{"stream": fx.QuorumStream})
		fx.control("/partition", string(body))
		t.Cleanup(func() { fx.control("/heal", "{}") })
		_, err := fx.publish(c, tp, []byte("q"))
		be := fx.brokerError(err)
		require.Equal(t, felix.CodeQuorumTimeout, be.Code)
		require.Equal(t, felix.RetryOutcomeUnknown, be.RetryClass(), "may have been applied: not a refusal")
		fx.control("/heal", "{}")
		_, err = fx.publish(c, tp, []byte("q"))
		require.NoError(t, err)
	})
}
