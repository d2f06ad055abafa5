package conn

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

func TestThousandSubscriptionsOneConnection(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	const n = 1000
	subs := make([]*Subscription, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	var failed atomic.Value
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := c.Subscribe(ctx, topic, SubscribeOptions{})
			if err != nil {
				failed.Store(err)
				return
			}
			subs[i] = s
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	ids := map[uint64]bool{}
	for _, s := range subs {
		require.False(t, ids[s.ID()])
		ids[s.ID()] = true
	}
	require.Equal(t, n, b.subscribers(topicKey("t1", "ns", "s")))
	for i := range 3 {
		_, err := c.Publish(ctx, topic, []byte(fmt.Sprint(i)), PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	for _, s := range subs {
		wg.Go(func() {
			for i := range 3 {
				ev, err := s.Next(ctx)
				if err != nil {
					failed.Store(err)
					return
				}
				if string(ev.Payload) != fmt.Sprint(i) {
					failed.Store(fmt.Errorf("sub %d got %q want %d", s.ID(), ev.Payload, i))
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	for _, s := range subs[:n/2] {
		require.NoError(t, s.Close())
	}
	waitFor(t, func() bool { return b.subscribers(topicKey("t1", "ns", "s")) == n/2 })
}

func TestPipelinedPublishesMatchedByRequestID(t *testing.T) {
	leakCheck(t)
	for _, window := range []uint32{0, 4, 256} {
		t.Run(fmt.Sprint("window=", window), func(t *testing.T) {
			leakCheck(t)
			offer := fullOffer()
			offer.PublishWindow = window
			b := startBroker(t, brokerOpts{offer: offer, ackOffsets: true})
			c := b.dial(t, func(c *Config) { c.PublishStreams = 2 })
			require.Equal(t, window, c.Capabilities().PublishWindow)
			ctx := testCtx(t)
			var wg sync.WaitGroup
			offsets := make([]uint64, 200)
			var failed atomic.Value
			for i := range offsets {
				wg.Go(func() {
					res, err := c.Publish(ctx, topic, []byte(fmt.Sprint(i)), PublishOptions{Ack: felix.AckPerBatch})
					if err != nil {
						failed.Store(err)
						return
					}
					offsets[i] = res.Offset
				})
			}
			wg.Wait()
			if err, _ := failed.Load().(error); err != nil {
				t.Fatal(err)
			}
			// Every publish got its own offset back: the answers were matched
			// to the right request.
			sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartAt(0)})
			require.NoError(t, err)
			evs := nextN(t, ctx, sub, len(offsets))
			for i, off := range offsets {
				require.Equal(t, fmt.Sprint(i), string(evs[off].Payload))
			}
		})
	}
}
