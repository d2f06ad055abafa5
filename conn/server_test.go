package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// rawConn dials the broker with quic-go directly, for tests that need to
// send what the Client never would.
func rawConn(t *testing.T, b *testBroker, alpn []string) (*quic.Conn, error) {
	qc, err := quic.DialAddr(deadlineCtx(t), b.addr(), &tls.Config{RootCAs: b.pool, ServerName: "localhost", NextProtos: alpn}, nil)
	if err == nil {
		t.Cleanup(func() { qc.CloseWithError(0, "") })
	}
	return qc, err
}

type rawStream struct {
	t *testing.T
	s *quic.Stream
	r *felix.Reader
}

func openRaw(t *testing.T, qc *quic.Conn) *rawStream {
	s, err := qc.OpenStreamSync(testCtx(t))
	require.NoError(t, err)
	if d, ok := testCtx(t).Deadline(); ok {
		s.SetDeadline(d)
	}
	return &rawStream{t: t, s: s, r: felix.NewReader(s)}
}

func (r *rawStream) send(m felix.Message) {
	fr, err := felix.AppendMessageFrame(nil, m)
	require.NoError(r.t, err)
	_, err = r.s.Write(fr)
	require.NoError(r.t, err)
}

func (r *rawStream) sendFrame(flags felix.Flags, payload []byte) {
	fr := felix.AppendHeader(nil, felix.Header{Flags: flags, Length: uint32(len(payload))})
	_, err := r.s.Write(append(fr, payload...))
	require.NoError(r.t, err)
}

func (r *rawStream) recv() felix.Message {
	f, err := r.r.ReadFrame()
	require.NoError(r.t, err)
	require.Zero(r.t, f.Flags)
	m, err := felix.DecodeMessage(f.Payload)
	require.NoError(r.t, err)
	return m
}

func (r *rawStream) recvRaw() string {
	f, err := r.r.ReadFrame()
	require.NoError(r.t, err)
	return string(f.Payload)
}

func (r *rawStream) expectEnd() error {
	_, err := r.r.ReadFrame()
	require.Error(r.t, err)
	return err
}

func TestALPN(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	require.Equal(t, "", c.NegotiatedALPN())
	c2 := b.dial(t, func(c *Config) { c.OfferALPN = true })
	require.Equal(t, ALPN, c2.NegotiatedALPN())
	// Other protocol ids are refused during the handshake.
	_, err := rawConn(t, b, []string{"felix-internal/1"})
	require.Error(t, err)
	qc, err := rawConn(t, b, []string{"h3", ALPN})
	require.NoError(t, err)
	require.Equal(t, ALPN, qc.ConnectionState().TLS.NegotiatedProtocol)

	// RequireALPN refuses clients without ALPN.
	b2 := startBroker(t, brokerOpts{offer: fullOffer(), requireALPN: true})
	_, err = Dial(deadlineCtx(t), b2.addr(), b2.clientConfig())
	var te *TransportError
	require.ErrorAs(t, err, &te)
	b2.dial(t, func(c *Config) { c.OfferALPN = true })
}

func TestAuthRejected(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), auth: func(ctx context.Context, a *felix.Auth) (any, error) {
		switch a.Token {
		case "good":
			return "user", nil
		case "forbidden":
			return nil, &felix.BrokerError{Message: "tenant mismatch", Code: felix.CodeForbidden}
		}
		return nil, errors.New("bad token")
	}})
	ctx := testCtx(t)
	for _, tc := range []struct {
		token, msg string
		code       felix.ErrorCode
		noFeatures bool
	}{
		{"bad", "auth failed", felix.CodeUnauthenticated, false},
		{"forbidden", "tenant mismatch", felix.CodeForbidden, false},
		{"bad", "auth failed", "", true}, // no FeatureErrorCodes: no code
	} {
		cfg := b.clientConfig()
		cfg.Token, cfg.NoFeatures = tc.token, tc.noFeatures
		_, err := Dial(ctx, b.addr(), cfg)
		require.ErrorIs(t, err, felix.ErrAuthRefused)
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, tc.msg, be.Message)
		require.Equal(t, tc.code, be.Code)
	}
	b.dial(t, func(c *Config) { c.Token = "good" })
}

func TestLegacyClientGetsOK(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), ackOffsets: true})
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	rs := openRaw(t, qc)
	rs.send(&felix.Auth{TenantID: "t1", Token: "x"})
	require.Equal(t, `{"type":"ok"}`, rs.recvRaw())
	// A JSON publish gets a publish_ok without offset (flag 0x1000 not
	// offered) and an error gets no code (no client_flags: legacy).
	rs.send(&felix.Publish{TenantID: "t1", Namespace: "ns", Stream: "s", Payload: []byte("a"), RequestID: felix.Some[uint64](1), Ack: felix.Some(felix.AckPerMessage)})
	require.Equal(t, `{"type":"publish_ok","request_id":1}`, rs.recvRaw())
	rs.send(&felix.Publish{TenantID: "t1", Namespace: "ns", Stream: "missing", Payload: []byte("a"), RequestID: felix.Some[uint64](2), Ack: felix.Some(felix.AckPerMessage)})
	require.Equal(t, `{"type":"publish_error","request_id":2,"message":"stream not found"}`, rs.recvRaw())

	// The same through the Client with Legacy set: events arrive without
	// offsets because the broker must not set 0x0020.
	c := b.dial(t, func(c *Config) { c.Legacy = true })
	require.True(t, c.Capabilities().Legacy) // a legacy auth is answered with ok
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
	require.NoError(t, err)
	_, err = c.Publish(ctx, topic, []byte("b"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.False(t, ev.HasOffset)
	require.Nil(t, ev.Publisher)
}

// TestServerRefusesUnparsableFrames drives the server API directly: to a
// legacy client it refuses modifier bits, feature-gated messages and auth_ok,
// and shapes optional fields away.
func TestServerRefusesUnparsableFrames(t *testing.T) {
	leakCheck(t)
	srvTLS, pool, err := SelfSigned()
	require.NoError(t, err)
	ln, err := Listen("127.0.0.1:0", &ServerConfig{TLS: srvTLS, Offer: fullOffer()})
	require.NoError(t, err)
	defer ln.Close()
	ctx := testCtx(t)
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			sc, err := ln.Accept(ctx)
			if err != nil {
				return err
			}
			st, err := sc.AcceptStream(ctx)
			if err != nil {
				return err
			}
			if !st.Peer().Legacy || st.Peer().Flags != felix.OriginalV1Flags {
				return errors.New("peer not legacy")
			}
			if sc.NegotiatedALPN() != "" || sc.RemoteAddr() == nil || st.Unidirectional() || st.Identity() != nil || st.Auth().Token != "x" {
				return errors.New("unexpected stream/connection state")
			}
			for _, f := range []felix.Flags{0x0024, 0x0010, 0x2004} {
				if err := st.WriteFrame(ctx, f, nil); !errors.Is(err, felix.ErrNotAdvertised) {
					return errors.New("flags " + f.String() + " not refused")
				}
			}
			for _, m := range []felix.Message{&felix.ShardMoved{}, &felix.SubscriptionLagged{}, &felix.StreamDeleted{},
				&felix.Unsupported{}, &felix.NotLeader{}, &felix.AuthOK{}} {
				if err := st.WriteMessage(ctx, m); !errors.Is(err, felix.ErrNotAdvertised) {
					return errors.New(m.MessageType() + " not refused")
				}
			}
			es, err := st.OpenEventStream(ctx, 5)
			if err != nil {
				return err
			}
			if err := es.WriteFrame(ctx, 0x0024, make([]byte, 12)); !errors.Is(err, felix.ErrNotAdvertised) {
				return errors.New("event flags not refused")
			}
			if err := es.WriteFrame(ctx, 0x0004, make([]byte, 4)); err != nil {
				return err
			}
			es.Close()
			if err := st.WriteError(ctx, &felix.BrokerError{Message: "boom", Code: felix.CodeInternal, Reason: "x"}); err != nil {
				return err
			}
			if err := st.WriteMessage(ctx, &felix.PublishOK{RequestID: 1, Offset: felix.Some[uint64](3)}); err != nil {
				return err
			}
			st.Close()
			if err := sc.Wait(ctx); err != nil {
				return err
			}
			return nil
		}()
	}()
	qc, err := quic.DialAddr(ctx, ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "localhost"}, &quic.Config{MaxIncomingUniStreams: 10})
	require.NoError(t, err)
	rs := openRaw(t, qc)
	rs.send(&felix.Auth{TenantID: "t1", Token: "x"})
	require.Equal(t, `{"type":"ok"}`, rs.recvRaw())
	us, err := qc.AcceptUniStream(ctx)
	require.NoError(t, err)
	ur := felix.NewReader(us)
	f, err := ur.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, `{"type":"event_stream_hello","subscription_id":5}`, string(f.Payload))
	f, err = ur.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, felix.Flags(0x0004), f.Flags)
	_, err = ur.ReadFrame()
	require.Equal(t, io.EOF, err)
	require.Equal(t, `{"type":"error","message":"boom"}`, rs.recvRaw())
	require.Equal(t, `{"type":"publish_ok","request_id":1}`, rs.recvRaw())
	rs.s.Close()
	require.Equal(t, io.EOF, rs.expectEnd())
	qc.CloseWithError(0, "")
	require.NoError(t, <-done)
}

func TestPreAuthRules(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)

	// A request before auth: error "auth required", then the stream ends.
	rs := openRaw(t, qc)
	rs.send(&felix.Publish{TenantID: "t1", Namespace: "ns", Stream: "s", Payload: []byte("a")})
	require.Equal(t, `{"type":"error","message":"auth required"}`, rs.recvRaw())
	require.Equal(t, io.EOF, rs.expectEnd())

	// A binary frame before auth: the same.
	rs = openRaw(t, qc)
	rs.sendFrame(0x0001, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	require.Equal(t, `{"type":"error","message":"auth required"}`, rs.recvRaw())

	// A frame above the 64 KiB pre-auth limit is refused before its
	// payload is read: an error, then the stream ends.
	rs = openRaw(t, qc)
	hdr := felix.AppendHeader(nil, felix.Header{Length: felix.PreAuthMaxFrameBytes + 1})
	rs.s.Write(append(hdr, make([]byte, felix.PreAuthMaxFrameBytes+1)...)) // may fail: the broker stops reading
	require.Equal(t, `{"type":"error","message":"auth frame too large"}`, rs.recvRaw())
	require.Equal(t, io.EOF, rs.expectEnd())

	// A second auth on an authenticated stream: invalid_request, end.
	rs = openRaw(t, qc)
	rs.send(&felix.Auth{TenantID: "t1", Token: "x", ClientFlags: felix.Some[uint16](0x7), ClientFeatures: felix.Some[uint32](0x800)})
	_, ok := rs.recv().(*felix.AuthOK)
	require.True(t, ok)
	rs.send(&felix.Auth{TenantID: "t1", Token: "x"})
	require.Equal(t, `{"type":"error","message":"auth already established","code":"invalid_request","retry":"fatal"}`, rs.recvRaw())
	require.Equal(t, io.EOF, rs.expectEnd())
}

func TestUnknownFlagBitKeepsStream(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	rs := openRaw(t, qc)
	rs.send(&felix.Auth{TenantID: "t1", Token: "x", ClientFlags: felix.Some[uint16](0x7)})
	_, ok := rs.recv().(*felix.AuthOK)
	require.True(t, ok)
	rs.sendFrame(0x8001, []byte("xyz"))
	require.Equal(t, `{"type":"error","message":"unsupported frame flags"}`, rs.recvRaw())
	rs.send(&felix.Publish{TenantID: "t1", Namespace: "ns", Stream: "s", Payload: []byte("a"), RequestID: felix.Some[uint64](4), Ack: felix.Some(felix.AckPerMessage)})
	require.Equal(t, `{"type":"publish_ok","request_id":4}`, rs.recvRaw())
}

func TestOversizeFrameAfterAuth(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), maxFrame: 4096})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	_, err := c.Publish(ctx, topic, make([]byte, 8192), PublishOptions{Ack: felix.AckPerBatch})
	require.Error(t, err)
	// The broker answers limit_exceeded and ends the stream; the client's
	// write may also meet the broker's stop-sending first.
	var be *felix.BrokerError
	if errors.As(err, &be) {
		require.Equal(t, felix.CodeLimitExceeded, be.Code)
	} else {
		var te *TransportError
		require.ErrorAs(t, err, &te)
	}
	// The dead publish stream is replaced on the next call.
	_, err = c.Publish(ctx, topic, make([]byte, 100), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)

	// The client enforces its own limit on what it reads.
	c2 := b.dial(t, func(c *Config) { c.MaxFrameBytes = 1024 })
	sub, err := c2.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartAt(0)})
	require.NoError(t, err)
	_, err = c.Publish(ctx, topic, make([]byte, 2048), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	_, err = sub.Next(ctx)
	require.NoError(t, err) // the 100-byte record
	_, err = sub.Next(ctx)
	require.ErrorIs(t, err, felix.ErrFrameTooLarge)
}

func TestAuthTimeout(t *testing.T) {
	leakCheck(t)
	// The timeout must leave a loaded machine time to complete a dial and
	// its first auth.
	b := startBroker(t, brokerOpts{offer: fullOffer(), authTimeout: 2 * time.Second})
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	recv(t, qc.Context().Done(), "the server closing a connection that never authenticated")
	var ae *quic.ApplicationError
	require.ErrorAs(t, context.Cause(qc.Context()), &ae)
	require.Equal(t, CloseAuthTimeout, ae.ErrorCode)
	require.Equal(t, "authentication timeout", ae.ErrorMessage)

	// An authenticated connection outlives the timeout: it is still open
	// after an unauthenticated connection accepted later was closed by it
	// (no guess of how long the timer takes to fire).
	c := b.dial(t, nil)
	later, err := rawConn(t, b, nil)
	require.NoError(t, err)
	recv(t, later.Context().Done(), "the server closing the connection over its limit")
	require.ErrorAs(t, context.Cause(later.Context()), &ae)
	require.Equal(t, CloseAuthTimeout, ae.ErrorCode)
	require.NoError(t, c.Context().Err())
	_, err = c.Publish(testCtx(t), topic, []byte("a"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
}

func TestBrokerShutdownCloseCode(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	// A subscription and a watch whose events were sent but not read
	// when the broker went away.
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
	require.NoError(t, err)
	w, err := c.CacheWatch(ctx, cref, WatchOptions{Key: felix.Some("k")})
	require.NoError(t, err)
	_, err = c.Publish(ctx, topic, []byte("unread"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	require.NoError(t, cachePut(ctx, c, cref, "k", []byte("v"), 0))
	b.close()
	recv(t, c.Context().Done(), "the client noticing the broker's close")
	var ae *quic.ApplicationError
	require.ErrorAs(t, context.Cause(c.Context()), &ae)
	require.Equal(t, CloseShuttingDown, ae.ErrorCode)
	require.True(t, ae.Remote)

	// Every call now fails with an error matching ErrBrokerShutdown that
	// still unwraps to quic-go's close error.
	_, err = sub.Next(ctx)
	require.ErrorIs(t, err, ErrBrokerShutdown)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, CloseShuttingDown, ae.ErrorCode)
	_, err2 := sub.Next(ctx)
	require.Equal(t, err, err2, "the end is sticky")
	for ev, err := range sub.All(ctx) {
		require.Equal(t, Event{}, ev)
		require.ErrorIs(t, err, ErrBrokerShutdown, "All yields the shutdown, it is not a clean end")
	}
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, ErrBrokerShutdown)
	_, err = c.Publish(ctx, topic, []byte("a"), PublishOptions{Ack: felix.AckPerBatch})
	require.ErrorIs(t, err, ErrBrokerShutdown)
	_, _, err = cacheGet(ctx, c, cref, "k")
	require.ErrorIs(t, err, ErrBrokerShutdown)
	_, err = c.Subscribe(ctx, topic, SubscribeOptions{})
	require.ErrorIs(t, err, ErrBrokerShutdown)
	require.NotErrorIs(t, err, io.EOF)
}

// A connection closed with code 0 by the client, or with another code by
// the broker, is not a broker shutdown.
func TestBrokerShutdownOnlyForRemoteCodeZero(t *testing.T) {
	local := &quic.ApplicationError{ErrorCode: CloseShuttingDown, Remote: false}
	timeout := &quic.ApplicationError{ErrorCode: CloseAuthTimeout, Remote: true}
	remote := &quic.ApplicationError{ErrorCode: CloseShuttingDown, Remote: true}
	require.NotErrorIs(t, clientErr("read", local), ErrBrokerShutdown)
	require.NotErrorIs(t, clientErr("read", timeout), ErrBrokerShutdown)
	require.NotErrorIs(t, transportErr("read", remote), ErrBrokerShutdown, "server side: the client went away")
	require.ErrorIs(t, clientErr("read", remote), ErrBrokerShutdown)
	require.ErrorIs(t, clientErr("read", fmt.Errorf("wrapped: %w", remote)), ErrBrokerShutdown)
}

func TestUniPublishStream(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	us, err := qc.OpenUniStreamSync(testCtx(t))
	require.NoError(t, err)
	fr, err := felix.AppendMessageFrame(nil, &felix.Auth{TenantID: "t1", Token: "x"})
	require.NoError(t, err)
	fr, err = felix.AppendPublishBatch(fr, &felix.PublishBatch{TenantID: "t1", Namespace: "ns", Stream: "uni", Payloads: [][]byte{[]byte("u")}})
	require.NoError(t, err)
	_, err = us.Write(fr)
	require.NoError(t, err)
	require.NoError(t, us.Close())
	waitFor(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		tl := b.topics[topicKey("t1", "ns", "uni")]
		return tl != nil && len(tl.recs) == 1
	})

	// A uni stream that does not start with auth is dropped (no answer is
	// possible): nothing is stored.
	us, err = qc.OpenUniStreamSync(testCtx(t))
	require.NoError(t, err)
	fr, err = felix.AppendPublishBatch(nil, &felix.PublishBatch{TenantID: "t1", Namespace: "ns", Stream: "uni2", Payloads: [][]byte{[]byte("u")}})
	require.NoError(t, err)
	us.Write(fr)
	us.Close()
	time.Sleep(100 * time.Millisecond)
	b.mu.Lock()
	require.Nil(t, b.topics[topicKey("t1", "ns", "uni2")])
	b.mu.Unlock()
}

func TestSharedConnectionWindow(t *testing.T) {
	leakCheck(t)
	// FeaturePublishPipeline without FeatureStreamPublishWindow: one window
	// for the whole connection, shared by the publish streams.
	offer := felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeaturePublishPipeline | felix.FeatureErrorCodes, PublishWindow: 2}
	b := startBroker(t, brokerOpts{offer: offer})
	c := b.dial(t, func(c *Config) { c.PublishStreams = 2 })
	require.False(t, c.Capabilities().PerStreamWindow())
	stall := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "stall"}
	errs := make(chan error, 2)
	for range 2 { // one per stream (round-robin), each holding a slot
		go func() {
			_, err := c.Publish(testCtx(t), stall, []byte("a"), PublishOptions{Ack: felix.AckPerBatch})
			errs <- err
		}()
	}
	waitFor(t, func() bool { return len(c.window) == 2 })
	for range 2 { // both streams now wait for a slot of the shared window
		_, err := c.Publish(shortCtx(t), topic, []byte("b"), PublishOptions{Ack: felix.AckPerBatch})
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	c.pubMu.Lock()
	require.Len(t, c.pubs, 2)
	require.Equal(t, c.pubs[0].window, c.pubs[1].window)
	c.pubMu.Unlock()
	c.Close()
	require.Error(t, <-errs)
	require.Error(t, <-errs)
}

func TestDrainingAuth(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), auth: func(ctx context.Context, a *felix.Auth) (any, error) {
		return nil, &felix.BrokerError{Message: "broker draining", Code: felix.CodeDraining}
	}})
	// A client with error codes gets the answer.
	ctx := testCtx(t)
	_, err := Dial(ctx, b.addr(), b.clientConfig())
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeDraining, be.Code)
	require.Equal(t, felix.RetryRetry, be.RetryClass())
	// An older client gets none until the connection closes.
	cfg := b.clientConfig()
	cfg.NoFeatures = true
	_, err = Dial(shortCtx(t), b.addr(), cfg)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestTokenFuncRetriesOnce(t *testing.T) {
	leakCheck(t)
	var mu sync.Mutex
	var seen []string
	b := startBroker(t, brokerOpts{offer: fullOffer(), auth: func(ctx context.Context, a *felix.Auth) (any, error) {
		mu.Lock()
		seen = append(seen, a.Token)
		mu.Unlock()
		if a.Token == "expired" {
			return nil, errors.New("expired")
		}
		return a.TenantID, nil
	}})
	tokens := []string{"expired", "fresh", "fresh2"}
	var n atomic.Int32
	c := b.dial(t, func(c *Config) {
		c.TokenFunc = func(ctx context.Context) (string, error) {
			i := n.Add(1) - 1
			return tokens[min(int(i), len(tokens)-1)], nil
		}
	})
	ctx := testCtx(t)
	require.NoError(t, cachePut(ctx, c, cref, "k", []byte("v"), 0)) // a second stream: a fresh token
	mu.Lock()
	require.Equal(t, []string{"expired", "fresh", "fresh2"}, seen)
	mu.Unlock()

	// A provider error fails the call.
	cfg := b.clientConfig()
	cfg.TokenFunc = func(ctx context.Context) (string, error) { return "", errors.New("no token") }
	_, err := Dial(ctx, b.addr(), cfg)
	require.ErrorContains(t, err, "no token")
	// Without TokenFunc a refusal is final.
	cfg = b.clientConfig()
	cfg.Token = "expired"
	_, err = Dial(ctx, b.addr(), cfg)
	require.ErrorIs(t, err, felix.ErrAuthRefused)
}

// ReadRequest honours its context: a cancelled wait returns the context's
// error and aborts the stream, which the client sees as a reset.
func TestReadRequestCancel(t *testing.T) {
	leakCheck(t)
	srvTLS, pool, err := SelfSigned()
	require.NoError(t, err)
	ln, err := Listen("127.0.0.1:0", &ServerConfig{TLS: srvTLS, Offer: fullOffer()})
	require.NoError(t, err)
	defer ln.Close()
	ctx := testCtx(t)
	accepted := make(chan *ServerConn, 1)
	go func() {
		sc, _ := ln.Accept(ctx) // the handshake runs once accepted
		accepted <- sc
	}()
	c, err := Dial(ctx, ln.Addr().String(), &Config{TLS: &tls.Config{RootCAs: pool}, TenantID: "t1", Token: "x"})
	require.NoError(t, err)
	defer c.Close()
	sc := recv(t, accepted, "the accepted server connection")
	require.NotNil(t, sc)

	// Already cancelled: nothing is read, the stream is aborted. (A raw
	// stream, read by the test: a publish on the client's publish stream
	// could find the reset already there and go on a fresh stream that
	// nobody serves.)
	pst, err := sc.AcceptStream(ctx) // the client's publish stream, opened by Dial
	require.NoError(t, err)
	defer pst.Abort() // unused: Close need not wait for it to drain
	raw, err := c.OpenRaw(ctx)
	require.NoError(t, err)
	defer raw.Close()
	st, err := sc.AcceptStream(ctx)
	require.NoError(t, err)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = st.ReadRequest(cancelled)
	require.ErrorIs(t, err, context.Canceled)
	_, err = raw.Recv(ctx)
	var se *quic.StreamError
	require.ErrorAs(t, err, &se, "the client sees its stream reset")

	// Cancelled while waiting for the next request.
	got := make(chan error, 1)
	go func() {
		_, _, err := cacheGet(ctx, c, cref, "k")
		got <- err
	}()
	st, err = sc.AcceptStream(ctx) // the cache stream
	require.NoError(t, err)
	req, err := st.ReadRequest(ctx)
	require.NoError(t, err)
	require.IsType(t, &felix.CacheGet{}, req.Message)
	waiting, cancel := context.WithCancel(ctx)
	go cancel()
	_, err = st.ReadRequest(waiting)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorAs(t, <-got, &se, "the client sees its stream reset")
}
