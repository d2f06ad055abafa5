package conn

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
)

// Distributed guessing at small scale (issue 32 finding 5, issue 35
// finding 4): connections from 8 loopback addresses (127.0.0.2–9) complete
// their handshakes and never authenticate, 96 of them (three times
// quic-go's 32-deep accept queue), while the embedder does not call Accept
// at all (the worst case of an accept loop slowed by evictions or by its
// own work); then legitimate clients dial. Every legitimate dial
// succeeds: the listener takes each completed connection from QUIC at
// once and evicts the oldest unauthenticated one without waiting for its
// close, so quic-go never refuses a completed connection
// (CONNECTION_REFUSED). Before, the 33rd completed connection and every
// later one, legitimate or not, was refused.
func TestAcceptNeverRefusesUnderGuessingFlood(t *testing.T) {
	leakCheck(t)
	const addrs, perAddr, legit, limit = 8, 12, 10, 8
	srvTLS, pool, err := SelfSigned()
	require.NoError(t, err)
	ln, err := Listen("127.0.0.1:0", &ServerConfig{TLS: srvTLS, Offer: fullOffer(), AuthTimeout: time.Hour,
		MaxUnauthConns: limit, RetryHandshakes: -1})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	ctx := testCtx(t)
	port := ln.Addr().(*net.UDPAddr).Port

	var (
		mu       sync.Mutex
		refused  int
		flooders []*quic.Conn
	)
	var wg sync.WaitGroup
	for a := range addrs {
		udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, byte(2+a))})
		require.NoError(t, err)
		tr := &quic.Transport{Conn: udp}
		t.Cleanup(func() { tr.Close(); udp.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perAddr {
				dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				qc, err := tr.Dial(dctx, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port},
					&tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"felix/1"}}, &quic.Config{MaxIdleTimeout: 30 * time.Second})
				cancel()
				mu.Lock()
				if err != nil {
					refused++
				} else {
					flooders = append(flooders, qc)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("flood: %d handshakes completed, %d refused; listener %+v", len(flooders), refused, ln.Stats())
	require.Zero(t, refused, "a completed handshake was refused")

	for i := range legit {
		c, err := Dial(deadlineCtx(t), ln.Addr().String(), &Config{TLS: &tls.Config{RootCAs: pool}, TenantID: "t1", Token: "tok"})
		require.NoError(t, err, "legitimate dial %d", i)
		t.Cleanup(func() { c.Close() })
	}
	st := ln.Stats()
	require.LessOrEqual(t, st.UnauthConnections, int64(limit))
	require.GreaterOrEqual(t, st.UnauthEvicted, uint64(addrs*perAddr-limit))

	// The embedder's Accept finally hands out what is open, oldest first:
	// the last unauthenticated connections, then every legitimate client,
	// authenticated.
	authed := 0
	for accepted := 0; authed < legit; accepted++ {
		require.Less(t, accepted, limit+legit)
		sc, err := ln.Accept(ctx)
		require.NoError(t, err)
		if sc.Authenticated() {
			authed++
		}
	}
	require.Equal(t, legit, authed)
	ln.Close() // before the clients' cleanups: their Close then has nobody to wait for
	for _, qc := range flooders {
		_ = qc.CloseWithError(0, "")
	}
}
