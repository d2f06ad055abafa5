package conn

import (
	"context"
	"crypto/tls"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// eventServer answers one subscribe per connection with subscription id 9
// and lets write produce the event stream's frames.
func eventServer(t *testing.T, write func(es *EventStream) error) (addr string, cfg *Config) {
	srvTLS, pool, err := SelfSigned()
	require.NoError(t, err)
	ln, err := Listen("127.0.0.1:0", &ServerConfig{TLS: srvTLS, Offer: fullOffer()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var wg sync.WaitGroup
	go func() {
		defer close(done)
		defer wg.Wait()
		sc, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		for {
			st, err := sc.AcceptStream(ctx)
			if err != nil {
				return
			}
			wg.Go(func() {
				defer st.Close()
				req, err := st.ReadRequest(ctx)
				if err != nil {
					return
				}
				if _, ok := req.Message.(*felix.Subscribe); !ok {
					return
				}
				es, err := st.OpenEventStream(ctx, 9)
				if err != nil {
					return
				}
				st.WriteMessage(ctx, &felix.Subscribed{SubscriptionID: 9})
				if err := write(es); err != nil {
					t.Errorf("server write: %v", err)
				}
				es.Close()
			})
		}
	}()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		<-done
	})
	return ln.Addr().String(), &Config{TLS: &tls.Config{RootCAs: pool}, TenantID: "t1", Token: "x", Flags: felix.KnownFlags}
}

func TestEventLayouts(t *testing.T) {
	leakCheck(t)
	addr, cfg := eventServer(t, func(es *EventStream) error {
		frames := []*felix.EventBatch{
			{Legacy: true, SubscriptionID: 9, HasBaseOffset: true, BaseOffset: 10, Payloads: [][]byte{[]byte("l0"), []byte("l1")}},
			{HasBaseOffset: true, BaseOffset: 20, SkippedBefore: 3, HasPublisher: true, Publisher: []byte("p"),
				HasTimestamps: true, Timestamps: []uint64{5}, Payloads: [][]byte{[]byte("s0")}},
			{Payloads: nil}, // an empty batch is fine
		}
		for _, f := range frames {
			fr, err := felix.AppendEventBatch(nil, f, es.Peer().EventFlags())
			if err != nil {
				return err
			}
			if err := es.WriteEncoded(es.Context(), fr); err != nil {
				return err
			}
		}
		if err := es.WriteMessage(es.Context(), &felix.EventMessage{TenantID: "t1", Namespace: "ns", Stream: "s", Payload: []byte("j0"), Offset: felix.Some[uint64](30)}); err != nil {
			return err
		}
		if err := es.WriteMessage(es.Context(), &felix.EventBatchMessage{TenantID: "t1", Namespace: "ns", Stream: "s", Payloads: [][]byte{[]byte("j1"), []byte("j2")}}); err != nil {
			return err
		}
		// A legacy batch for another subscription is a protocol violation.
		fr, err := felix.AppendEventBatch(nil, &felix.EventBatch{Legacy: true, SubscriptionID: 8, Payloads: [][]byte{[]byte("x")}}, 0)
		if err != nil {
			return err
		}
		return es.WriteEncoded(es.Context(), fr)
	})
	ctx := testCtx(t)
	c, err := Dial(ctx, addr, cfg)
	require.NoError(t, err)
	defer c.Close()
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 9, sub.ID())
	want := []Event{
		{Payload: []byte("l0"), Offset: 10, HasOffset: true},
		{Payload: []byte("l1"), Offset: 11, HasOffset: true},
		{Payload: []byte("s0"), Offset: 20, HasOffset: true, SkippedBefore: 3, Publisher: []byte("p"), TimestampMicros: 5, HasTimestamp: true},
		{Payload: []byte("j0"), Offset: 30, HasOffset: true},
		{Payload: []byte("j1")},
		{Payload: []byte("j2")},
	}
	for _, w := range want {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, w, ev)
	}
	_, err = sub.Next(ctx)
	require.ErrorIs(t, err, felix.ErrProtocol)
}

// TestNextLongBatches: Next takes binary batches apart past the decoder's
// recorded index (150 and 70 events), with every field of every event
// (SkippedBefore on the first of a batch only), a frame's events after a
// new frame was read, NextFrame with the rest of a partly read batch, and
// in PayloadsUntilRelease one release sequence number per event across
// batches.
func TestNextLongBatches(t *testing.T) {
	leakCheck(t)
	mk := func(n int, tag string) [][]byte {
		ps := make([][]byte, n)
		for i := range ps {
			ps[i] = []byte(tag + string(rune('a'+i%26)) + string(make([]byte, i%5)))
		}
		return ps
	}
	ts := make([]uint64, 150)
	for i := range ts {
		ts[i] = 1000 + uint64(i)
	}
	frames := []*felix.EventBatch{
		{HasBaseOffset: true, BaseOffset: 100, SkippedBefore: 2, HasPublisher: true, Publisher: []byte("pub"),
			HasTimestamps: true, Timestamps: ts, Payloads: mk(150, "A")},
		{Payloads: mk(70, "B")},
		{HasBaseOffset: true, BaseOffset: 300, SkippedBefore: 5, Payloads: mk(2, "C")},
	}
	for _, mode := range []PayloadMode{PayloadsUntilNext, PayloadsOwned, PayloadsUntilRelease} {
		addr, cfg := eventServer(t, func(es *EventStream) error {
			for _, f := range frames {
				fr, err := felix.AppendEventBatch(nil, f, es.Peer().EventFlags())
				if err != nil {
					return err
				}
				if err := es.WriteEncoded(es.Context(), fr); err != nil {
					return err
				}
			}
			return nil
		})
		ctx := testCtx(t)
		c, err := Dial(ctx, addr, cfg)
		require.NoError(t, err)
		sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Payloads: mode})
		require.NoError(t, err)
		var seq uint64
		next := func(b *felix.EventBatch, i int) {
			t.Helper()
			ev, err := sub.Next(ctx)
			require.NoError(t, err)
			seq++
			want := Event{Payload: b.Payloads[i], HasOffset: b.HasBaseOffset, Publisher: b.Publisher, HasTimestamp: b.HasTimestamps}
			if b.HasBaseOffset {
				want.Offset = b.BaseOffset + uint64(i)
			}
			if i == 0 {
				want.SkippedBefore = b.SkippedBefore
			}
			if b.HasTimestamps {
				want.TimestampMicros = b.Timestamps[i]
			}
			if mode == PayloadsUntilRelease {
				require.NotNil(t, ev.rel, "mode %d event %d", mode, i)
				require.Equal(t, seq, ev.seq, "mode %d event %d", mode, i)
				ev.Release()
			}
			ev.rel, ev.seq = nil, 0
			require.Equal(t, want, ev, "mode %d event %d", mode, i)
		}
		for i := range frames[0].Payloads {
			next(frames[0], i)
		}
		for i := range 3 {
			next(frames[1], i)
		}
		f, err := sub.NextFrame(ctx) // the other 67, encoded anew
		require.NoError(t, err)
		seq += 67
		v, err := felix.ParseEventBatch(f.Flags, f.Payload)
		require.NoError(t, err)
		require.Equal(t, frames[1].Payloads[3:], slices.Collect(v.Payloads()), "mode %d", mode)
		next(frames[2], 0)
		next(frames[2], 1)
		_, err = sub.Next(ctx)
		require.ErrorIs(t, err, io.EOF)
		require.NoError(t, sub.Close())
		require.NoError(t, c.Close())
	}
}
