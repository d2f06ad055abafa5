package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// serverConnOf returns the listener's connection whose client's local
// address is local (same port: the client's address is unspecified).
func serverConnOf(t *testing.T, ln *Listener, local net.Addr) *ServerConn {
	t.Helper()
	port := local.(*net.UDPAddr).Port
	var found *ServerConn
	waitFor(t, func() bool {
		ln.byQUIC.Range(func(_, v any) bool {
			if sc := v.(*ServerConn); sc.RemoteAddr().(*net.UDPAddr).Port == port {
				found = sc
			}
			return found == nil
		})
		return found != nil
	})
	return found
}

// MaxTenantConns and MaxTenantWindowGrowth (server_tenant.go): a tenant's
// first auths beyond its connection places are refused with
// limit_exceeded, the window growth of its connections is charged to one
// budget (growth beyond it refused, the connection keeping its window),
// another tenant has its own, and both return when a connection ends.
func TestTenantConnsAndWindowGrowth(t *testing.T) {
	leakCheck(t)
	const conns, growth = 2, 100
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) {
		c.MaxTenantConns, c.MaxTenantWindowGrowth = conns, growth
	}})
	dial := func(tenant string) (*Client, error) {
		cfg := b.clientConfig()
		cfg.TenantID = tenant
		c, err := Dial(deadlineCtx(t), b.addr(), cfg)
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}
	a1, err := dial("t1")
	require.NoError(t, err)
	a2, err := dial("t1")
	require.NoError(t, err)
	_, err = dial("t1")
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be, "the third connection of t1 is refused at its auth")
	require.ErrorIs(t, err, felix.ErrAuthRefused)
	require.Equal(t, felix.CodeLimitExceeded, be.Code)
	require.Equal(t, "max_tenant_conns", be.Reason)
	require.Equal(t, felix.RetryAfter, be.RetryClass())
	require.EqualValues(t, 1, b.ln.Stats().RefusedTenantConns)
	o1, err := dial("t2")
	require.NoError(t, err, "another tenant has its own places")
	_, err = o1.Publish(testCtx(t), topic, []byte("t2"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)

	s1, s2, so := serverConnOf(t, b.ln, a1.LocalAddr()), serverConnOf(t, b.ln, a2.LocalAddr()), serverConnOf(t, b.ln, o1.LocalAddr())
	for _, step := range []struct {
		name  string
		sc    *ServerConn
		delta uint64
		grows bool
	}{
		{"t1's first connection grows", s1, 60, true},
		{"t1's second connection beyond t1's budget keeps its window", s2, 60, false},
		{"what is left of t1's budget", s2, 40, true},
		{"t1's budget is spent", s1, 1, false},
		{"t2 has its own budget", so, 60, true},
		{"more than a whole budget", so, growth + 1, false},
	} {
		require.Equal(t, step.grows, b.ln.windowMayGrow(step.sc.qc, step.delta), step.name)
	}
	require.EqualValues(t, growth, b.ln.tenantGrowth.inUse("t1"))
	require.EqualValues(t, 60, b.ln.tenantGrowth.inUse("t2"))
	require.EqualValues(t, 3, b.ln.Stats().RefusedWindowGrowth)

	// a1 ends: its place and its growth return to t1.
	a1.Close()
	require.NoError(t, s1.Wait(testCtx(t)))
	require.EqualValues(t, 40, b.ln.tenantGrowth.inUse("t1"))
	require.EqualValues(t, 1, b.ln.tenantConns.inUse("t1"))
	require.False(t, b.ln.windowMayGrow(s1.qc, 1), "an ended connection grows no more")
	require.True(t, b.ln.windowMayGrow(s2.qc, 60))
	a3, err := dial("t1")
	require.NoError(t, err, "t1's freed place is taken again")
	_, err = a3.Publish(testCtx(t), topic, []byte("t1"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	require.EqualValues(t, 1, b.ln.Stats().RefusedTenantConns)

	// Every connection ends: the tables are empty.
	for _, c := range []*Client{a2, a3, o1} {
		c.Close()
	}
	waitFor(t, func() bool { return b.ln.Stats().Connections == 0 })
	for _, tb := range []*tenantBudgets{b.ln.tenantConns, b.ln.tenantGrowth} {
		tb.mu.Lock()
		n := len(tb.m)
		tb.mu.Unlock()
		require.Zero(t, n)
	}
}

// A connection refused at MaxTenantConns stays unauthenticated: it may
// still authenticate a stream for a tenant with room, and its window does
// not grow meanwhile. No bound (negative) refuses nothing.
func TestTenantConnsRefusedConnStaysUnauthenticated(t *testing.T) {
	leakCheck(t)
	for _, tc := range []struct {
		name    string
		max     int
		refused bool
	}{{"cap 1", 1, true}, {"no cap", -1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) { c.MaxTenantConns = tc.max }})
			b.dial(t, nil)
			qc, err := rawConn(t, b, nil)
			require.NoError(t, err)
			rs := openRaw(t, qc)
			fr, err := felix.AppendMessageFrame(nil, &felix.Auth{TenantID: "t1", Token: "x", ClientFlags: felix.Some[uint16](7),
				ClientFeatures: felix.Some(uint32(felix.FeatureErrorCodes))})
			require.NoError(t, err)
			rs.s.Write(fr)
			m := rs.recv()
			sc := serverConnOf(t, b.ln, qc.LocalAddr())
			if !tc.refused {
				require.IsType(t, &felix.AuthOK{}, m)
				require.True(t, sc.Authenticated())
				return
			}
			em, ok := m.(*felix.ErrorMessage)
			require.True(t, ok, "refused: %#v", m)
			require.Equal(t, felix.CodeLimitExceeded, brokerErrorFrom(em).Code)
			require.False(t, sc.Authenticated())
			require.False(t, b.ln.windowMayGrow(sc.qc, 1))
			require.EqualValues(t, 1, b.ln.Stats().UnauthConnections)
			rs2 := openRaw(t, qc)
			fr, err = felix.AppendMessageFrame(nil, &felix.Auth{TenantID: "t2", Token: "x", ClientFlags: felix.Some[uint16](7)})
			require.NoError(t, err)
			rs2.s.Write(fr)
			require.IsType(t, &felix.AuthOK{}, rs2.recv())
			require.True(t, sc.Authenticated())
			require.EqualValues(t, 1, b.ln.tenantConns.inUse("t2"))
		})
	}
}

// dialFrom completes a QUIC handshake to b from ip and authenticates one
// stream with token; it reports whether the auth was accepted.
func dialFrom(t *testing.T, b *testBroker, ip, token string) bool {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	require.NoError(t, err)
	tr := &quic.Transport{Conn: udp}
	t.Cleanup(func() { tr.Close(); udp.Close() })
	qc, err := tr.Dial(testCtx(t), b.ln.Addr(), &tls.Config{RootCAs: b.pool, ServerName: "localhost", NextProtos: []string{ALPN}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	rs := openRaw(t, qc)
	fr, err := felix.AppendMessageFrame(nil, &felix.Auth{TenantID: "t1", Token: token, ClientFlags: felix.Some[uint16](7)})
	require.NoError(t, err)
	rs.s.Write(fr)
	_, ok := rs.recv().(*felix.AuthOK)
	return ok
}

// An address from which a connection authenticated is not asked for a
// Retry past RetryHandshakes (server_handshake.go), unless it has
// MaxHandshakesPerAddr in progress itself or half of MaxHandshakes are in
// progress; a handshake that completed without authenticating (a wrong
// token) makes no address known. One half-open handshake from 127.0.0.2
// is in progress for each check.
func TestKnownAddressSkipsRetry(t *testing.T) {
	leakCheck(t)
	for _, tc := range []struct {
		name         string
		maxHS        int    // MaxHandshakes
		perAddr      int    // MaxHandshakesPerAddr
		known        string // the address that authenticates first
		knownRetried bool
	}{
		{"known address spared", 64, 8, "127.0.0.5", false},
		{"half of MaxHandshakes in progress", 2, 8, "127.0.0.5", true},
		{"the address's own handshakes at the limit", 64, 1, "127.0.0.2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, brokerOpts{offer: fullOffer(),
				auth: func(_ context.Context, a *felix.Auth) (any, error) {
					if a.Token != "tok" {
						return nil, errors.New("wrong token")
					}
					return nil, nil
				},
				server: func(c *ServerConfig) {
					c.RetryHandshakes, c.MaxHandshakes, c.MaxHandshakesPerAddr = 1, tc.maxHS, tc.perAddr
				}})
			retries := func() uint64 { return b.ln.Stats().Retries }
			// The known address authenticates once with no handshake in
			// progress; 127.0.0.6 completes a handshake and fails its auth.
			require.True(t, dialFrom(t, b, tc.known, "tok"))
			require.False(t, dialFrom(t, b, "127.0.0.6", "guess"))
			require.Zero(t, retries())
			halfOpenMany(t, b.addr(), "127.0.0.2", false, 1)
			waitFor(t, func() bool { return b.ln.Stats().Handshakes == 1 })

			before := retries()
			require.True(t, dialFrom(t, b, tc.known, "tok"))
			require.Equal(t, tc.knownRetried, retries() > before, "the known address asked for a Retry")
			before = retries()
			require.True(t, dialFrom(t, b, "127.0.0.7", "tok"), "a new address")
			require.Greater(t, retries(), before, "a new address is asked for a Retry")
			before = retries()
			require.False(t, dialFrom(t, b, "127.0.0.6", "guess"))
			require.Greater(t, retries(), before, "an address that only failed its auth is asked for a Retry")
		})
	}
}

// A connection is marked authenticated (and taken off the unauthenticated
// list, so it cannot be evicted) before its first auth_ok is written: the
// server's FrameWritten hook, which runs once the answer was handed to
// QUIC, already finds it authenticated.
func TestConnAuthenticatedBeforeItsAuthOK(t *testing.T) {
	leakCheck(t)
	var (
		ln   atomic.Pointer[Listener]
		seen = make(chan bool, 16)
	)
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) {
		c.Hooks = &Hooks{FrameWritten: func(fi FrameInfo) {
			l := ln.Load()
			if fi.Side != SideServer || l == nil {
				return
			}
			l.byQUIC.Range(func(_, v any) bool {
				if sc := v.(*ServerConn); sc.RemoteAddr().String() == fi.Remote.String() {
					l.mu.Lock()
					listed := sc.unauthEl != nil
					l.mu.Unlock()
					select {
					case seen <- sc.Authenticated() && !listed:
					default:
					}
				}
				return true
			})
		}}
	}})
	ln.Store(b.ln)
	b.dial(t, nil)
	require.True(t, recv(t, seen, "the auth_ok written"), "the connection was still unauthenticated when its auth_ok was written")
}
