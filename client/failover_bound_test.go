package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
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
	stopReader := readAll(t, sub)
	defer stopReader()

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

// The only broker dies silently under a publishing program with an open
// subscription: the re-send fails with a clear error (no answer from the
// broker) within idle timeout + one dial timeout of the death, instead of
// re-dialling the dead broker for the whole retry budget, in turns with
// the subscription's resume.
func TestReSendToDeadBrokerFailsWithinIdlePlusOneDial(t *testing.T) {
	b := startBroker(t)
	r := startRelay(t, b.addr)
	const dialTimeout = 2 * time.Second
	c, _ := newClient(t, []string{r.addr()}, func(cfg *client.Config) {
		cfg.DialTimeout = dialTimeout
		cfg.BackoffBase, cfg.BackoffMax = 50*time.Millisecond, time.Second
	})
	idle := connConfig(t).IdleTimeout
	_, err := c.Publish(ctxT(t), topic, []byte("first"), acked)
	require.NoError(t, err)
	sub, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{})
	require.NoError(t, err)
	stopReader := readAll(t, sub)
	defer stopReader()

	r.dropAll.Store(true)
	died := time.Now()
	bound := idle + dialTimeout + 3*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var last error
	for range 3 {
		_, last = c.Publish(ctx, topic, []byte("x"), acked)
		require.Error(t, last)
		require.NoError(t, ctx.Err(), "no clear error within %v of the death; last error: %v", bound, last)
		if !errors.Is(last, client.ErrAmbiguous) {
			break
		}
	}
	took := time.Since(died)
	t.Logf("re-send failed %v after the death (idle %v + dial timeout %v = %v): %v", took, idle, dialTimeout, idle+dialTimeout, last)
	require.ErrorIs(t, last, conn.ErrNoAnswer, "the re-send names the dead broker")
	require.Contains(t, last.Error(), "no answer from "+r.addr())
}

// readAll reads sub until the returned stop, which closes sub and waits
// for the reader to end.
func readAll(t *testing.T, sub *client.Subscription) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := sub.Next(ctx); err != nil {
				return
			}
		}
	}()
	return func() {
		cancel()
		sub.Close()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("the subscription's reader did not end after Close")
		}
	}
}

// The reference cluster loses the shard owner (Kill: a crash) under a
// program that publishes with an open subscription: a publish re-sent
// after the kill is answered by a survivor within idle timeout + one
// dial timeout.
func TestClusterFailoverWithinIdlePlusOneDial(t *testing.T) {
	cl := startCluster(t)
	tp := clusterTopic(cluster.MovableStream)
	const dialTimeout = 2 * time.Second
	c, n := clusterClient(t, cl, func(cfg *client.Config) { cfg.DialTimeout = dialTimeout })
	idle := connConfig(t).IdleTimeout
	owner, _ := cl.Owner(cluster.MovableStream, 0)
	for range 3 {
		_, err := c.Publish(ctxT(t), tp, []byte("warm"), acked)
		require.NoError(t, err)
	}
	n.wait(t, client.NoticeConnected, func(ev client.Notice) bool { return ev.Addr == cl.Addr(owner) })
	sub, err := c.Subscribe(ctxT(t), tp, client.SubscribeOptions{})
	require.NoError(t, err)
	stopReader := readAll(t, sub)
	defer stopReader()

	require.NoError(t, cl.Kill(owner))
	died := time.Now()
	bound := idle + dialTimeout + 3*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	for {
		_, err := c.Publish(ctx, tp, []byte("x"), acked)
		if err == nil {
			break
		}
		require.NoError(t, ctx.Err(), "no answer from a survivor within %v of the kill; last error: %v", bound, err)
		require.ErrorIs(t, err, client.ErrAmbiguous, "the only failure is the outcome-unknown publish")
	}
	t.Logf("re-send answered %v after the kill (idle %v + dial timeout %v = %v)", time.Since(died), idle, dialTimeout, idle+dialTimeout)
}
