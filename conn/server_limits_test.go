package conn

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// streamReset waits until the client side of s sees the server's reset and
// returns its code.
func streamReset(t *testing.T, s *quic.Stream) quic.StreamErrorCode {
	t.Helper()
	var buf [64]byte
	for {
		_, err := s.Read(buf[:])
		if err == nil {
			continue
		}
		var se *quic.StreamError
		require.ErrorAs(t, err, &se, "want a reset, got %v", err)
		require.True(t, se.Remote)
		return se.ErrorCode
	}
}

func authFrame(t *testing.T) []byte {
	fr, err := felix.AppendMessageFrame(nil, &felix.Auth{TenantID: "t1", Token: "x", ClientFlags: felix.Some[uint16](7),
		ClientFeatures: felix.Some(uint32(felix.FeatureErrorCodes))})
	require.NoError(t, err)
	return fr
}

// A flood of unauthenticated streams, opened as an attacker does by
// writing one byte on the highest stream id (every lower stream is then
// open): at most MaxUnauthStreams are kept, the rest are reset at once
// with ResetPreAuthBudget, and the connection stays usable.
func TestUnauthStreamBudget(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), authTimeout: time.Hour,
		server: func(c *ServerConfig) { c.MaxUnauthStreams = 8; c.PreAuthStreams = 2 }})
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	const n = 15 // 7 refused: one under the flood that closes the connection
	streams := make([]*quic.Stream, n)
	for i := range streams {
		streams[i], err = qc.OpenStreamSync(testCtx(t))
		require.NoError(t, err)
	}
	_, err = streams[n-1].Write([]byte("F")) // opens all 15 at the server
	require.NoError(t, err)
	for i := 8; i < n; i++ {
		require.Equal(t, ResetPreAuthBudget, streamReset(t, streams[i]), "stream %d", i)
	}
	require.EqualValues(t, n-8, b.ln.Stats().RefusedStreams)
	// The 8 admitted streams still count: one more is refused too ...
	extra, err := qc.OpenStreamSync(testCtx(t))
	require.NoError(t, err)
	_, err = extra.Write(authFrame(t))
	require.NoError(t, err)
	require.Equal(t, ResetPreAuthBudget, streamReset(t, extra))
	// ... until one of them authenticates, which frees its place.
	_, err = streams[0].Write(authFrame(t))
	require.NoError(t, err)
	m, err := felix.NewReader(streams[0]).ReadFrame()
	require.NoError(t, err)
	msg, err := felix.DecodeMessage(m.Payload)
	require.NoError(t, err)
	require.IsType(t, &felix.AuthOK{}, msg)
	ok, err := qc.OpenStreamSync(testCtx(t))
	require.NoError(t, err)
	_, err = ok.Write(authFrame(t))
	require.NoError(t, err)
	m, err = felix.NewReader(ok).ReadFrame()
	require.NoError(t, err)
	msg, err = felix.DecodeMessage(m.Payload)
	require.NoError(t, err)
	require.IsType(t, &felix.AuthOK{}, msg)
}

// A connection that opens twice its unauthenticated budget without one
// stream authenticating is closed (CloseAuthTimeout): the streams QUIC
// still tracks for it are released, while another client's connection
// goes on.
func TestUnauthStreamFloodClosesConnection(t *testing.T) {
	leakCheck(t)
	const budget = 8
	b := startBroker(t, brokerOpts{offer: fullOffer(), authTimeout: time.Hour,
		server: func(c *ServerConfig) { c.MaxUnauthStreams = budget }})
	legit := b.dial(t, nil)
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	var last *quic.Stream
	for range 2*budget + 1 {
		last, err = qc.OpenStreamSync(testCtx(t))
		require.NoError(t, err)
	}
	_, err = last.Write([]byte("F")) // opens all at the server: budget+1 refused
	require.NoError(t, err)
	select {
	case <-qc.Context().Done():
	case <-testCtx(t).Done():
		require.Fail(t, "the flooding connection was not closed")
	}
	var ae *quic.ApplicationError
	require.ErrorAs(t, context.Cause(qc.Context()), &ae)
	require.Equal(t, CloseAuthTimeout, ae.ErrorCode)
	require.True(t, ae.Remote)
	require.EqualValues(t, budget+1, b.ln.Stats().RefusedStreams)
	waitFor(t, func() bool { return b.ln.Stats().Connections == 1 })
	_, err = legit.Publish(testCtx(t), topic, []byte("served"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
}

// Streams that send nothing, or only part of a header (slowloris), do not
// starve a stream that sent its auth: with every read slot
// (DefaultPreAuthStreams) taken by half-headers and the other idle streams
// queued before it, the auth on the last stream the budget admits
// (DefaultMaxUnauthStreams) is answered although no deadline ever expires.
func TestIdleStreamsDoNotStarve(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), authTimeout: time.Hour})
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	var streams []*quic.Stream
	for i := range DefaultMaxUnauthStreams {
		s, err := qc.OpenStreamSync(testCtx(t))
		require.NoError(t, err)
		if i < DefaultPreAuthStreams {
			_, err = s.Write([]byte("FLX")) // a header that never completes
			require.NoError(t, err)
		}
		streams = append(streams, s)
	}
	last := streams[len(streams)-1]
	_, err = last.Write(authFrame(t))
	require.NoError(t, err)
	f, err := felix.NewReader(last).ReadFrame()
	require.NoError(t, err)
	m, err := felix.DecodeMessage(f.Payload)
	require.NoError(t, err)
	require.IsType(t, &felix.AuthOK{}, m)
	require.Zero(t, b.ln.Stats().RefusedStreams)
}

// The auth frames being read on one connection hold at most
// DefaultPreAuthConnWindow together: with auth frames that announce the
// whole budget between them (64 KiB ones, then one for the rest) stalled
// mid-payload, another stream's complete auth waits for room (until the
// stalled ones expire) instead of growing the server's buffers, while an
// authenticated stream of the connection, and another connection, go on.
func TestAuthFrameBytesBoundedPerConnection(t *testing.T) {
	leakCheck(t)
	const authTimeout = 4 * time.Second
	b := startBroker(t, brokerOpts{offer: fullOffer(), authTimeout: authTimeout})
	other := b.dial(t, nil)
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	good := openRaw(t, qc)
	good.s.Write(authFrame(t))
	require.IsType(t, &felix.AuthOK{}, good.recv())
	var stalled []*quic.Stream
	for left := uint32(DefaultPreAuthConnWindow); left > 0; {
		n := min(left, felix.PreAuthMaxFrameBytes)
		left -= n
		s, err := qc.OpenStreamSync(testCtx(t))
		require.NoError(t, err)
		_, err = s.Write(append(felix.AppendHeader(nil, felix.Header{Length: n}), make([]byte, 100)...))
		require.NoError(t, err)
		stalled = append(stalled, s)
	}
	require.Less(t, len(stalled), DefaultPreAuthStreams, "every stalled frame holds a read slot, with one to spare")
	lastStalled := time.Now()
	waitFor(t, func() bool { return b.ln.Stats().ExpiredStreams == 0 && connPreAuthHeld(b) == DefaultPreAuthConnWindow })
	// The late stream's own auth deadline must fall well after the stalled
	// streams' (each stream's runs from its opening), or on a loaded
	// machine it could expire while the stalled ones are being reset: the
	// ordering under test, not a synchronisation, is what this margin buys.
	waitFor(t, func() bool { return time.Since(lastStalled) >= authTimeout/2 })
	require.Zero(t, b.ln.Stats().ExpiredStreams, "a stalled stream expired before the late one was opened")
	late, err := qc.OpenStreamSync(testCtx(t))
	require.NoError(t, err)
	_, err = late.Write(authFrame(t)) // complete, but no room left
	require.NoError(t, err)
	// Answered only once a stalled frame expired and gave its room back
	// (the late stream's own deadline is later than theirs).
	f, err := felix.NewReader(late).ReadFrame()
	require.NoError(t, err)
	require.GreaterOrEqual(t, b.ln.Stats().ExpiredStreams, uint64(1), "answered before a stalled stream gave room back")
	m, err := felix.DecodeMessage(f.Payload)
	require.NoError(t, err)
	require.IsType(t, &felix.AuthOK{}, m)
	for i, s := range stalled {
		require.Equal(t, ResetAuthTimeout, streamReset(t, s), "stream %d", i)
	}
	good.send(&felix.Publish{TenantID: "t1", Namespace: "ns", Stream: "s", Payload: []byte("a"), RequestID: felix.Some[uint64](1), Ack: felix.Some(felix.AckPerMessage)})
	require.IsType(t, &felix.PublishOK{}, good.recv())
	_, err = other.Publish(testCtx(t), topic, []byte("served"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
}

// connPreAuthHeld returns the auth frame bytes held by b's connection
// that has some (0 when none has).
func connPreAuthHeld(b *testBroker) int64 {
	b.ln.mu.Lock()
	defer b.ln.mu.Unlock()
	for sc := range b.ln.conns {
		if n := sc.preBudget.inUse(); n > 0 {
			return n
		}
	}
	return 0
}

// Every unauthenticated stream has its own deadline, which keeps running
// after another stream of the connection authenticated: idle and
// half-header streams are reset with ResetAuthTimeout while the
// authenticated stream and the connection go on.
func TestPerStreamAuthDeadline(t *testing.T) {
	leakCheck(t)
	// The timeout must leave a loaded machine time to dial and
	// authenticate the first stream.
	b := startBroker(t, brokerOpts{offer: fullOffer(), authTimeout: 3 * time.Second})
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	good := openRaw(t, qc)
	good.s.Write(authFrame(t))
	require.IsType(t, &felix.AuthOK{}, good.recv())
	var idle []*quic.Stream
	for i := range 5 {
		s, err := qc.OpenStreamSync(testCtx(t))
		require.NoError(t, err)
		payload := []byte("F")
		if i%2 == 0 {
			payload = authFrame(t)[:felix.HeaderLen+3] // a header, then a stalled payload
		}
		_, err = s.Write(payload)
		require.NoError(t, err)
		idle = append(idle, s)
	}
	for i, s := range idle {
		require.Equal(t, ResetAuthTimeout, streamReset(t, s), "stream %d", i)
	}
	require.EqualValues(t, 5, b.ln.Stats().ExpiredStreams)
	require.NoError(t, qc.Context().Err(), "the connection lives on")
	good.send(&felix.Publish{TenantID: "t1", Namespace: "ns", Stream: "s", Payload: []byte("a"), RequestID: felix.Some[uint64](1), Ack: felix.Some(felix.AckPerMessage)})
	require.IsType(t, &felix.PublishOK{}, good.recv())
}

// Connections beyond MaxConnections are refused during the handshake with
// CONNECTION_REFUSED; the place comes back when a connection closes.
func TestMaxConnections(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) { c.MaxConnections = 2 }})
	c1 := b.dial(t, nil)
	b.dial(t, nil)
	require.EqualValues(t, 2, b.ln.Stats().Connections)
	_, err := Dial(testCtx(t), b.addr(), b.clientConfig())
	var te *quic.TransportError
	require.ErrorAs(t, err, &te, "%v", err)
	require.Equal(t, quic.ConnectionRefused, te.ErrorCode)
	require.True(t, te.Remote)
	require.ErrorIs(t, err, ErrBrokerBusy, "a refusal for now, not a missing broker")
	require.Contains(t, err.Error(), b.addr())
	require.GreaterOrEqual(t, b.ln.Stats().RefusedConnections, uint64(1)) // once per Initial the client sent
	require.NoError(t, c1.Close())
	waitFor(t, func() bool { return b.ln.Stats().Connections == 1 })
	c3 := b.dial(t, nil)
	_, err = c3.Publish(testCtx(t), topic, []byte("a"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
}

// Frame limits refuse from the header, with an answer: before auth
// (64 KiB) and after (MaxFrameBytes, limit_exceeded), and a stream that
// ends inside a header is a clean end, not a reset.
func TestFrameLimitsRefused(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), maxFrame: 4096})
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	rs := openRaw(t, qc)
	rs.s.Write(felix.AppendHeader(nil, felix.Header{Length: felix.PreAuthMaxFrameBytes + 1}))
	require.Equal(t, `{"type":"error","message":"auth frame too large"}`, rs.recvRaw())
	require.Equal(t, io.EOF, rs.expectEnd())
	rs = openRaw(t, qc)
	rs.s.Write(authFrame(t))
	require.IsType(t, &felix.AuthOK{}, rs.recv())
	rs.s.Write(felix.AppendHeader(nil, felix.Header{Flags: 0x0001, Length: 4097}))
	m := rs.recv()
	em, ok := m.(*felix.ErrorMessage)
	require.True(t, ok, "%T", m)
	require.Equal(t, felix.CodeLimitExceeded, em.Code.V)
	require.Contains(t, em.Message, "frame too large")
	require.Equal(t, io.EOF, rs.expectEnd())
	require.GreaterOrEqual(t, b.ln.Stats().OversizeFrames, uint64(1))

	// 5 header bytes then FIN: a clean end (docs/frame.md §6), before and
	// after auth.
	for _, authed := range []bool{false, true} {
		rs = openRaw(t, qc)
		if authed {
			rs.s.Write(authFrame(t))
			require.IsType(t, &felix.AuthOK{}, rs.recv())
		}
		rs.s.Write([]byte("FLX1\x01"))
		rs.s.Close()
		_, err := rs.r.ReadFrame()
		require.Equal(t, io.EOF, err, "authed=%v", authed)
	}
}

// The window gate: before authentication a connection cannot make the
// server buffer more than its initial window.
func TestServerQUICConfig(t *testing.T) {
	l := &Listener{}
	c := ServerConfig{}
	c.applyLimits()
	q := l.serverQUIC(&c)
	require.EqualValues(t, DefaultMaxStreams, q.MaxIncomingStreams)
	require.EqualValues(t, DefaultMaxStreams, q.MaxIncomingUniStreams)
	require.EqualValues(t, DefaultPreAuthConnWindow, q.InitialConnectionReceiveWindow)
	require.EqualValues(t, DefaultMaxConnReceiveWindow, q.MaxConnectionReceiveWindow, "the window after auth is not the request budget")
	require.EqualValues(t, DefaultMaxConnReceiveWindow, q.MaxStreamReceiveWindow)
	require.False(t, q.AllowConnectionWindowIncrease(nil, 1), "unknown connection: no growth")
	// The receive window is at most the request budget, and at least the
	// pre-auth window (an auth frame of the pre-auth limit fits).
	for _, tc := range []struct{ window, budget, want uint64 }{
		{4 << 20, 1 << 20, 1 << 20},
		{4 << 20, 0, 4 << 20},
		{4 << 10, 0, DefaultPreAuthConnWindow},
	} {
		c = ServerConfig{MaxConnReceiveWindow: tc.window, MaxConnInFlightBytes: tc.budget}
		c.applyLimits()
		q = l.serverQUIC(&c)
		require.Equal(t, tc.want, q.MaxConnectionReceiveWindow, "%+v", tc)
		require.Equal(t, tc.want, q.MaxStreamReceiveWindow, "%+v", tc)
	}
	c = ServerConfig{MaxStreams: 10, MaxConnInFlightBytes: 1 << 20, QUIC: &quic.Config{MaxIncomingUniStreams: 3, MaxConnectionReceiveWindow: 5 << 20}}
	c.applyLimits()
	q = l.serverQUIC(&c)
	require.EqualValues(t, 10, q.MaxIncomingStreams)
	require.EqualValues(t, 3, q.MaxIncomingUniStreams, "an explicit QUIC value wins")
	require.EqualValues(t, 5<<20, q.MaxConnectionReceiveWindow)
	require.EqualValues(t, 1<<20, q.MaxStreamReceiveWindow)
	require.Zero(t, c.QUIC.MaxIncomingStreams, "the caller's config is not modified")
	// A pre-auth frame limit above the default window raises the window
	// to hold one such frame and the usual spare.
	c = ServerConfig{PreAuthMaxFrameBytes: 1 << 20}
	c.applyLimits()
	q = l.serverQUIC(&c)
	want := uint64(1<<20 + felix.HeaderLen + DefaultPreAuthConnWindow - felix.PreAuthMaxFrameBytes - felix.HeaderLen)
	require.Equal(t, want, q.InitialConnectionReceiveWindow)
	require.Equal(t, want, q.InitialStreamReceiveWindow)
}

// Request bytes held per connection are bounded by MaxConnInFlightBytes:
// a stream whose next frame does not fit waits before reading its payload
// until the frame held by another stream is released (that stream's next
// ReadRequest), and then reads it whole.
func TestConnInFlightBytes(t *testing.T) {
	leakCheck(t)
	srvTLS, pool, err := SelfSigned()
	require.NoError(t, err)
	ln, err := Listen("127.0.0.1:0", &ServerConfig{TLS: srvTLS, Offer: fullOffer(), MaxFrameBytes: 64 << 10, MaxConnInFlightBytes: 64 << 10})
	require.NoError(t, err)
	defer ln.Close()
	ctx := testCtx(t)
	qc, err := quic.DialAddr(ctx, ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "localhost"}, nil)
	require.NoError(t, err)
	defer qc.CloseWithError(0, "")
	sc, err := ln.Accept(ctx)
	require.NoError(t, err)

	open := func() (*quic.Stream, *Stream) {
		cs, err := qc.OpenStreamSync(ctx)
		require.NoError(t, err)
		_, err = cs.Write(authFrame(t))
		require.NoError(t, err)
		st, err := sc.AcceptStream(ctx)
		require.NoError(t, err)
		return cs, st
	}
	frame := func(fill byte) []byte {
		f, err := felix.AppendFrame(nil, felix.FlagBinaryPublishBatch, bytes.Repeat([]byte{fill}, 40<<10))
		require.NoError(t, err)
		return f
	}
	ca, sa := open()
	cb, sb := open()
	_, err = ca.Write(frame('a'))
	require.NoError(t, err)
	ra, err := sa.ReadRequest(ctx)
	require.NoError(t, err)
	require.Len(t, ra.Payload, 40<<10)
	require.EqualValues(t, 40<<10, sc.budget.inUse())

	_, err = cb.Write(frame('b'))
	require.NoError(t, err)
	got := make(chan Request, 1)
	go func() {
		r, err := sb.ReadRequest(ctx)
		if err == nil {
			r.Payload = bytes.Clone(r.Payload)
		}
		got <- r
	}()
	waitFor(t, func() bool { return sc.budget.waiting() == 1 }, "b waits for a's bytes")
	require.Equal(t, byte('a'), ra.Payload[0], "a's payload is intact while b waits")

	// a's next ReadRequest releases its frame; b's is then read.
	aDone := make(chan error, 1)
	go func() { _, err := sa.ReadRequest(ctx); aDone <- err }()
	rb := recv(t, got, "b's request, read once a's frame is released")
	require.Len(t, rb.Payload, 40<<10)
	require.Equal(t, byte('b'), rb.Payload[0])
	ca.Close()
	require.ErrorIs(t, <-aDone, io.EOF)
	sb.Close()
	waitFor(t, func() bool { return sc.budget.inUse() == 0 }, "every reservation returned")
}

func TestByteBudget(t *testing.T) {
	b := newByteBudget(64)
	ctx := testCtx(t)
	n, err := b.acquire(ctx, 60)
	require.NoError(t, err)
	require.EqualValues(t, 60, n)

	// A waiter whose context ends takes nothing and lets a smaller one
	// behind it through.
	cctx, cancel := context.WithCancel(ctx)
	big := make(chan error, 1)
	go func() { _, err := b.acquire(cctx, 10); big <- err }()
	waitFor(t, func() bool { return b.waiting() == 1 })
	small := make(chan int64, 1)
	go func() { n, _ := b.acquire(ctx, 4); small <- n }()
	waitFor(t, func() bool { return b.waiting() == 2 }, "FIFO: the small one waits behind the big one")
	cancel()
	require.ErrorIs(t, <-big, context.Canceled)
	require.EqualValues(t, 4, <-small)
	require.EqualValues(t, 64, b.inUse())

	// A request above the size takes the whole budget.
	b.release(64)
	n, err = b.acquire(ctx, 1000)
	require.NoError(t, err)
	require.EqualValues(t, 64, n)
	b.release(n)
	require.Zero(t, b.inUse())
}

// The receive window of a connection may grow only once one of its
// streams authenticated (the gate sees the connection Accept returned).
func TestWindowGrowsOnlyAfterAuth(t *testing.T) {
	leakCheck(t)
	srvTLS, pool, err := SelfSigned()
	require.NoError(t, err)
	ln, err := Listen("127.0.0.1:0", &ServerConfig{TLS: srvTLS, Offer: fullOffer()})
	require.NoError(t, err)
	defer ln.Close()
	ctx := testCtx(t)
	qc, err := quic.DialAddr(ctx, ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "localhost"}, nil)
	require.NoError(t, err)
	defer qc.CloseWithError(0, "")
	sc, err := ln.Accept(ctx)
	require.NoError(t, err)
	require.False(t, ln.windowMayGrow(sc.qc, 0))
	cs, err := qc.OpenStreamSync(ctx)
	require.NoError(t, err)
	_, err = cs.Write(authFrame(t))
	require.NoError(t, err)
	st, err := sc.AcceptStream(ctx)
	require.NoError(t, err)
	require.True(t, ln.windowMayGrow(sc.qc, 0))
	// An authenticated connection moves a frame far above the initial
	// window.
	big, err := felix.AppendFrame(nil, felix.FlagBinaryPublishBatch, make([]byte, 4<<20))
	require.NoError(t, err)
	wrote := make(chan error, 1)
	go func() { _, err := cs.Write(big); wrote <- err }()
	r, err := st.ReadRequest(ctx)
	require.NoError(t, err)
	require.Len(t, r.Payload, 4<<20)
	require.NoError(t, <-wrote)
}

// Streams waiting for a read slot expire on their own deadline even while
// every slot is busy (here the only slot waits in a slow Authenticator).
func TestQueuedStreamsExpire(t *testing.T) {
	leakCheck(t)
	release := make(chan struct{})
	var calls atomic.Int32
	auth := func(ctx context.Context, a *felix.Auth) (any, error) {
		if calls.Add(1) == 2 {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil, nil
	}
	b := startBroker(t, brokerOpts{offer: fullOffer(), auth: auth, authTimeout: time.Second,
		server: func(c *ServerConfig) { c.PreAuthStreams = 1 }})
	defer close(release)
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	first := openRaw(t, qc)
	first.s.Write(authFrame(t))
	require.IsType(t, &felix.AuthOK{}, first.recv()) // the connection's timer stops
	slow := openRaw(t, qc)
	slow.s.Write(authFrame(t)) // holds the only slot in the Authenticator
	waitFor(t, func() bool { return calls.Load() == 2 })
	var queued []*quic.Stream
	for range 2 {
		s, err := qc.OpenStreamSync(testCtx(t))
		require.NoError(t, err)
		_, err = s.Write([]byte("F"))
		require.NoError(t, err)
		queued = append(queued, s)
	}
	for i, s := range queued {
		require.Equal(t, ResetAuthTimeout, streamReset(t, s), "queued stream %d", i)
	}
	require.EqualValues(t, 2, calls.Load(), "the slot was busy all along: the queue expired on its own")
}

// Answers nobody reads: the answers being written on a connection hold at
// most its answer budget (the others wait, holding no encoded copy), and
// every answer write ends within AnswerWriteTimeout with the stream reset,
// while another connection is served.
func TestAnswerBudgetAndWriteBound(t *testing.T) {
	leakCheck(t)
	const budget, value, streams = 2 << 20, 1 << 20, 8
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) {
		c.MaxConnInFlightBytes, c.AnswerWriteTimeout = budget, 2*time.Second
	}})
	other := b.dial(t, nil)
	ref := felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "big"}
	require.NoError(t, cachePut(testCtx(t), other, ref, "v", make([]byte, value), 0))
	qc, err := rawConn(t, b, nil) // default client windows (512 KiB per stream): a 1.4 MiB answer blocks
	require.NoError(t, err)
	var ss []*rawStream
	for range streams {
		rs := openRaw(t, qc)
		rs.s.Write(authFrame(t))
		require.IsType(t, &felix.AuthOK{}, rs.recv())
		rs.send(&felix.CacheGet{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: "v", RequestID: felix.Some[uint64](1)})
		ss = append(ss, rs)
	}
	var sc *ServerConn
	waitFor(t, func() bool {
		b.ln.mu.Lock()
		defer b.ln.mu.Unlock()
		for c := range b.ln.conns {
			if c.answers.budget.waiting() == streams-1 {
				sc = c
			}
		}
		return sc != nil
	}, "one answer written, the others waiting for room")
	require.LessOrEqual(t, sc.answers.budget.inUse(), int64(budget))
	// Each is cut or gives up after the bound: the client, which still
	// reads nothing, then finds its streams reset.
	waitFor(t, func() bool { return b.ln.Stats().AnswerTimeouts >= streams })
	for i, rs := range ss {
		for {
			if _, err := rs.s.Read(make([]byte, 64<<10)); err != nil {
				var se *quic.StreamError
				require.ErrorAs(t, err, &se, "stream %d", i)
				break
			}
		}
	}
	require.EqualValues(t, streams, b.ln.Stats().AnswerTimeouts)
	// The bytes come back once each cut write has returned (the timeout is
	// counted, and the stream reset, just before): wait for that, a leak
	// never gets there.
	waitFor(t, func() bool { return sc.answers.budget.inUse() == 0 }, "every answer's bytes returned")
	_, err = other.Publish(testCtx(t), topic, []byte("served"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
}

// maxAuthFrame returns an auth frame whose payload is exactly n bytes (its
// token padded).
func maxAuthFrame(t *testing.T, n int) []byte {
	a := &felix.Auth{TenantID: "t1", ClientFlags: felix.Some[uint16](7), ClientFeatures: felix.Some(uint32(felix.FeatureErrorCodes))}
	fr, err := felix.AppendMessageFrame(nil, a)
	require.NoError(t, err)
	a.Token = strings.Repeat("x", n-(len(fr)-felix.HeaderLen))
	fr, err = felix.AppendMessageFrame(nil, a)
	require.NoError(t, err)
	require.Len(t, fr, felix.HeaderLen+n)
	return fr
}

// The pre-auth window and auth frame budget hold an auth frame of the
// largest size allowed before auth, on a connection none of whose streams
// authenticated yet (its window at the initial size), next to the small
// auth frames of the other read slots' streams: every one is answered
// auth_ok. A PreAuthMaxFrameBytes above the default window raises the
// window and the budget to fit one such frame.
func TestMaximalAuthFrameAuthenticates(t *testing.T) {
	leakCheck(t)
	for _, limit := range []uint32{0, 2 * DefaultPreAuthConnWindow} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) { c.PreAuthMaxFrameBytes = limit }})
			n := int(cmp.Or(limit, felix.PreAuthMaxFrameBytes))
			qc, err := rawConn(t, b, nil)
			require.NoError(t, err)
			var streams []*rawStream
			for range DefaultPreAuthStreams - 1 {
				rs := openRaw(t, qc)
				_, err := rs.s.Write(authFrame(t))
				require.NoError(t, err)
				streams = append(streams, rs)
			}
			big := openRaw(t, qc)
			_, err = big.s.Write(maxAuthFrame(t, n))
			require.NoError(t, err)
			streams = append(streams, big)
			for i, rs := range streams {
				require.IsType(t, &felix.AuthOK{}, rs.recv(), "stream %d", i)
			}
			require.Zero(t, b.ln.Stats().ExpiredStreams)
			require.Zero(t, b.ln.Stats().OversizeFrames)
		})
	}
}

// Once a stream of the connection authenticated, MaxUnauthStreams no
// longer refuses its new streams (the client holds credentials; its
// streams are bounded by MaxStreams as its authenticated ones are): a
// burst of three times the budget, half-headers that never complete, is
// queued and read, and a complete auth behind it is answered, nothing
// refused. On a connection that never authenticated the budget holds
// (TestUnauthStreamBudget).
func TestUnauthStreamBudgetOnceAuthenticated(t *testing.T) {
	leakCheck(t)
	const budget = 4
	b := startBroker(t, brokerOpts{offer: fullOffer(), authTimeout: time.Hour,
		server: func(c *ServerConfig) { c.MaxUnauthStreams = budget; c.PreAuthStreams = 2 }})
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	good := openRaw(t, qc)
	good.s.Write(authFrame(t))
	require.IsType(t, &felix.AuthOK{}, good.recv())
	for range 3 * budget {
		s, err := qc.OpenStreamSync(testCtx(t))
		require.NoError(t, err)
		_, err = s.Write([]byte("FLX"))
		require.NoError(t, err)
	}
	last := openRaw(t, qc)
	last.s.Write(authFrame(t))
	require.IsType(t, &felix.AuthOK{}, last.recv())
	require.Zero(t, b.ln.Stats().RefusedStreams)
	require.EqualValues(t, 1, b.ln.Stats().Connections)
}
