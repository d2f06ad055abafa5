package conformance_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conformance"
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
		require.Empty(t, want)
		fx.Pass(conformance.Evidence{"publishes": workers * each, "delivered": workers * each})
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
		fx.Pass(conformance.Evidence{"closed_twice": []string{"subscription", "watch", "sharded subscription", "client"},
			"after_close": err.Error()})
	})
}

func Test_client_subscription_ends_cleanly(t *testing.T) {
	run(t, "client.subscription_ends_cleanly", func(t *testing.T, fx *Fx) {
		if fx.MovableStream == "" {
			fx.Skip("the fixture has no movable_stream: no way to make the broker close an event stream")
		}
		// A completed move makes the old owner close the event stream
		// (shard_moved as its last frame). The cluster-aware client never
		// waits such an end out: it notices it and resumes on the new
		// owner at the next offset (a subscription ends with io.EOF only
		// when a live broker finished the stream). And iteration ends,
		// rather than hangs, once the subscription is closed while All
		// waits.
		c, n := fx.scClient(fx.Addrs, func(cfg *client.Config) { cfg.MaxAttempts = 1000 })
		tp := fx.topic(fx.MovableStream)
		first := fx.scPublish(c, tp, fx.key("before"))
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{Start: felix.StartAt(first)})
		require.Equal(t, first, fx.scNext(sub).Offset)
		m := n.mark()
		body, _ := json.Marshal(map[string]any{"stream": fx.MovableStream, "hold_ms": 1})
		fx.control("/fence", string(body))
		p := fx.key("after")
		next := fx.scPublish(c, tp, p)
		ev := fx.scNext(sub)
		require.Equal(t, p, string(ev.Payload), "delivery continues after the broker closed the stream")
		require.Equal(t, next, ev.Offset)
		res := n.wait(fx, m, client.NoticeResumed, nil)
		var moved *felix.ShardMovedError
		require.ErrorAs(t, res.Err, &moved, "the broker closed the event stream with shard_moved")
		require.Equal(t, first+1, res.Offset, "resumed at the next offset")

		ended := make(chan error, 1)
		go func() {
			var last error
			for _, err := range sub.All(fx.ctx()) {
				last = err
			}
			ended <- last
		}()
		require.NoError(t, sub.Close())
		var end error
		select {
		case end = <-ended:
		case <-fx.ctx().Done():
			t.Fatal("iteration did not end when the subscription was closed")
		}
		require.ErrorIs(t, end, client.ErrClosed, "the end says why")
		require.NoError(t, fx.ctx().Err(), "not ended by the hang guard")
		fx.Pass(conformance.Evidence{"closed_by": moved.Error(), "resumed_at": res.Offset, "ended_with": end.Error()})
	})
}
