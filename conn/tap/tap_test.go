package tap_test

import (
	"context"
	"crypto/tls"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/tap"
)

// testCtx returns the context of a test's blocking calls: cancelled when
// the test ends or shortly before the test binary's -timeout, so a hang
// fails the test with a context error (no guess of how long a loaded
// machine takes).
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Until(d)/10))
	}
	t.Cleanup(cancel)
	return ctx
}

func leakCheck(t *testing.T) { t.Cleanup(func() { goleak.VerifyNone(t) }) }

// frameLog collects a relay's frames.
type frameLog struct {
	mu     sync.Mutex
	frames []tap.Frame
}

func (l *frameLog) add(f tap.Frame) {
	f.Frame = append([]byte(nil), f.Frame...)
	l.mu.Lock()
	l.frames = append(l.frames, f)
	l.mu.Unlock()
}

type frameKey struct {
	sid    int64
	flags  felix.Flags
	nbytes int
}

// seq returns, stream by stream, the (flags, size) of the frames of dir.
func (l *frameLog) seq(dir tap.Direction) map[int64][]frameKey {
	out := map[int64][]frameKey{}
	for _, f := range l.frames {
		if f.Dir == dir && f.Err == nil {
			h, _ := felix.ParseHeaderLenient(f.Frame)
			out[f.StreamID] = append(out[f.StreamID], frameKey{f.StreamID, h.Flags, len(f.Frame)})
		}
	}
	return out
}

// hookLog collects the frames and authentications conn's hooks report.
type hookLog struct {
	mu            sync.Mutex
	read, written []conn.FrameInfo
	authenticated int
}

func (l *hookLog) hooks() *conn.Hooks {
	add := func(f func()) { l.mu.Lock(); f(); l.mu.Unlock() }
	return &conn.Hooks{
		FrameRead:           func(e conn.FrameInfo) { add(func() { l.read = append(l.read, e) }) },
		FrameWritten:        func(e conn.FrameInfo) { add(func() { l.written = append(l.written, e) }) },
		StreamAuthenticated: func(conn.StreamInfo) { add(func() { l.authenticated++ }) },
	}
}

func hookSeq(evs []conn.FrameInfo) map[int64][]frameKey {
	out := map[int64][]frameKey{}
	for _, e := range evs {
		out[e.StreamID] = append(out[e.StreamID], frameKey{e.StreamID, e.Flags, e.Bytes})
	}
	return out
}

// Client → relay → broker: the client trusts the relay's certificate, the
// relay verifies the broker's; every frame in both directions is reported
// whole, on the stream it travelled, and is what the other end got.
func TestRelayEndToEnd(t *testing.T) {
	leakCheck(t)
	var srvHooks, cliHooks hookLog
	b := startBroker(t, func(c *conn.ServerConfig) { c.Hooks = srvHooks.hooks() })
	relayTLS, relayPool, err := conn.SelfSigned()
	require.NoError(t, err)
	var rl frameLog
	r, err := tap.Listen("127.0.0.1:0", &tap.Config{TLS: relayTLS, Upstream: b.addr(),
		UpstreamTLS: &tls.Config{RootCAs: b.pool}, OnFrame: rl.add})
	require.NoError(t, err)
	defer r.Close()

	ctx := testCtx(t)
	c, err := conn.Dial(ctx, r.Addr().String(), &conn.Config{TLS: dialTLS(relayPool), TenantID: "t1", Token: "tok",
		OfferALPN: true, Hooks: cliHooks.hooks(), PublishStreams: 2})
	require.NoError(t, err)
	require.Equal(t, conn.ALPN, c.NegotiatedALPN())
	topic := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}
	_, err = c.PublishBatch(ctx, topic, [][]byte{[]byte("a"), []byte("b")}, conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	_, err = c.Publish(ctx, topic, []byte("c"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	ref := felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "c"}
	require.NoError(t, api.New(c).CachePut(ctx, ref, "k", []byte("v"), 0))
	v, found, err := api.New(c).CacheGet(ctx, ref, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v", string(v))
	sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartAt(0)})
	require.NoError(t, err)
	var got []string
	for len(got) < 3 {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		got = append(got, string(ev.Payload))
	}
	require.Equal(t, []string{"a", "b", "c"}, got)
	// An unsubscribe (STOP_SENDING on the event stream) reaches the broker.
	require.NoError(t, sub.Close())
	select {
	case <-b.unsubscribed:
	case <-ctx.Done():
		t.Fatal("the broker never saw the unsubscribe")
	}
	require.NoError(t, c.Close())
	require.NoError(t, r.Close())

	rl.mu.Lock()
	defer rl.mu.Unlock()
	cliHooks.mu.Lock()
	defer cliHooks.mu.Unlock()
	srvHooks.mu.Lock()
	defer srvHooks.mu.Unlock()
	require.NotEmpty(t, rl.frames)
	for _, f := range rl.frames {
		require.NoError(t, f.Err)
		require.Equal(t, uint64(1), f.Conn)
		_, err := felix.DecodeFrame(f.Frame, felix.DefaultMaxFrameBytes)
		require.NoError(t, err, "every reported frame is whole")
	}
	// What the client wrote is what the relay saw and the broker read;
	// what the broker wrote is what the relay saw and the client read:
	// frame by frame, on the same stream ids, with the same sizes.
	require.Equal(t, hookSeq(cliHooks.written), rl.seq(tap.ClientToBroker))
	require.Equal(t, hookSeq(srvHooks.read), rl.seq(tap.ClientToBroker))
	require.Equal(t, hookSeq(srvHooks.written), rl.seq(tap.BrokerToClient))
	require.Equal(t, hookSeq(cliHooks.read), rl.seq(tap.BrokerToClient))
	// The auth frames are reported with their token (redaction is the
	// logger's job).
	var auths int
	for _, f := range rl.frames {
		fr, _ := felix.DecodeFrame(f.Frame, felix.DefaultMaxFrameBytes)
		if fr.Flags == 0 && f.Dir == tap.ClientToBroker {
			if m, err := felix.DecodeMessage(fr.Payload); err == nil {
				if a, ok := m.(*felix.Auth); ok {
					require.Equal(t, "tok", a.Token)
					auths++
				}
			}
		}
	}
	require.Positive(t, auths)
	require.Equal(t, cliHooks.authenticated, auths)
}

// A broker that refuses the client (another ALPN policy) closes the
// client's connection through the relay.
func TestRelayBrokerRefuses(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, func(c *conn.ServerConfig) { c.RequireALPN = true })
	relayTLS, relayPool, err := conn.SelfSigned()
	require.NoError(t, err)
	r, err := tap.Listen("127.0.0.1:0", &tap.Config{TLS: relayTLS, Upstream: b.addr(), UpstreamTLS: &tls.Config{RootCAs: b.pool}})
	require.NoError(t, err)
	defer r.Close()
	_, err = conn.Dial(testCtx(t), r.Addr().String(), &conn.Config{TLS: dialTLS(relayPool), TenantID: "t1", Token: "tok"})
	require.ErrorContains(t, err, "relay: cannot connect to the broker")
}

// A broker's close code and reason reach the client through the relay.
func TestRelayForwardsCloseCode(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, nil)
	relayTLS, relayPool, err := conn.SelfSigned()
	require.NoError(t, err)
	r, err := tap.Listen("127.0.0.1:0", &tap.Config{TLS: relayTLS, Upstream: b.addr(), UpstreamTLS: &tls.Config{RootCAs: b.pool}})
	require.NoError(t, err)
	defer r.Close()
	c, err := conn.Dial(testCtx(t), r.Addr().String(), &conn.Config{TLS: dialTLS(relayPool), TenantID: "t1", Token: "tok"})
	require.NoError(t, err)
	defer c.Close()
	// Dial returned after the broker answered the auth, so the broker
	// has accepted the connection.
	b.mu.Lock()
	require.Len(t, b.conns, 1)
	sc := b.conns[0]
	b.mu.Unlock()
	require.NoError(t, sc.CloseWithError(conn.CloseAuthTimeout, "test close"))
	<-c.Context().Done()
	var ae *quic.ApplicationError
	require.ErrorAs(t, context.Cause(c.Context()), &ae)
	require.True(t, ae.Remote)
	require.Equal(t, conn.CloseAuthTimeout, ae.ErrorCode)
	require.Equal(t, "test close", ae.ErrorMessage)
}

// A frame above the report limit is relayed, and reported once as
// felix.FrameTooLarge; the rest of that direction is relayed unreported.
func TestRelayReportLimit(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, nil)
	relayTLS, relayPool, err := conn.SelfSigned()
	require.NoError(t, err)
	var rl frameLog
	r, err := tap.Listen("127.0.0.1:0", &tap.Config{TLS: relayTLS, Upstream: b.addr(), UpstreamTLS: &tls.Config{RootCAs: b.pool},
		OnFrame: rl.add, MaxFrameBytes: 1024})
	require.NoError(t, err)
	ctx := testCtx(t)
	c, err := conn.Dial(ctx, r.Addr().String(), &conn.Config{TLS: dialTLS(relayPool), TenantID: "t1", Token: "tok"})
	require.NoError(t, err)
	topic := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}
	_, err = c.Publish(ctx, topic, make([]byte, 4096), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err, "the large frame was relayed")
	_, err = c.Publish(ctx, topic, []byte("small"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, r.Close())
	rl.mu.Lock()
	defer rl.mu.Unlock()
	var tooLarge []error
	for _, f := range rl.frames {
		if f.Err != nil {
			tooLarge = append(tooLarge, f.Err)
		}
	}
	require.Len(t, tooLarge, 1, "reported once; the rest of the direction is not")
	var fe *felix.Error
	require.True(t, errors.As(tooLarge[0], &fe))
	require.Equal(t, felix.ErrFrameTooLarge, fe.Class)
	require.Equal(t, "length", fe.Field)
	require.Contains(t, fe.Detail, "> limit 1024")
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Len(t, b.records, 2, "both publishes reached the broker")
}
