package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flxproto/felix/client"
	"github.com/stretchr/testify/require"
)

// A broker dies silently (its packets stop, as after SIGKILL) under a
// program that publishes in a loop while a subscription of the same client
// is open: the publish in flight fails as ambiguous once the idle timeout
// noticed the loss, and the re-send is answered by the live broker within
// idle timeout + one dial timeout of the death. Re-dials of the dead broker
// (the subscription's resume, other calls) are shared and come after the
// live broker, so they do not take turns in front of the re-send.
func TestFailoverWithinIdlePlusOneDial(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	ra, rb := startRelay(t, a.addr), startRelay(t, b.addr)
	const dialTimeout = 2 * time.Second
	c, n := newClient(t, []string{ra.addr(), rb.addr()}, func(cfg *client.Config) { cfg.DialTimeout = dialTimeout })
	idle := connConfig(t).IdleTimeout
	_, err := c.Publish(ctxT(t), topic, []byte("first"), acked)
	require.NoError(t, err)
	dead := ra
	if n.wait(t, client.NoticeConnected, nil).Addr == rb.addr() {
		dead = rb
	}
	sub, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	go func() {
		for {
			if _, err := sub.Next(ctxT(t)); err != nil {
				return
			}
		}
	}()

	dead.dropAll.Store(true)
	died := time.Now()
	// The test's own bound: idle + one dial + slack for a loaded machine.
	bound := idle + dialTimeout + 3*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var ambiguous int
	for {
		_, err := c.Publish(ctx, topic, []byte("x"), acked)
		if err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "no answer from a live broker within %v of the death; last error: %v", bound, err)
		require.True(t, errors.Is(err, client.ErrAmbiguous), "the only failure is the outcome-unknown publish: %v", err)
		ambiguous++
	}
	took := time.Since(died)
	t.Logf("re-send answered %v after the death (idle %v + dial timeout %v = %v); %d ambiguous", took, idle, dialTimeout, idle+dialTimeout, ambiguous)
	require.LessOrEqual(t, ambiguous, 1, "one publish was in flight")
}
