package conformance_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conformance"
)

// brokerError requires err to be a broker's typed answer (not a transport
// failure) and returns it.
func (fx *Fx) brokerError(err error) *felix.BrokerError {
	fx.t.Helper()
	require.Error(fx.t, err)
	require.False(fx.t, isTransport(err), "a broker's answer, not a transport failure: %v", err)
	var be *felix.BrokerError
	require.ErrorAs(fx.t, err, &be)
	return be
}

func Test_error_unknown_stream_is_typed(t *testing.T) {
	run(t, "error.unknown_stream_is_typed", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		tp := fx.topic(fx.MissingStream)
		_, err := fx.scPub(c, tp, []byte("x"))
		be := fx.brokerError(err)
		require.Equal(t, felix.CodeNotFound, be.Code, "typed: no text to parse")
		_, err = c.Subscribe(fx.ctx(), tp, client.SubscribeOptions{})
		sbe := fx.brokerError(err)
		require.Equal(t, felix.CodeNotFound, sbe.Code)
		fx.Pass(conformance.Evidence{"publish_code": be.Code.String(), "subscribe_code": sbe.Code.String()})
	})
}

func Test_error_bad_offset_is_typed(t *testing.T) {
	run(t, "error.bad_offset_is_typed", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		tp := fx.topic(fx.DurableStream)
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
		earliest := sub.Info().StartOffset.V
		if earliest == 0 {
			fx.Skip("the fixture's durable stream has discarded no offset (earliest is 0)")
		}
		err := subscribeErr(fx, c, tp, client.SubscribeOptions{Start: felix.StartAt(0)})
		var ce *felix.CursorError
		require.ErrorAs(t, err, &ce, "identifiable")
		require.Equal(t, "too_old", ce.Reason)
		require.Equal(t, earliest, ce.Available, "recovery: restart from earliest")
		fx.Pass(conformance.Evidence{"reason": ce.Reason, "available": ce.Available})
	})
}

func Test_error_shard_unavailable_is_retryable(t *testing.T) {
	run(t, "error.shard_unavailable_is_retryable", func(t *testing.T, fx *Fx) {
		if fx.MovableStream == "" {
			fx.Skip("the fixture has no movable_stream")
		}
		// No retry budget: the client hands the refusal over instead of
		// retrying it until the move completes.
		c, _ := fx.scClient(fx.Addrs, func(cfg *client.Config) { cfg.MaxAttempts = -1 })
		tp := fx.topic(fx.MovableStream)
		_, err := fx.scPub(c, tp, []byte("before"))
		require.NoError(t, err)
		body, _ := json.Marshal(map[string]any{"stream": fx.MovableStream})
		fx.control("/fence", string(body))
		_, err = fx.scPub(c, tp, []byte("fenced"))
		be := fx.brokerError(err)
		require.Contains(t, []felix.ErrorCode{felix.CodeShardUnavailable, felix.CodeNotLeader}, be.Code)
		require.Contains(t, []felix.RetryClass{felix.RetryRetry, felix.RetryAfter, felix.RetryRedirect}, be.RetryClass(),
			"a retry class that allows re-sending")
		require.Equal(t, be.RetryClass(), client.RetryClassOf(err))
		// With a retry budget, the client re-sends it until the move
		// completes.
		r, n := fx.scClient(fx.Addrs, func(cfg *client.Config) { cfg.MaxAttempts = 1000 })
		after, err := fx.scPub(r, tp, []byte("after"))
		require.NoError(t, err)
		require.True(t, after.HasOffset, "re-sent until written")
		for _, ev := range n.since(0) {
			if ev.Kind == client.NoticeRetry {
				var be *felix.BrokerError
				require.ErrorAs(t, ev.Err, &be)
				require.Contains(t, []felix.ErrorCode{felix.CodeShardUnavailable, felix.CodeNotLeader}, be.Code)
			}
		}
		fx.Pass(conformance.Evidence{"code": be.Code.String(), "retry_class": be.RetryClass().String(), "offset_after": after.Offset})
	})
}

func Test_error_quorum_timeout_is_outcome_unknown(t *testing.T) {
	run(t, "error.quorum_timeout_is_outcome_unknown", func(t *testing.T, fx *Fx) {
		if fx.QuorumStream == "" {
			fx.Skip("the fixture has no quorum_stream")
		}
		c := fx.scDefault()
		tp := fx.topic(fx.QuorumStream)
		body, _ := json.Marshal(map[string]any{"stream": fx.QuorumStream})
		fx.control("/partition", string(body))
		t.Cleanup(func() { fx.control("/heal", "{}") })
		_, err := fx.scPub(c, tp, []byte("q"))
		be := fx.brokerError(err)
		require.Equal(t, felix.CodeQuorumTimeout, be.Code)
		require.Equal(t, felix.RetryOutcomeUnknown, be.RetryClass(), "may have been applied: not a refusal")
		require.True(t, errors.Is(err, client.ErrAmbiguous), "the client says so too")
		fx.control("/heal", "{}")
		_, err = fx.scPub(c, tp, []byte("q"))
		require.NoError(t, err)
		fx.Pass(conformance.Evidence{"code": be.Code.String(), "retry_class": be.RetryClass().String()})
	})
}
