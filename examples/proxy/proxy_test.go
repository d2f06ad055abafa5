package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// leakCheck fails t if goroutines started during it outlive its cleanups.
func leakCheck(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Until(d)/10))
	}
	t.Cleanup(cancel)
	return ctx
}

// startProxy runs a proxy in front of the broker at addr (trusted with
// roots, credentials tenant/token) and returns a dial function for its
// clients.
func startProxy(t *testing.T, addr string, roots *x509.CertPool, tenant, token string) func(forceJSON bool) *conn.Client {
	ctx := testCtx(t)
	up, err := conn.Dial(ctx, addr, &conn.Config{TLS: &tls.Config{RootCAs: roots}, TenantID: tenant, Token: token})
	require.NoError(t, err)
	srvTLS, proxyRoots, err := conn.SelfSigned()
	require.NoError(t, err)
	p, err := Listen("127.0.0.1:0", srvTLS, up, nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- p.Serve(context.Background()) }()
	t.Cleanup(func() {
		p.Close()
		require.ErrorIs(t, <-done, conn.ErrClosed)
		up.Close()
	})
	return func(forceJSON bool) *conn.Client {
		c, err := conn.Dial(ctx, p.Addr(), &conn.Config{TLS: &tls.Config{RootCAs: proxyRoots}, TenantID: tenant, Token: "any",
			ForceJSON: forceJSON})
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// TestProxyReferenceBroker: JSON and binary clients publish through the
// proxy to the reference broker and read the records back through it;
// the broker's refusals reach them with their code and retry class.
func TestProxyReferenceBroker(t *testing.T) {
	leakCheck(t)
	cfg := server.Config{Addr: "127.0.0.1:0"}
	cfg.Engine.DefaultStream.Durable = true
	srv, err := server.Listen(cfg)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.NoError(t, <-served)
	})
	ctx := testCtx(t)
	dial := startProxy(t, srv.Addr().String(), srv.CertPool(), server.DemoTenant, server.DemoToken)
	bin, js := dial(false), dial(true)
	orders := felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "orders"}

	var want []string
	for i, c := range []*conn.Client{bin, js, bin, js} {
		recs := [][]byte{[]byte{byte('a' + 2*i)}, []byte{byte('b' + 2*i)}}
		res, err := c.PublishBatch(ctx, orders, recs, conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
		require.True(t, res.HasOffset)
		require.Equal(t, uint64(2*i), res.Offset)
		want = append(want, string(recs[0]), string(recs[1]))
	}
	// Keyed and fire-and-forget publishes too.
	_, err = bin.Publish(ctx, orders, []byte("k"), conn.PublishOptions{Ack: felix.AckPerBatch, Key: []byte("key")})
	require.NoError(t, err)
	want = append(want, "k") // one shard: keyed records land on it too
	_, err = js.Publish(ctx, orders, []byte("z"), conn.PublishOptions{NoAck: true})
	require.NoError(t, err)
	want = append(want, "z")

	sub, err := bin.Subscribe(ctx, orders, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer sub.Close()
	var got []string
	for len(got) < len(want) {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.True(t, ev.HasOffset)
		require.Equal(t, uint64(len(got)), ev.Offset)
		got = append(got, string(ev.Payload))
	}
	require.Equal(t, want, got)

	// Refusals keep their code and class: a tenant the credential does not
	// cover is forbidden (fatal), an offset past the tail a cursor error.
	for _, c := range []*conn.Client{bin, js} {
		_, err := c.Publish(ctx, felix.Topic{TenantID: "other", Namespace: "ns", Stream: "s"}, []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.CodeForbidden, be.Code)
		require.Equal(t, felix.RetryFatal, be.RetryClass())
	}
	_, err = js.Subscribe(ctx, orders, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartOffset, Offset: 1000}})
	var ce *felix.CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "in_future", ce.Reason)
}

// fakeUpstream is a broker on the conn server API whose answers are chosen
// by stream name: publishes to "unavail..." fail with shard_unavailable
// (no retry class given: the code's default), to "quota..." with
// overloaded / retry_after and a wait; subscriptions to "lagging..." get
// two batches and then subscription_lagged, to "moved..." shard_moved.
func fakeUpstream(t *testing.T) (addr string, roots *x509.CertPool) {
	srvTLS, roots, err := conn.SelfSigned()
	require.NoError(t, err)
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: srvTLS,
		Offer: felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.AllFeatures, PublishWindow: 64}})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	serve := func(st *conn.Stream) {
		defer st.Close()
		ctx := st.Conn().Context()
		for {
			req, err := st.ReadRequest(ctx)
			if err != nil {
				return
			}
			if sub, ok := req.Message.(*felix.Subscribe); ok {
				fakeSubscribe(t, st, sub)
				return
			}
			stream := ""
			if req.Flags != 0 {
				v, err := felix.ParsePublishBatch(req.Flags, req.Payload)
				require.NoError(t, err)
				stream = string(v.Stream)
			} else if p, ok := req.Message.(*felix.Publish); ok {
				stream = p.Stream
			}
			var perr error
			switch {
			case strings.HasPrefix(stream, "unavail"):
				perr = &felix.BrokerError{Message: "no owner", Code: felix.CodeShardUnavailable, Reason: "owner_unavailable"}
			case strings.HasPrefix(stream, "quota"):
				perr = &felix.BrokerError{Message: "over quota", Code: felix.CodeOverloaded, Retry: felix.RetryAfter,
					Reason: "tenant_quota", RetryAfter: 250 * time.Millisecond}
			}
			if st.AnswerPublish(ctx, req, felix.PublishResult{Offset: 7, HasOffset: true}, perr) != nil {
				return
			}
		}
	}
	go func() {
		for {
			sc, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go func() {
				for {
					st, err := sc.AcceptStream(context.Background())
					if err != nil {
						return
					}
					go serve(st)
				}
			}()
		}
	}()
	return ln.Addr().String(), roots
}

func fakeSubscribe(t *testing.T, st *conn.Stream, m *felix.Subscribe) {
	es, err := st.StartSubscription(st.Context(), &felix.Subscribed{SubscriptionID: 900})
	if err != nil {
		return
	}
	ctx := es.Context()
	for i, recs := range [][][]byte{{[]byte("r0")}, {[]byte("r1")}} {
		b := felix.EventBatch{HasBaseOffset: true, BaseOffset: uint64(i), Payloads: recs}
		fr, err := felix.AppendEventBatch(nil, &b, es.Peer().EventFlags())
		require.NoError(t, err)
		if es.WriteEncoded(ctx, fr) != nil {
			return
		}
	}
	var end error
	switch {
	case strings.HasPrefix(m.Stream, "lagging"):
		end = &felix.LaggedError{ResumeFrom: 2}
	case strings.HasPrefix(m.Stream, "moved"):
		end = &felix.ShardMovedError{ResumeFrom: 2, HasResumeFrom: true, NodeID: "b2", Generation: 4}
	}
	es.End(ctx, end)
}

// TestProxyLagAndRetryClasses: a subscription that lagged upstream ends
// downstream with subscription_lagged (the records before it delivered,
// never a clean end), and publish failures reach binary and JSON clients
// with the same code, retry class and detail.
func TestProxyLagAndRetryClasses(t *testing.T) {
	leakCheck(t)
	addr, roots := fakeUpstream(t)
	dial := startProxy(t, addr, roots, "t1", "tok")
	ctx := testCtx(t)
	for _, forceJSON := range []bool{false, true} {
		c := dial(forceJSON)
		tp := func(s string) felix.Topic { return felix.Topic{TenantID: "t1", Namespace: "ns", Stream: s} }

		res, err := c.Publish(ctx, tp("ok"), []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
		require.Equal(t, uint64(7), res.Offset)

		_, err = c.Publish(ctx, tp("unavail"), []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.CodeShardUnavailable, be.Code)
		require.Equal(t, felix.RetryRetry, be.Retry, "json=%v: the code's default class, sent explicitly", forceJSON)
		require.Equal(t, "owner_unavailable", be.Reason)

		_, err = c.Publish(ctx, tp("quota"), []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.CodeOverloaded, be.Code)
		require.Equal(t, felix.RetryAfter, be.Retry)
		require.Equal(t, 250*time.Millisecond, be.RetryAfter)
		require.Equal(t, "tenant_quota", be.Reason)

		for _, stream := range []string{"lagging", "moved", "plain"} {
			sub, err := c.Subscribe(ctx, tp(stream), conn.SubscribeOptions{})
			require.NoError(t, err)
			for i := range 2 {
				ev, err := sub.Next(ctx)
				require.NoError(t, err)
				require.Equal(t, uint64(i), ev.Offset)
			}
			_, err = sub.Next(ctx)
			switch stream {
			case "lagging":
				var lg *felix.LaggedError
				require.ErrorAs(t, err, &lg, "a lagged upstream is never a clean end downstream")
				require.Equal(t, &felix.LaggedError{SubscriptionID: sub.ID(), ResumeFrom: 2}, lg)
			case "moved":
				var sm *felix.ShardMovedError
				require.ErrorAs(t, err, &sm)
				require.Equal(t, uint64(2), sm.ResumeFrom)
				require.Equal(t, "b2", sm.NodeID)
			default:
				require.True(t, errors.Is(err, io.EOF), "a clean upstream end is a clean end: %v", err)
			}
			sub.Close()
		}
	}
}

// TestProxyReferenceBrokerLag: a subscriber that stops reading makes the
// proxy stop reading upstream (flow control all the way), the reference
// broker's queue overflows and ends the subscription with
// subscription_lagged; the subscriber then reads every record before the
// lag and the lag itself, with the offset to resume from, never a clean end.
func TestProxyReferenceBrokerLag(t *testing.T) {
	leakCheck(t)
	cfg := server.Config{Addr: "127.0.0.1:0"}
	cfg.Engine.DefaultStream.Durable = true
	// The subscriber reads nothing while the publishes run, which on a
	// loaded machine under -race outlasts the default 30 s event-write
	// bound: its reset (code 0) must not be what this test sees.
	cfg.EventWriteTimeout = time.Hour
	srv, err := server.Listen(cfg)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.NoError(t, <-served)
	})
	ctx := testCtx(t)
	dial := startProxy(t, srv.Addr().String(), srv.CertPool(), server.DemoTenant, server.DemoToken)
	c := dial(false)
	tp := felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "firehose"}
	sub, err := c.Subscribe(ctx, tp, conn.SubscribeOptions{QueueCapacity: 1})
	require.NoError(t, err)
	defer sub.Close()
	require.Equal(t, uint32(1), sub.Info().QueueCapacity.V)

	// 32 MiB, far more than the QUIC windows between the broker and the
	// subscriber, while the subscriber reads nothing.
	rec := make([]byte, 256<<10)
	const batches = 128
	for range batches {
		_, err := c.PublishBatch(ctx, tp, [][]byte{rec}, conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	var n uint64
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			var lg *felix.LaggedError
			require.ErrorAs(t, err, &lg)
			require.Equal(t, sub.ID(), lg.SubscriptionID)
			require.Equal(t, n, lg.ResumeFrom, "every record before the lag was delivered")
			require.Less(t, n, uint64(batches))
			t.Logf("lagged after %d of %d records", n, batches)
			return
		}
		require.Equal(t, n, ev.Offset)
		n++
	}
}

// TestProxyAnswersAfterClientFIN: a client that writes its publishes and
// finishes its side of the stream at once still gets every answer, in
// request order, before the proxy ends the stream.
func TestProxyAnswersAfterClientFIN(t *testing.T) {
	leakCheck(t)
	addr, roots := fakeUpstream(t)
	ctx := testCtx(t)
	up, err := conn.Dial(ctx, addr, &conn.Config{TLS: &tls.Config{RootCAs: roots}, TenantID: "t1", Token: "tok"})
	require.NoError(t, err)
	srvTLS, proxyRoots, err := conn.SelfSigned()
	require.NoError(t, err)
	p, err := Listen("127.0.0.1:0", srvTLS, up, nil)
	require.NoError(t, err)
	go p.Serve(context.Background())
	t.Cleanup(func() { p.Close(); up.Close() })

	qc, err := quic.DialAddr(ctx, p.Addr(), &tls.Config{RootCAs: proxyRoots, ServerName: "localhost"}, nil)
	require.NoError(t, err)
	defer qc.CloseWithError(0, "")
	s, err := qc.OpenStreamSync(ctx)
	require.NoError(t, err)
	offer := felix.ClientOffer{TenantID: "t1", Token: "x", Flags: felix.DefaultClientFlags(), Features: felix.DefaultClientFeatures()}
	out, err := felix.AppendMessageFrame(nil, offer.Auth())
	require.NoError(t, err)
	streams := []string{"ok", "unavail", "ok", "quota", "ok"}
	for i, name := range streams {
		b := felix.PublishBatch{AckMode: felix.AckPerBatch, RequestID: uint64(i + 1), TenantID: "t1", Namespace: "ns", Stream: name,
			Payloads: [][]byte{[]byte("x")}}
		out, err = felix.AppendPublishBatch(out, &b)
		require.NoError(t, err)
	}
	_, err = s.Write(out)
	require.NoError(t, err)
	require.NoError(t, s.Close()) // FIN right after the requests
	r := felix.NewReader(s)
	f, err := r.ReadFrame()
	require.NoError(t, err)
	m, err := felix.DecodeMessage(f.Payload)
	require.NoError(t, err)
	require.IsType(t, &felix.AuthOK{}, m)
	for i, name := range streams {
		f, err := r.ReadFrame()
		require.NoError(t, err, "answer %d", i)
		a, err := felix.DecodePublishAck(f.Flags, f.Payload)
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), a.RequestID)
		require.Equal(t, name == "ok", a.Status == felix.AckOK, "%s", name)
	}
	_, err = r.ReadFrame()
	require.ErrorIs(t, err, io.EOF)
}
