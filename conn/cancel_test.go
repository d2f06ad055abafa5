package conn

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

// cancelWhen returns a context that is cancelled as soon as cond holds.
func cancelWhen(t *testing.T, cond func() bool) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		defer cancel()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for !cond() {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return ctx
}

func TestCancelDial(t *testing.T) {
	leakCheck(t)
	// Nobody answers on this UDP port.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	_, err = Dial(shortCtx(t), pc.LocalAddr().String(), &Config{TenantID: "t1", Token: "x"})
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// The broker accepts the connection but never answers auth.
	release := make(chan struct{})
	b := startBroker(t, brokerOpts{offer: fullOffer(), auth: func(ctx context.Context, a *felix.Auth) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, errors.New("late")
	}})
	defer close(release)
	_, err = Dial(shortCtx(t), b.addr(), b.clientConfig())
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestCancelPublish(t *testing.T) {
	leakCheck(t)
	offer := fullOffer()
	offer.PublishWindow = 2
	b := startBroker(t, brokerOpts{offer: offer})
	c := b.dial(t, nil)
	stall := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "stall"}
	for i, force := range []bool{false, true} {
		c.cfg.ForceJSON = force
		// Waiting for an answer that never comes: cancelled once the broker
		// has the request, so the publish holds its window slot whatever
		// the machine's speed.
		ctx := cancelWhen(t, func() bool { return len(b.seenFlags())+len(b.seenTypes()) > i })
		_, err := c.Publish(ctx, stall, []byte("a"), PublishOptions{Ack: felix.AckPerBatch})
		require.ErrorIs(t, err, context.Canceled)
	}
	c.cfg.ForceJSON = false
	c.pubMu.Lock()
	require.Len(t, c.pubs[0].window, 2) // both slots held by the abandoned publishes
	c.pubMu.Unlock()
	// Both window slots are now held by unanswered publishes: the next
	// acked publish waits for a slot and is cancelled there.
	_, err := c.Publish(shortCtx(t), topic, []byte("b"), PublishOptions{Ack: felix.AckPerBatch})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// Fire-and-forget does not take a slot.
	_, err = c.Publish(testCtx(t), topic, []byte("c"), PublishOptions{NoAck: true})
	require.NoError(t, err)
	// A cancelled context fails at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Publish(ctx, topic, []byte("d"), PublishOptions{NoAck: true})
	require.ErrorIs(t, err, context.Canceled)
}

func TestCancelSubscribeAndNext(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	_, err := c.Subscribe(shortCtx(t), felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "stall"}, SubscribeOptions{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// subscribed arrives, the event stream does not: the wait for it is
	// cancelled.
	_, err = c.Subscribe(shortCtx(t), felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "nohello"}, SubscribeOptions{})
	require.ErrorIs(t, err, context.DeadlineExceeded)

	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
	require.NoError(t, err)
	_, err = sub.Next(shortCtx(t))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// The subscription survives a cancelled Next.
	_, err = c.Publish(ctx, topic, []byte("x"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "x", string(ev.Payload))

	// Close from another goroutine ends a blocked Next.
	done := make(chan error, 1)
	go func() {
		_, err := sub.Next(ctx)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, sub.Close())
	require.ErrorIs(t, <-done, ErrClosed)
	waitFor(t, func() bool { return b.subscribers(topicKey("t1", "ns", "s")) == 0 })
}

func TestCancelCache(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, func(c *Config) { c.CacheStreams = 1 })
	stall := felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "stall"}
	_, _, err := cacheGet(shortCtx(t), c, stall, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	err = cachePut(shortCtx(t), c, stall, "k", []byte("v"), 0)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = c.CacheWatch(shortCtx(t), stall, WatchOptions{Key: felix.Some("k")})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// The pooled stream still works; the abandoned requests' answers would
	// be discarded.
	require.NoError(t, cachePut(testCtx(t), c, cref, "k", []byte("v"), 0))
	w, err := c.CacheWatch(testCtx(t), cref, WatchOptions{Key: felix.Some("k")})
	require.NoError(t, err)
	_, err = w.Next(shortCtx(t))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestCloseWhileWaiting(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
	require.NoError(t, err)
	errs := make(chan error, 3)
	go func() {
		_, err := c.Publish(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "stall"}, []byte("a"), PublishOptions{Ack: felix.AckPerBatch})
		errs <- err
	}()
	go func() {
		_, _, err := cacheGet(ctx, c, felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "stall"}, "k")
		errs <- err
	}()
	go func() {
		_, err := sub.Next(ctx)
		errs <- err
	}()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, c.Close())
	for range 3 {
		select {
		case err := <-errs:
			require.Error(t, err)
		case <-testCtx(t).Done():
			t.Fatal("blocked call not released by Close")
		}
	}
}
