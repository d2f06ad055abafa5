package conn

import (
	"context"
	"crypto/tls"
	"io"
	"testing"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// stalledClient is a raw QUIC client with a small stream receive window,
// so that a server write of a large frame exhausts flow control as soon as
// the client stops reading.
type stalledClient struct {
	ln *Listener
	sc *ServerConn
	qc *quic.Conn
	rs *rawStream
}

func newStalledClient(t *testing.T) *stalledClient {
	srvTLS, pool, err := SelfSigned()
	require.NoError(t, err)
	ln, err := Listen("127.0.0.1:0", &ServerConfig{TLS: srvTLS, Offer: fullOffer()})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	ctx := testCtx(t)
	qc, err := quic.DialAddr(ctx, ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "localhost"},
		&quic.Config{InitialStreamReceiveWindow: 32 << 10, MaxStreamReceiveWindow: 32 << 10, MaxIncomingUniStreams: 10})
	require.NoError(t, err)
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	sc, err := ln.Accept(ctx)
	require.NoError(t, err)
	rs := openRaw(t, qc)
	rs.send(&felix.Auth{TenantID: "t1", Token: "x"})
	require.Equal(t, `{"type":"ok"}`, rs.recvRaw())
	return &stalledClient{ln: ln, sc: sc, qc: qc, rs: rs}
}

// bigFrame is a JSON-layout frame (flags 0, so any client may be sent it)
// far larger than the client's stream window.
func bigFrame() []byte {
	const n = 2 << 20
	return append(felix.AppendHeader(nil, felix.Header{Length: n}), make([]byte, n)...)
}

// readStart reads the first bytes of a frame from s, proving that the
// server's write has started, and then stops reading.
func readStart(t *testing.T, s io.Reader) {
	buf := make([]byte, felix.HeaderLen+16)
	_, err := io.ReadFull(s, buf)
	require.NoError(t, err)
}

// requireReset reads s to the point where the server's reset shows: a
// remote *quic.StreamError with code 0.
func requireReset(t *testing.T, s io.Reader) {
	buf := make([]byte, 64<<10)
	for {
		_, err := s.Read(buf)
		if err == nil {
			continue
		}
		var se *quic.StreamError
		require.ErrorAs(t, err, &se, "stream ended without a reset: %v", err)
		require.True(t, se.Remote)
		require.Equal(t, quic.StreamErrorCode(0), se.ErrorCode)
		return
	}
}

func TestStreamWriteCancelledOnStalledClient(t *testing.T) {
	leakCheck(t)
	c := newStalledClient(t)
	ctx := testCtx(t)
	st, err := c.sc.AcceptStream(ctx)
	require.NoError(t, err)

	// A context already done: nothing is written and the stream stays
	// usable.
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	err = st.WriteMessage(done, &felix.OK{})
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, errWriteInterrupted)
	require.NoError(t, st.WriteMessage(ctx, &felix.CacheOK{RequestID: 7}))
	require.Equal(t, `{"type":"cache_ok","request_id":7}`, c.rs.recvRaw())

	// A write blocked on flow control: the client reads the frame's first
	// bytes and then stops.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- st.WriteEncoded(wctx, bigFrame()) }()
	readStart(t, c.rs.s)

	// A second writer waits for the first one's lock; its cancellation
	// abandons the wait without touching the stream.
	wctx2, cancel2 := context.WithCancel(ctx)
	res2 := make(chan error, 1)
	go func() { res2 <- st.WriteError(wctx2, &felix.BrokerError{Message: "late"}) }()
	cancel2()
	err = <-res2
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, errWriteInterrupted)
	select {
	case err := <-res:
		t.Fatalf("blocked write returned before its context ended: %v", err)
	default:
	}

	cancel()
	select {
	case err = <-res:
	case <-ctx.Done():
		t.Fatal("write did not return after its context was cancelled")
	}
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errWriteInterrupted)

	// The stream was reset (the partial frame cannot be continued) and
	// later writes fail.
	requireReset(t, c.rs.s)
	require.Error(t, st.WriteMessage(ctx, &felix.OK{}))
}

func TestEventStreamWriteCancelledOnStalledClient(t *testing.T) {
	leakCheck(t)
	c := newStalledClient(t)
	ctx := testCtx(t)
	st, err := c.sc.AcceptStream(ctx)
	require.NoError(t, err)
	es, err := st.OpenEventStream(ctx, 3)
	require.NoError(t, err)
	us, err := c.qc.AcceptUniStream(ctx)
	require.NoError(t, err)
	hello := make([]byte, felix.HeaderLen+len(`{"type":"event_stream_hello","subscription_id":3}`))
	_, err = io.ReadFull(us, hello)
	require.NoError(t, err)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- es.WriteFrame(wctx, 0, bigFrame()[felix.HeaderLen:]) }()
	readStart(t, us)
	select {
	case err := <-res:
		t.Fatalf("blocked write returned before its context ended: %v", err)
	default:
	}
	cancel()
	select {
	case err = <-res:
	case <-ctx.Done():
		t.Fatal("write did not return after its context was cancelled")
	}
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errWriteInterrupted)
	requireReset(t, us)
	require.Error(t, es.WriteFrame(ctx, 0, []byte("{}")))
	st.Close()
}

func TestServerConnWaitHonoursContext(t *testing.T) {
	leakCheck(t)
	c := newStalledClient(t)
	ctx := testCtx(t)
	wctx, cancel := context.WithCancel(ctx)
	res := make(chan error, 1)
	go func() { res <- c.sc.Wait(wctx) }()
	cancel()
	select {
	case err := <-res:
		require.ErrorIs(t, err, context.Canceled)
	case <-ctx.Done():
		t.Fatal("Wait did not return after its context was cancelled")
	}
	// The connection is untouched; once it closes, Wait returns nil.
	require.NoError(t, c.sc.Context().Err())
	c.qc.CloseWithError(0, "")
	require.NoError(t, c.sc.Wait(ctx))
	require.Error(t, c.sc.Context().Err())
}
