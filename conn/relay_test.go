package conn

import (
	"context"
	"crypto/tls"
	"sync"
	"testing"

	"github.com/flxproto/felix"
	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
)

// relayLog collects a relay's frames.
type relayLog struct {
	mu     sync.Mutex
	frames []RelayFrame
}

func (l *relayLog) add(f RelayFrame) {
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
func (l *relayLog) seq(dir RelayDirection) map[int64][]frameKey {
	out := map[int64][]frameKey{}
	for _, f := range l.frames {
		if f.Dir == dir && f.Err == nil {
			h, _ := felix.ParseHeaderLenient(f.Frame)
			out[f.StreamID] = append(out[f.StreamID], frameKey{f.StreamID, h.Flags, len(f.Frame)})
		}
	}
	return out
}

func hookSeq(evs []FrameInfo) map[int64][]frameKey {
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
	srvHooks, cliHooks := newHookLog(), newHookLog()
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) { c.Hooks = srvHooks.hooks() }})
	relayTLS, relayPool, err := SelfSigned()
	require.NoError(t, err)
	var rl relayLog
	r, err := ListenRelay("127.0.0.1:0", &RelayConfig{TLS: relayTLS, Upstream: b.addr(),
		UpstreamTLS: &tls.Config{RootCAs: b.pool}, OnFrame: rl.add})
	require.NoError(t, err)
	defer r.Close()

	ctx := testCtx(t)
	c, err := Dial(ctx, r.Addr().String(), &Config{TLS: &tls.Config{RootCAs: relayPool}, TenantID: "t1", Token: "tok",
		OfferALPN: true, Hooks: cliHooks.hooks(), PublishStreams: 2})
	require.NoError(t, err)
	require.Equal(t, ALPN, c.NegotiatedALPN())
	res, err := c.PublishBatch(ctx, topic, [][]byte{[]byte("a"), []byte("b")}, PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	_ = res
	_, err = c.Publish(ctx, topic, []byte("c"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	require.NoError(t, c.CachePut(ctx, CacheRef{TenantID: "t1", Namespace: "ns", Cache: "c"}, "k", []byte("v"), 0))
	v, found, err := c.CacheGet(ctx, CacheRef{TenantID: "t1", Namespace: "ns", Cache: "c"}, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v", string(v))
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartAt(0)})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, payloads(nextN(t, ctx, sub, 3)))
	// An unsubscribe (STOP_SENDING on the event stream) reaches the broker.
	require.NoError(t, sub.Close())
	waitFor(t, func() bool { return b.subscribers(topicKey("t1", "ns", "s")) == 0 })
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
	require.Equal(t, hookSeq(cliHooks.written), rl.seq(ClientToBroker))
	require.Equal(t, hookSeq(srvHooks.read), rl.seq(ClientToBroker))
	require.Equal(t, hookSeq(srvHooks.written), rl.seq(BrokerToClient))
	require.Equal(t, hookSeq(cliHooks.read), rl.seq(BrokerToClient))
	// The auth frames are reported with their token (redaction is the
	// logger's job).
	var auths int
	for _, f := range rl.frames {
		fr, _ := felix.DecodeFrame(f.Frame, felix.DefaultMaxFrameBytes)
		if fr.Flags == 0 && f.Dir == ClientToBroker {
			if m, err := felix.DecodeMessage(fr.Payload); err == nil {
				if a, ok := m.(*felix.Auth); ok {
					require.Equal(t, "tok", a.Token)
					auths++
				}
			}
		}
	}
	require.Equal(t, len(cliHooks.authed), auths)
}

// A broker that refuses the client (another ALPN policy) closes the
// client's connection through the relay.
func TestRelayBrokerRefuses(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), requireALPN: true})
	relayTLS, relayPool, err := SelfSigned()
	require.NoError(t, err)
	r, err := ListenRelay("127.0.0.1:0", &RelayConfig{TLS: relayTLS, Upstream: b.addr(), UpstreamTLS: &tls.Config{RootCAs: b.pool}})
	require.NoError(t, err)
	defer r.Close()
	_, err = Dial(testCtx(t), r.Addr().String(), &Config{TLS: &tls.Config{RootCAs: relayPool}, TenantID: "t1", Token: "tok"})
	require.ErrorContains(t, err, "relay: cannot connect to the broker")
}

// A broker's close code and reason reach the client through the relay.
func TestRelayForwardsCloseCode(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	relayTLS, relayPool, err := SelfSigned()
	require.NoError(t, err)
	r, err := ListenRelay("127.0.0.1:0", &RelayConfig{TLS: relayTLS, Upstream: b.addr(), UpstreamTLS: &tls.Config{RootCAs: b.pool}})
	require.NoError(t, err)
	defer r.Close()
	c, err := Dial(testCtx(t), r.Addr().String(), &Config{TLS: &tls.Config{RootCAs: relayPool}, TenantID: "t1", Token: "tok"})
	require.NoError(t, err)
	defer c.Close()
	waitFor(t, func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.conns) == 1 })
	b.mu.Lock()
	sc := b.conns[0]
	b.mu.Unlock()
	require.NoError(t, sc.CloseWithError(CloseAuthTimeout, "test close"))
	<-c.Context().Done()
	var ae *quic.ApplicationError
	require.ErrorAs(t, context.Cause(c.Context()), &ae)
	require.True(t, ae.Remote)
	require.Equal(t, CloseAuthTimeout, ae.ErrorCode)
	require.Equal(t, "test close", ae.ErrorMessage)
}
