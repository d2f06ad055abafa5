package conn

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// deafConn is a client socket that hears nothing from the server, except
// Retry packets when retry is set: a handshake through it never completes
// (the server keeps a half-open handshake), and with retry it first proves
// its source address. It does not expose ReadMsgUDP, so quic-go reads
// through ReadFrom.
type deafConn struct {
	net.PacketConn
	retry bool
}

func (d *deafConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, a, err := d.PacketConn.ReadFrom(b)
		if err != nil || d.retry && n > 0 && b[0]&0xf0 == 0xf0 { // long header, type Retry (v1)
			return n, a, err
		}
	}
}

// halfOpen starts a handshake to addr from a fresh UDP socket on ip that
// never completes; stop ends it on the client side (the server's half
// expires by itself).
func halfOpen(ctx context.Context, addr, ip string, retry bool) (stop func(), err error) {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		return nil, err
	}
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		udp.Close()
		return nil, err
	}
	tr := &quic.Transport{Conn: &deafConn{PacketConn: udp, retry: retry}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		qc, err := tr.Dial(ctx, raddr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{ALPN}},
			&quic.Config{HandshakeIdleTimeout: time.Minute})
		if err == nil {
			qc.CloseWithError(0, "")
		}
	}()
	return func() {
		cancel()
		<-done
		tr.Close()
		udp.Close()
	}, nil
}

// halfOpenMany starts n half-open handshakes from ip.
func halfOpenMany(t *testing.T, addr, ip string, retry bool, n int) {
	t.Helper()
	for range n {
		stop, err := halfOpen(context.Background(), addr, ip, retry)
		require.NoError(t, err)
		t.Cleanup(stop)
	}
}

// A flood of handshakes that never answer (the 6,000 Initials a
// second, at small scale) holds no connection place and, once
// RetryHandshakes are in progress, not even a handshake: each further
// Initial is answered with a stateless Retry that the flooder never
// follows. Legitimate clients (which follow the Retry) get every place.
func TestHalfOpenHandshakesTakeNoConnectionPlace(t *testing.T) {
	leakCheck(t)
	const maxConns, retryAt = 4, 4
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) {
		c.MaxConnections, c.RetryHandshakes, c.MaxHandshakes = maxConns, retryAt, 16
	}})
	first := b.dial(t, nil)
	halfOpenMany(t, b.addr(), "127.0.0.2", false, 64)
	waitFor(t, func() bool { return b.ln.Stats().Retries >= 60 }, "every flooder past the threshold got a Retry")
	st := b.ln.Stats()
	require.LessOrEqual(t, st.Handshakes, int64(retryAt), "%+v", st)
	require.EqualValues(t, 1, st.Connections)

	// Every connection place is still there for legitimate clients.
	clients := []*Client{first}
	for range maxConns - 1 {
		clients = append(clients, b.dial(t, nil))
	}
	for i, c := range clients {
		_, err := c.Publish(testCtx(t), topic, []byte(strconv.Itoa(i)), PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	st = b.ln.Stats()
	require.EqualValues(t, maxConns, st.Connections)
	require.Zero(t, st.RefusedConnections, "%+v", st)
	require.Zero(t, st.RefusedHandshakes, "%+v", st)
	require.LessOrEqual(t, st.Handshakes, int64(retryAt))
	// The cap still holds for established connections.
	_, err := Dial(testCtx(t), b.addr(), b.clientConfig())
	var te *quic.TransportError
	require.ErrorAs(t, err, &te, "%v", err)
	require.Equal(t, quic.ConnectionRefused, te.ErrorCode)
}

// A flooder that follows the Retry proves its address and then stalls:
// it gets at most MaxHandshakesPerAddr verified handshakes (the rest are
// refused and counted), and a legitimate client from another address
// still connects; at the default and at a tuned value.
func TestVerifiedHandshakesBoundedPerAddress(t *testing.T) {
	for _, perAddr := range []int{0, 3} {
		t.Run(strconv.Itoa(perAddr), func(t *testing.T) {
			leakCheck(t)
			const retryAt = 4
			b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) {
				c.RetryHandshakes, c.MaxHandshakes, c.MaxHandshakesPerAddr = retryAt, 64, perAddr
			}})
			bound := perAddr
			if bound == 0 {
				bound = DefaultMaxHandshakesPerAddr
			}
			halfOpenMany(t, b.addr(), "127.0.0.2", true, 48)
			waitFor(t, func() bool { return b.ln.Stats().RefusedHandshakes >= 1 }, "the address's verified handshakes hit their bound")
			st := b.ln.Stats()
			require.LessOrEqual(t, st.Handshakes, int64(retryAt+bound), "%+v", st)
			require.Zero(t, st.Connections)

			c := b.dial(t, nil) // from 127.0.0.1: asked for a Retry too, and admitted
			_, err := c.Publish(testCtx(t), topic, []byte("served"), PublishOptions{Ack: felix.AckPerBatch})
			require.NoError(t, err)
			require.EqualValues(t, 1, b.ln.Stats().Connections)
			require.LessOrEqual(t, b.ln.Stats().Handshakes, int64(retryAt+bound))
		})
	}
}

// Beyond MaxHandshakes, new handshakes are refused (CONNECTION_REFUSED)
// while established connections carry on.
func TestMaxHandshakes(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) {
		c.RetryHandshakes, c.MaxHandshakes = -1, 3
	}})
	c := b.dial(t, nil)
	halfOpenMany(t, b.addr(), "127.0.0.2", false, 3)
	waitFor(t, func() bool { return b.ln.Stats().Handshakes == 3 })
	_, err := Dial(testCtx(t), b.addr(), b.clientConfig())
	var te *quic.TransportError
	require.ErrorAs(t, err, &te, "%v", err)
	require.Equal(t, quic.ConnectionRefused, te.ErrorCode)
	require.GreaterOrEqual(t, b.ln.Stats().RefusedHandshakes, uint64(1))
	_, err = c.Publish(testCtx(t), topic, []byte("still served"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
}
