package conn

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// withPoison turns poison mode on for the subscriptions the test opens.
func withPoison(t *testing.T) {
	prev := poisonBuffers.Swap(true)
	t.Cleanup(func() { poisonBuffers.Store(prev) })
}

func poisoned(b []byte) bool {
	return len(b) > 0 && bytes.Count(b, []byte{poisonByte}) == len(b)
}

// publishOne publishes p as a batch of its own and waits for the ack, so
// the subscriber gets it in a frame of its own.
func publishOne(t *testing.T, ctx context.Context, c *Client, p string) {
	t.Helper()
	_, err := c.Publish(ctx, topic, []byte(p), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
}

// TestPoisonCatchesKeptPayload: a payload kept past the next Next call
// (the misuse PayloadsUntilNext forbids) reads as poison in poison mode,
// while a Clone of it keeps its bytes.
func TestPoisonCatchesKeptPayload(t *testing.T) {
	leakCheck(t)
	withPoison(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()

	publishOne(t, ctx, c, "first")
	ev1, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "first", string(ev1.Payload))
	kept := ev1.Clone()

	publishOne(t, ctx, c, "second")
	ev2, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "second", string(ev2.Payload))
	require.True(t, poisoned(ev1.Payload), "a payload kept past Next reads %q, not poison", ev1.Payload)
	require.Equal(t, "first", string(kept.Payload))

	// Within one frame too: the previous event is poisoned by the next Next.
	_, err = c.PublishBatch(ctx, topic, [][]byte{[]byte("a"), []byte("b")}, PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	a, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "a", string(a.Payload))
	bv, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "b", string(bv.Payload))
	require.True(t, poisoned(a.Payload))
}

// TestPayloadsUntilRelease hands events to another goroutine through a
// channel, as a merged sharded subscription does: with poison on, every
// event received is intact until released, and an event released early
// (a later one released first) is caught as poison once the subscription
// reads on.
func TestPayloadsUntilRelease(t *testing.T) {
	leakCheck(t)
	withPoison(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	const n = 40
	for i := range n {
		_, err := c.PublishBatch(ctx, topic, [][]byte{bytes.Repeat([]byte{byte('a' + i%26)}, 1+i*50), []byte{byte(i)}}, PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartAt(0), Payloads: PayloadsUntilRelease})
	require.NoError(t, err)
	defer sub.Close()
	ch := make(chan Event, 8)
	done := make(chan error, 1)
	go func() {
		defer close(ch)
		for range 2 * n {
			ev, err := sub.Next(ctx)
			if err != nil {
				done <- err
				return
			}
			ch <- ev
		}
		done <- nil
	}()
	i := 0
	for ev := range ch {
		if i%2 == 0 {
			require.Equal(t, bytes.Repeat([]byte{byte('a' + (i/2)%26)}, 1+(i/2)*50), ev.Payload, "event %d", i)
		} else {
			require.Equal(t, []byte{byte(i / 2)}, ev.Payload, "event %d", i)
		}
		ev.Release()
		i++
	}
	require.NoError(t, <-done)
	require.Equal(t, 2*n, i)

	// Misuse: an event held while a later one is released is recycled.
	publishOne(t, ctx, c, "held")
	held, err := sub.Next(ctx)
	require.NoError(t, err)
	publishOne(t, ctx, c, "later")
	later, err := sub.Next(ctx)
	require.NoError(t, err)
	later.Release() // releases held too
	publishOne(t, ctx, c, "next")
	_, err = sub.Next(ctx) // reads a frame: the released buffers are taken back
	require.NoError(t, err)
	require.True(t, poisoned(held.Payload), "held reads %q", held.Payload)
}

// TestPayloadsUntilReleaseRecycles: released buffers are read into again,
// events never released stay valid (they only cost fresh buffers), and
// the buffers kept are bounded.
func TestPayloadsUntilReleaseRecycles(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Payloads: PayloadsUntilRelease})
	require.NoError(t, err)
	defer sub.Close()
	var kept []Event
	for i := range 10 {
		p := bytes.Repeat([]byte{byte('a' + i)}, 100)
		publishOne(t, ctx, c, string(p))
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, p, ev.Payload)
		if i < 5 {
			ev.Release()
		} else {
			kept = append(kept, ev) // never released (nor any later): stays valid
		}
	}
	for i, ev := range kept {
		require.Equal(t, bytes.Repeat([]byte{byte('f' + i)}, 100), ev.Payload)
	}
	require.LessOrEqual(t, len(sub.es.rec.spare)+len(sub.es.rec.inflight), maxSpare+len(kept)+1)
}

func TestSubscribeUnknownPayloadMode(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	_, err := c.Subscribe(testCtx(t), topic, SubscribeOptions{Payloads: PayloadsUntilRelease + 1})
	require.ErrorIs(t, err, felix.ErrInvalidValue)
}

// TestEventClone: a Clone owns its payload and publisher.
func TestEventClone(t *testing.T) {
	buf := []byte("payloadpub")
	ev := Event{Payload: buf[:7], Publisher: buf[7:], Offset: 3, HasOffset: true}
	cl := ev.Clone()
	poison(buf)
	require.Equal(t, Event{Payload: []byte("payload"), Publisher: []byte("pub"), Offset: 3, HasOffset: true}, cl)
	require.Equal(t, Event{}, Event{}.Clone())
	require.NotNil(t, Event{Payload: []byte{}}.Clone().Payload)
}
