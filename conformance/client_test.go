package conformance_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/stretchr/testify/require"
)

func Test_client_concurrent_calls(t *testing.T) {
	run(t, "client.concurrent_calls", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		tp := fx.topic(fx.DurableStream)
		sub := fx.scSubscribe(fx.scDefault(), tp, client.SubscribeOptions{})
		const workers, each = 16, 10
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for g := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					_, err := fx.scPub(c, tp, []byte(fmt.Sprintf("w%02d-%02d", g, i)))
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "every concurrent publish succeeds")
		}
		want := map[string]bool{}
		for g := range workers {
			for i := range each {
				want[fmt.Sprintf("w%02d-%02d", g, i)] = true
			}
		}
		for range workers * each {
			p := string(fx.scNext(sub).Payload)
			require.True(t, want[p], "an uncorrupted, not duplicated payload: %q", p)
			delete(want, p)
		}
	})
}

func Test_client_close_is_idempotent(t *testing.T) {
	run(t, "client.close_is_idempotent", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		sub := fx.scSubscribe(c, fx.topic(fx.DurableStream), client.SubscribeOptions{})
		require.NoError(t, sub.Close())
		require.NotPanics(t, func() { _ = sub.Close() })
		w := fx.scWatch(c, fx.cache(fx.SingleShardCache), client.WatchOptions{Key: felix.Some(fx.key("close"))})
		require.NoError(t, w.Close())
		require.NotPanics(t, func() { _ = w.Close() })
		ss, err := c.SubscribeSharded(fx.ctx(), fx.topic(fx.DurableStream), client.ShardedOptions{})
		require.NoError(t, err)
		require.NoError(t, ss.Close())
		require.NotPanics(t, func() { _ = ss.Close() })
		require.NoError(t, c.Close())
		require.NotPanics(t, func() { _ = c.Close() })
		_, err = fx.scPub(c, fx.topic(fx.DurableStream), []byte("x"))
		require.ErrorIs(t, err, client.ErrClosed, "a closed client says so")
		_, err = sub.Next(fx.ctx())
		require.ErrorIs(t, err, client.ErrClosed, "so does a closed subscription")
	})
}

func Test_client_subscription_ends_cleanly(t *testing.T) {
	run(t, "client.subscription_ends_cleanly", func(t *testing.T, fx *Fx) {
		if fx.MovableStream == "" {
			fx.Skip("the fixture has no movable_stream: no way to make the broker close an event stream")
		}
		// A completed move makes the old owner close the event stream
		// (shard_moved as its last frame). This is the building block's
		// (conn.Client's) behaviour: the cluster-aware client resumes such
		// a subscription on the new owner instead (see
		// TestSubscriberSurvivesTwoShardMoves in package client), and ends
		// iteration only when a live broker finished the stream.
		sub := fx.subscribe(fx.client(), fx.topic(fx.MovableStream), conn.SubscribeOptions{})
		body, _ := json.Marshal(map[string]any{"stream": fx.MovableStream, "hold_ms": 1})
		fx.control("/fence", string(body))
		var end error
		for _, err := range sub.All(fx.ctx()) {
			if err != nil {
				end = err
				break
			}
		}
		// Reaching this line is the point: iteration ended. It must not
		// have been the hang guard that ended it.
		require.NoError(t, fx.ctx().Err(), "iteration ended because the broker closed the stream: %v", end)
	})
}
