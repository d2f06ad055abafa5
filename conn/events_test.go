package conn

import (
	"context"
	"crypto/tls"
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
