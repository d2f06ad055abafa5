package conn

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

func recsOf(b *testBroker, stream string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, r := range b.topic(topicKey("t1", "ns", stream)).recs {
		out = append(out, string(r))
	}
	return out
}

// TestPublishSeqAndView: payloads given as a sequence or as a parsed batch
// reach the broker in the binary encoding and in the JSON fallback.
func TestPublishSeqAndView(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), ackOffsets: true})
	ctx := testCtx(t)
	src := felix.PublishBatch{TenantID: "x", Namespace: "y", Stream: "z", Payloads: [][]byte{[]byte("a"), []byte("b"), []byte("c")}}
	frame, err := felix.AppendPublishBatch(nil, &src)
	require.NoError(t, err)
	v, err := felix.ParsePublishBatch(src.Flags(), frame[felix.HeaderLen:])
	require.NoError(t, err)
	for _, name := range []string{"binary", "json"} {
		t.Run(name, func(t *testing.T) {
			c := b.dial(t, func(c *Config) { c.ForceJSON = name == "json" })
			tp := topic
			tp.Stream = "fw-" + name
			res, err := c.PublishView(ctx, tp, &v, PublishOptions{Ack: felix.AckPerBatch})
			require.NoError(t, err)
			require.Equal(t, uint64(0), res.Offset)
			res, err = c.PublishSeq(ctx, tp, slices.Values([][]byte{[]byte("d"), []byte("e")}), PublishOptions{Ack: felix.AckPerBatch, Key: []byte("k")})
			require.NoError(t, err)
			require.Equal(t, uint64(3), res.Offset)
			_, err = c.PublishSeq(ctx, tp, v.Payloads(), PublishOptions{NoAck: true}) // fire-and-forget
			require.NoError(t, err)
			done := make(chan error, 1)
			require.NoError(t, c.PublishViewAsync(ctx, tp, &v, PublishOptions{Ack: felix.AckPerBatch}, func(r felix.PublishResult, err error) {
				if err == nil && r.Offset != 8 {
					err = errors.New("wrong offset")
				}
				done <- err
			}))
			require.NoError(t, <-done)
			require.Equal(t, []string{"a", "b", "c", "d", "e", "a", "b", "c", "a", "b", "c"}, recsOf(b, tp.Stream))
		})
	}
	flags := b.seenFlags()
	require.Contains(t, flags, felix.FlagBinaryPublishBatch|felix.FlagBinaryPublishAcked)
	require.Contains(t, flags, felix.FlagBinaryPublishBatch|felix.FlagBinaryPublishAcked|felix.FlagBinaryPublishKeyed)
}

// TestSubscriptionNextBatch: the event batch as it arrived, with its
// publisher, timestamps and offsets; events Next left unread come first,
// encoded anew.
func TestSubscriptionNextBatch(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	ctx := testCtx(t)
	b.append(topicKey("t1", "ns", "s"), [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	c := b.dial(t, func(c *Config) { c.Flags = felix.KnownFlags })
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer sub.Close()
	v, err := sub.NextBatch(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v.Len())
	require.Equal(t, "pub", string(v.Publisher))
	require.True(t, v.HasTimestamps())
	var got []felix.Event
	for e := range v.Events() {
		got = append(got, e)
	}
	require.Equal(t, []felix.Event{{Offset: 0, TimestampMicros: 1_700_000_000_000_000, Payload: []byte("a")},
		{Offset: 1, TimestampMicros: 1_700_000_000_000_000, Payload: []byte("b")},
		{Offset: 2, TimestampMicros: 1_700_000_000_000_000, Payload: []byte("c")}}, got)

	b.append(topicKey("t1", "ns", "s"), [][]byte{[]byte("d"), []byte("e"), []byte("f")})
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "d", string(ev.Payload))
	f, err := sub.NextFrame(ctx) // the rest of that frame, encoded anew
	require.NoError(t, err)
	require.Equal(t, felix.LayoutEventBatch, f.Flags.Layout())
	v2, err := felix.ParseEventBatch(f.Flags, f.Payload)
	require.NoError(t, err)
	require.Equal(t, uint64(4), v2.BaseOffset)
	require.Equal(t, "pub", string(v2.Publisher))
	require.Equal(t, [][]byte{[]byte("e"), []byte("f")}, slices.Collect(v2.Payloads()))
}

// TestEventStreamForwardBatch: a frame goes as it is to a client that
// accepts its bits, and is re-encoded for one that accepts fewer (without
// publisher and timestamps) or only the legacy layout (with the stream's
// own subscription id).
func TestEventStreamForwardBatch(t *testing.T) {
	leakCheck(t)
	src := &felix.EventBatch{HasBaseOffset: true, BaseOffset: 10, HasPublisher: true, Publisher: []byte("pub"),
		HasTimestamps: true, Timestamps: []uint64{5, 6}, Payloads: [][]byte{[]byte("x"), []byte("y")}}
	fr, err := felix.AppendEventBatch(nil, src, felix.EventModifierMask)
	require.NoError(t, err)
	h, err := felix.ParseHeader(fr)
	require.NoError(t, err)
	frame := felix.Frame{Header: h, Payload: fr[felix.HeaderLen:]}
	hs := serveHandler(t, nil, func(st *Stream) {
		defer st.Close()
		req, err := st.ReadRequest(st.Context())
		if err != nil {
			return
		}
		if _, ok := req.Message.(*felix.Subscribe); !ok {
			return
		}
		es, err := st.StartSubscription(st.Context(), &felix.Subscribed{SubscriptionID: 77})
		if err != nil {
			return
		}
		if err := es.ForwardBatch(es.Context(), frame); err != nil {
			t.Errorf("forward: %v", err)
		}
		es.End(es.Context(), nil)
	})
	ctx := testCtx(t)
	for _, tc := range []struct {
		name  string
		flags felix.Flags
		want  []Event
	}{
		{"as-is", felix.KnownFlags, []Event{
			{Payload: []byte("x"), Offset: 10, HasOffset: true, Publisher: []byte("pub"), TimestampMicros: 5, HasTimestamp: true},
			{Payload: []byte("y"), Offset: 11, HasOffset: true, Publisher: []byte("pub"), TimestampMicros: 6, HasTimestamp: true}}},
		{"fewer-bits", 0, []Event{{Payload: []byte("x"), Offset: 10, HasOffset: true}, {Payload: []byte("y"), Offset: 11, HasOffset: true}}},
		{"legacy-only", felix.FlagBinaryPublishBatch | felix.FlagBinaryEventBatch, []Event{{Payload: []byte("x")}, {Payload: []byte("y")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hs.dial(t, func(c *Config) { c.Flags = tc.flags })
			sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
			require.NoError(t, err)
			defer sub.Close()
			var got []Event
			for ev, err := range sub.All(ctx) {
				require.NoError(t, err)
				ev = ev.Clone() // kept beyond the next iteration
				got = append(got, ev)
			}
			require.Equal(t, tc.want, got)
		})
	}
}
