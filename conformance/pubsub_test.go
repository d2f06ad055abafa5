package conformance_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conformance"
)

// The publish and subscribe scenarios use shard 0 of the fixture's durable
// stream (unkeyed publishes land there), through the cluster-aware client.

func Test_pubsub_roundtrip(t *testing.T) {
	run(t, "pubsub.roundtrip", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		tp := fx.topic(fx.DurableStream)
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{})
		// Not UTF-8, NUL bytes, every byte value: no re-encoding survives.
		payload := []byte{0, 0xff, 0xfe, '\n', 0x80, 0, 'x'}
		for i := range 256 {
			payload = append(payload, byte(i))
		}
		_, err := fx.scPub(c, tp, payload)
		require.NoError(t, err)
		ev := fx.scNext(sub)
		require.Equal(t, payload, ev.Payload)
		require.True(t, ev.HasOffset)
		fx.Pass(conformance.Evidence{"offset": ev.Offset, "payload_bytes": len(ev.Payload)})
	})
}

func Test_pubsub_order(t *testing.T) {
	run(t, "pubsub.order", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		tp := fx.topic(fx.DurableStream)
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{})
		const n = 50
		for i := range n {
			_, err := fx.scPub(c, tp, []byte("order-"+strconv.Itoa(i)))
			require.NoError(t, err)
		}
		var delivered []uint64
		for i := range n {
			ev := fx.scNext(sub)
			require.Equal(t, "order-"+strconv.Itoa(i), string(ev.Payload))
			delivered = append(delivered, ev.Offset)
		}
		fx.Pass(conformance.Evidence{"delivered": delivered, "records": n})
	})
}

func Test_pubsub_offsets_are_contiguous(t *testing.T) {
	run(t, "pubsub.offsets_are_contiguous", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		tp := fx.topic(fx.DurableStream)
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{})
		const n = 20
		for i := range n {
			_, err := fx.scPub(c, tp, []byte(strconv.Itoa(i)))
			require.NoError(t, err)
		}
		var prev uint64
		var delivered []uint64
		for i := range n {
			ev := fx.scNext(sub)
			require.True(t, ev.HasOffset, "a durable stream's event carries its offset")
			if i > 0 {
				require.Equal(t, prev+1, ev.Offset, "consecutive events differ by exactly 1")
			}
			prev = ev.Offset
			delivered = append(delivered, ev.Offset)
		}
		next, ok := sub.Offset()
		require.True(t, ok)
		require.Equal(t, prev+1, next, "the client exposes where it would resume")
		fx.Pass(conformance.Evidence{"delivered": delivered, "resume_offset": next})
	})
}

func Test_pubsub_resume_from_offset(t *testing.T) {
	run(t, "pubsub.resume_from_offset", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		tp := fx.topic(fx.DurableStream)
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{})
		const n = 6
		for i := range n {
			_, err := fx.scPub(c, tp, []byte("resume-"+strconv.Itoa(i)))
			require.NoError(t, err)
		}
		var noted uint64
		var before, after []uint64
		for range 3 {
			noted = fx.scNext(sub).Offset
			before = append(before, noted)
		}
		require.NoError(t, sub.Close())
		require.NoError(t, c.Close())

		// A new client resumes after the noted offset.
		again := fx.scSubscribe(fx.scDefault(), tp, client.SubscribeOptions{Start: felix.StartAt(noted + 1)})
		for i := 3; i < n; i++ {
			ev := fx.scNext(again)
			require.Equal(t, noted+uint64(i-2), ev.Offset, "no gap, no duplicate")
			require.Equal(t, "resume-"+strconv.Itoa(i), string(ev.Payload))
			after = append(after, ev.Offset)
		}
		fx.Pass(conformance.Evidence{"before": before, "after": after})
	})
}

func Test_pubsub_start_earliest(t *testing.T) {
	run(t, "pubsub.start_earliest", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		tp := fx.topic(fx.DurableStream)
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
		start := sub.Info().StartOffset
		require.True(t, start.Set, "subscribed carries the start offset")
		ev := fx.scNext(sub)
		require.Equal(t, start.V, ev.Offset, "earliest starts at the oldest retained record")
		if start.V == 0 {
			fx.Skip("the fixture's durable stream has no trimmed head (earliest is 0): the trimmed-offset half cannot be tried")
		}
		err := subscribeErr(fx, c, tp, client.SubscribeOptions{Start: felix.StartAt(start.V - 1)})
		var ce *felix.CursorError
		require.ErrorAs(t, err, &ce, "a trimmed offset is an error")
		require.Equal(t, "too_old", ce.Reason)
		require.Equal(t, start.V, ce.Available)
		fx.Pass(conformance.Evidence{"earliest": start.V, "refused_reason": ce.Reason, "available": ce.Available})
	})
}

// subscribeErr subscribes through c and returns the error (closing a
// subscription that succeeded).
func subscribeErr(fx *Fx, c *client.Client, tp felix.Topic, o client.SubscribeOptions) error {
	sub, err := c.Subscribe(fx.ctx(), tp, o)
	if err == nil {
		_ = sub.Close()
	}
	return err
}
