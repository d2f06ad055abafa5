package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// handlerServer is a listener whose every authenticated stream is given to
// handle on a goroutine of its own.
type handlerServer struct {
	ln   *Listener
	pool *x509.CertPool
	wg   sync.WaitGroup
}

func serveHandler(t *testing.T, mod func(*ServerConfig), handle func(st *Stream)) *handlerServer {
	t.Helper()
	srvTLS, pool, err := SelfSigned()
	require.NoError(t, err)
	cfg := &ServerConfig{TLS: srvTLS, Offer: fullOffer()}
	if mod != nil {
		mod(cfg)
	}
	ln, err := Listen("127.0.0.1:0", cfg)
	require.NoError(t, err)
	h := &handlerServer{ln: ln, pool: pool}
	ctx, cancel := context.WithCancel(context.Background())
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			sc, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				for {
					st, err := sc.AcceptStream(ctx)
					if err != nil {
						return
					}
					h.wg.Add(1)
					go func() {
						defer h.wg.Done()
						handle(st)
					}()
				}
			}()
		}
	}()
	t.Cleanup(func() {
		cancel()
		ln.Close()
		h.wg.Wait()
	})
	return h
}

func (h *handlerServer) dial(t *testing.T, mod func(*Config)) *Client {
	t.Helper()
	cfg := &Config{TLS: &tls.Config{RootCAs: h.pool}, TenantID: "t1", Token: "tok"}
	if mod != nil {
		mod(cfg)
	}
	c, err := Dial(testCtx(t), h.ln.Addr().String(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func eventFrame(t *testing.T, es *EventStream, base uint64, recs ...string) []byte {
	b := &felix.EventBatch{HasBaseOffset: true, BaseOffset: base}
	for _, r := range recs {
		b.Payloads = append(b.Payloads, []byte(r))
	}
	fr, err := felix.AppendEventBatch(nil, b, es.Peer().EventFlags())
	require.NoError(t, err)
	return fr
}

// TestSubscribeUnderEventStreamContext: the client stops reading its
// control stream right after subscribed (this package's Client does),
// which ends the control Stream's context; the obvious server code, which
// writes the events under the EventStream's context, still delivers every
// event and ends the subscription with its terminal frame. Writing under
// the control stream's context (the trap) is refused without breaking
// the event stream.
func TestSubscribeUnderEventStreamContext(t *testing.T) {
	leakCheck(t)
	const n = 50
	for _, name := range []string{"open-then-answer", "start-subscription"} {
		t.Run(name, func(t *testing.T) {
			trap := make(chan error, 1)
			h := serveHandler(t, nil, func(st *Stream) {
				defer st.Close()
				req, err := st.ReadRequest(st.Context())
				if err != nil {
					return
				}
				if _, ok := req.Message.(*felix.Subscribe); !ok {
					st.Abort()
					return
				}
				ctrl := st.Context()
				var es *EventStream
				if name == "start-subscription" {
					es, err = st.StartSubscription(ctrl, &felix.Subscribed{SubscriptionID: 7})
				} else {
					es, err = st.OpenEventStream(ctrl, 7)
					if err == nil {
						err = st.WriteMessage(ctrl, &felix.Subscribed{SubscriptionID: 7})
					}
				}
				if err != nil {
					t.Errorf("start: %v", err)
					return
				}
				// The client has read subscribed and stopped reading the
				// control stream (or StartSubscription closed it).
				<-ctrl.Done()
				trap <- es.WriteEncoded(ctrl, eventFrame(t, es, 0, "lost"))
				for i := range n {
					if err := es.WriteEncoded(es.Context(), eventFrame(t, es, uint64(i), "e"+string(rune('a'+i%26)))); err != nil {
						t.Errorf("event %d: %v", i, err)
						return
					}
				}
				es.End(es.Context(), &felix.LaggedError{ResumeFrom: n})
			})
			c := h.dial(t, nil)
			ctx := testCtx(t)
			sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
			require.NoError(t, err)
			defer sub.Close()
			require.ErrorIs(t, <-trap, context.Canceled, "a write under the control stream's context is refused")
			for i := range n {
				ev, err := sub.Next(ctx)
				require.NoError(t, err, "event %d", i)
				require.Equal(t, uint64(i), ev.Offset)
			}
			_, err = sub.Next(ctx)
			var lg *felix.LaggedError
			require.ErrorAs(t, err, &lg)
			require.Equal(t, &felix.LaggedError{SubscriptionID: 7, ResumeFrom: n}, lg)
		})
	}
}

// publishOutcome maps a stream name to the outcome the test server
// answers.
func publishOutcome(stream string) (felix.PublishResult, error) {
	switch {
	case strings.HasPrefix(stream, "unavail"):
		return felix.PublishResult{}, &felix.BrokerError{Message: "no owner", Code: felix.CodeShardUnavailable, Reason: "not_assigned"} // zero retry
	case strings.HasPrefix(stream, "refused"):
		return felix.PublishResult{}, &felix.PublishRefusedError{Refusal: &felix.PublishRefused{
			Reason: felix.PublishRefusalReason{Kind: felix.RefusalOffsetMismatch, Tail: 9}, Message: "tail moved"}}
	case strings.HasPrefix(stream, "moved"):
		return felix.PublishResult{}, &felix.NotLeaderError{NodeID: "b2", Addr: "h:1", Generation: 7}
	case strings.HasPrefix(stream, "boom"):
		return felix.PublishResult{}, errors.New("disk on fire")
	}
	return felix.PublishResult{Offset: 41, HasOffset: true}, nil
}

// publishStream returns the stream name of a publish request.
func publishStream(t *testing.T, req Request) string {
	if req.Flags != 0 {
		v, err := felix.ParsePublishBatch(req.Flags, req.Payload)
		require.NoError(t, err)
		return string(v.Stream)
	}
	switch m := req.Message.(type) {
	case *felix.Publish:
		return m.Stream
	case *felix.PublishBatchMessage:
		return m.Stream
	case *felix.PublishIdempotent:
		return m.Stream
	}
	return ""
}

// answeringServer answers every publish with AnswerPublish and the outcome
// its stream name selects, and producer_init with a producer id.
func answeringServer(t *testing.T) *handlerServer {
	return serveHandler(t, nil, func(st *Stream) {
		defer st.Close()
		ctx := st.Conn().Context()
		for {
			req, err := st.ReadRequest(ctx)
			if err != nil {
				return
			}
			if pi, ok := req.Message.(*felix.ProducerInit); ok {
				if st.WriteMessage(ctx, &felix.ProducerInitOK{RequestID: pi.RequestID, ProducerID: 5}) != nil {
					return
				}
				continue
			}
			res, perr := publishOutcome(publishStream(t, req))
			if err := st.AnswerPublish(ctx, req, res, perr); err != nil {
				return
			}
		}
	})
}

// TestAnswerPublishForms: one server answer per outcome reaches a binary
// client (binary acks), a JSON client (publish_ok / publish_error /
// publish_refused) and an idempotent producer (JSON answers to 0x0100)
// as the same typed result, with the same retry class: a zero retry class
// is the code's default on both paths (docs/errors.md).
func TestAnswerPublishForms(t *testing.T) {
	leakCheck(t)
	h := answeringServer(t)
	ctx := testCtx(t)
	clients := map[string]*Client{
		"binary": h.dial(t, nil),
		"json":   h.dial(t, func(c *Config) { c.ForceJSON = true }),
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			publish := func(stream string) (felix.PublishResult, error) {
				tp := topic
				tp.Stream = stream
				return c.Publish(ctx, tp, []byte("x"), PublishOptions{Ack: felix.AckPerBatch})
			}
			res, err := publish("ok")
			require.NoError(t, err)
			require.Equal(t, felix.PublishResult{Offset: 41, HasOffset: true}, res)

			_, err = publish("unavail")
			var be *felix.BrokerError
			require.ErrorAs(t, err, &be)
			require.Equal(t, felix.CodeShardUnavailable, be.Code)
			require.Equal(t, felix.RetryRetry, be.Retry, "sent as the code's default, not fatal")
			require.Equal(t, "not_assigned", be.Reason)
			require.Equal(t, "no owner", be.Message)

			_, err = publish("moved")
			require.ErrorAs(t, err, &be)
			require.Equal(t, felix.CodeNotLeader, be.Code)
			require.Equal(t, felix.RetryRedirect, be.RetryClass())
			if name == "binary" {
				require.True(t, be.HasOwner)
				require.Equal(t, felix.AckOwner{NodeID: "b2", Addr: "h:1", Generation: 7}, be.Owner)
			}

			_, err = publish("boom")
			require.ErrorAs(t, err, &be)
			require.Equal(t, felix.CodeInternal, be.Code)
			require.Equal(t, felix.RetryOutcomeUnknown, be.RetryClass())
			require.Contains(t, be.Message, "disk on fire")

			_, err = publish("refused")
			var pr *felix.PublishRefusedError
			require.ErrorAs(t, err, &pr)
			require.Equal(t, "offset_mismatch", pr.Reason)
			require.Equal(t, uint64(9), pr.Refusal.Reason.Tail)

			// Fire-and-forget publishes get no answer; the stream goes on.
			tp := topic
			tp.Stream = "unavail"
			_, err = c.Publish(ctx, tp, []byte("x"), PublishOptions{NoAck: true})
			require.NoError(t, err)
			_, err = publish("ok")
			require.NoError(t, err)
		})
	}
	t.Run("idempotent", func(t *testing.T) {
		p, err := clients["binary"].NewProducer(ctx)
		require.NoError(t, err)
		tp := topic
		tp.Stream = "unavail"
		_, err = p.PublishBatch(ctx, tp, [][]byte{[]byte("x")}, nil)
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, "publish_error", be.Type, "an idempotent binary batch is answered in JSON")
		require.Equal(t, felix.RetryRetry, be.Retry)
		tp.Stream = "ok"
		res, err := p.PublishBatch(ctx, tp, [][]byte{[]byte("x")}, nil)
		require.NoError(t, err)
		require.Equal(t, uint64(41), res.Offset)
	})
}

// TestAnswerOrderAcrossResolves: answers reserved in request order are
// written in that order even when resolved in the reverse order.
func TestAnswerOrderAcrossResolves(t *testing.T) {
	leakCheck(t)
	const n = 5
	h := serveHandler(t, nil, func(st *Stream) {
		defer st.Close()
		ctx := st.Conn().Context()
		var pas []*PendingAnswer
		for range n {
			req, err := st.ReadRequest(ctx)
			if err != nil {
				return
			}
			pa, err := st.ReservePublish(req)
			if err != nil {
				t.Errorf("reserve: %v", err)
				return
			}
			pas = append(pas, pa)
		}
		var wg sync.WaitGroup
		for i := n - 1; i >= 1; i-- {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pas[i].Resolve(ctx, felix.PublishResult{Offset: uint64(i), HasOffset: true}, nil)
			}()
		}
		// Every later answer is resolved (and waits) before the first.
		waitFor(t, func() bool {
			st.ans.mu.Lock()
			defer st.ans.mu.Unlock()
			for _, p := range pas[1:] {
				if !p.ready {
					return false
				}
			}
			return true
		})
		if err := pas[0].Resolve(ctx, felix.PublishResult{HasOffset: true}, nil); err != nil {
			t.Errorf("resolve first: %v", err)
		}
		wg.Wait()
		if err := st.WaitAnswers(ctx); err != nil {
			t.Errorf("wait answers: %v", err)
		}
		st.Close()
	})
	c := h.dial(t, nil)
	// A raw publish stream, to see the order the answers come in.
	cs, err := c.openStream(testCtx(t))
	require.NoError(t, err)
	defer cs.abort()
	for i := range n {
		b := felix.PublishBatch{AckMode: felix.AckPerBatch, RequestID: uint64(100 + i), TenantID: "t1", Namespace: "ns", Stream: "s",
			Payloads: [][]byte{[]byte("x")}}
		fr, err := felix.AppendPublishBatch(nil, &b)
		require.NoError(t, err)
		_, err = cs.s.Write(fr)
		require.NoError(t, err)
	}
	for i := range n {
		f, err := cs.r.ReadFrame()
		require.NoError(t, err)
		a, err := felix.DecodePublishAck(f.Flags, f.Payload)
		require.NoError(t, err)
		require.Equal(t, uint64(100+i), a.RequestID)
		require.Equal(t, uint64(i), a.Offset)
	}
	_, err = cs.r.ReadFrame()
	require.ErrorIs(t, err, io.EOF)
}

// TestEventStreamEndTerminals: End writes the terminal frame each typed
// error stands for, with the fallbacks for clients that did not offer it;
// never a clean end for an error.
func TestEventStreamEndTerminals(t *testing.T) {
	leakCheck(t)
	ends := map[string]error{
		"lagged":  &felix.LaggedError{SubscriptionID: 99, ResumeFrom: 42},
		"moved":   &felix.ShardMovedError{SubscriptionID: 99, ResumeFrom: 42, HasResumeFrom: true, NodeID: "b2", Addr: "h:1", Generation: 3},
		"deleted": &felix.StreamDeletedError{SubscriptionID: 99},
		"revoked": &felix.BrokerError{Message: "credential revoked", Code: felix.CodeForbidden},
		"clean":   nil,
	}
	h := serveHandler(t, nil, func(st *Stream) {
		defer st.Close()
		req, err := st.ReadRequest(st.Context())
		if err != nil {
			return
		}
		sub, ok := req.Message.(*felix.Subscribe)
		if !ok {
			st.Abort()
			return
		}
		es, err := st.StartSubscription(st.Context(), &felix.Subscribed{SubscriptionID: 7})
		if err != nil {
			return
		}
		if es.WriteEncoded(es.Context(), eventFrame(t, es, 41, "last")) != nil {
			return
		}
		es.End(es.Context(), ends[sub.Stream])
	})
	noLagged := func(c *Config) { c.Features = felix.DefaultClientFeatures() &^ felix.FeatureSubscriptionLagged }
	noTerminals := func(c *Config) {
		c.Features = felix.DefaultClientFeatures() &^ (felix.FeatureSubscriptionLagged | felix.FeatureShardMoved | felix.FeatureStreamDeleted)
	}
	for _, tc := range []struct {
		client, stream string
		mod            func(*Config)
		check          func(t *testing.T, err error)
	}{
		{"default", "lagged", nil, func(t *testing.T, err error) {
			require.Equal(t, &felix.LaggedError{SubscriptionID: 7, ResumeFrom: 42}, asType[*felix.LaggedError](t, err))
		}},
		{"no-lagged", "lagged", noLagged, func(t *testing.T, err error) {
			sm := asType[*felix.ShardMovedError](t, err)
			require.Equal(t, uint64(42), sm.ResumeFrom)
			require.True(t, sm.HasResumeFrom)
		}},
		{"no-terminals", "lagged", noTerminals, func(t *testing.T, err error) {
			be := asType[*felix.BrokerError](t, err)
			require.Equal(t, felix.CodeOverloaded, be.Code)
			require.Contains(t, be.Message, "resume from 42")
		}},
		{"default", "moved", nil, func(t *testing.T, err error) {
			require.Equal(t, &felix.ShardMovedError{SubscriptionID: 7, ResumeFrom: 42, HasResumeFrom: true, NodeID: "b2", Addr: "h:1", Generation: 3},
				asType[*felix.ShardMovedError](t, err))
		}},
		{"no-terminals", "moved", noTerminals, func(t *testing.T, err error) {
			require.Equal(t, felix.CodeShardUnavailable, asType[*felix.BrokerError](t, err).Code)
		}},
		{"default", "deleted", nil, func(t *testing.T, err error) {
			require.Equal(t, &felix.StreamDeletedError{SubscriptionID: 7}, asType[*felix.StreamDeletedError](t, err))
		}},
		{"no-terminals", "deleted", noTerminals, func(t *testing.T, err error) {
			require.Equal(t, felix.CodeNotFound, asType[*felix.BrokerError](t, err).Code)
		}},
		{"default", "revoked", nil, func(t *testing.T, err error) {
			be := asType[*felix.BrokerError](t, err)
			require.Equal(t, felix.CodeForbidden, be.Code)
			require.Equal(t, felix.RetryFatal, be.Retry)
		}},
		{"default", "clean", nil, func(t *testing.T, err error) { require.ErrorIs(t, err, io.EOF) }},
	} {
		t.Run(tc.client+"/"+tc.stream, func(t *testing.T) {
			c := h.dial(t, tc.mod)
			ctx := testCtx(t)
			tp := topic
			tp.Stream = tc.stream
			sub, err := c.Subscribe(ctx, tp, SubscribeOptions{})
			require.NoError(t, err)
			defer sub.Close()
			ev, err := sub.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, "last", string(ev.Payload))
			_, err = sub.Next(ctx)
			tc.check(t, err)
		})
	}
}

func asType[T error](t *testing.T, err error) T {
	t.Helper()
	var v T
	require.ErrorAs(t, err, &v)
	return v
}

// TestWriteErrFrames: WriteErr answers typed errors with their own frames.
func TestWriteErrFrames(t *testing.T) {
	leakCheck(t)
	h := serveHandler(t, nil, func(st *Stream) {
		defer st.Close()
		req, err := st.ReadRequest(st.Context())
		if err != nil {
			return
		}
		sub, ok := req.Message.(*felix.Subscribe)
		if !ok {
			return
		}
		switch sub.Stream {
		case "cursor":
			st.WriteErr(st.Context(), &felix.CursorError{Reason: "too_old", Requested: 5, Available: 9})
		case "leader":
			st.WriteErr(st.Context(), &felix.NotLeaderError{NodeID: "b2", Addr: "h:1", Generation: 4})
		case "plain":
			st.WriteErr(st.Context(), errors.New("kaput"))
		}
	})
	c := h.dial(t, nil)
	legacy := h.dial(t, func(c *Config) { c.NoFeatures = true })
	ctx := testCtx(t)
	sub := func(c *Client, stream string) error {
		tp := topic
		tp.Stream = stream
		_, err := c.Subscribe(ctx, tp, SubscribeOptions{})
		return err
	}
	require.Equal(t, &felix.CursorError{Reason: "too_old", Requested: 5, Available: 9}, asType[*felix.CursorError](t, sub(c, "cursor")))
	require.Equal(t, &felix.NotLeaderError{NodeID: "b2", Addr: "h:1", Generation: 4}, asType[*felix.NotLeaderError](t, sub(c, "leader")))
	be := asType[*felix.BrokerError](t, sub(legacy, "leader"))
	require.Contains(t, be.Message, "not leader", "without FeatureRedirect: an error")
	be = asType[*felix.BrokerError](t, sub(c, "plain"))
	require.Equal(t, felix.CodeInternal, be.Code)
	require.Equal(t, felix.RetryOutcomeUnknown, be.Retry, "a zero class is sent as the code's default in JSON too")
	require.Equal(t, "kaput", be.Message)
}
