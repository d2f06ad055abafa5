package conn

import (
	"context"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// unauthListed is the length of the listener's unauthenticated list, read
// under its lock, beside the Stats gauge that mirrors it.
func unauthListed(l *Listener) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unauth.Len()
}

// requireEvicted waits until the server closed qc and checks the code.
func requireEvicted(t *testing.T, qc *quic.Conn) {
	t.Helper()
	select {
	case <-qc.Context().Done():
	case <-testCtx(t).Done():
		require.Fail(t, "the oldest unauthenticated connection was not closed")
	}
	var ae *quic.ApplicationError
	require.ErrorAs(t, context.Cause(qc.Context()), &ae)
	require.Equal(t, CloseAuthTimeout, ae.ErrorCode)
	require.True(t, ae.Remote)
	require.Equal(t, "too many unauthenticated connections", ae.ErrorMessage)
}

// At MaxUnauthConns unauthenticated connections, a new connection is
// admitted and the oldest unauthenticated one closed (CloseAuthTimeout); a
// legitimate client dialled while the cap is full gets in, and once
// authenticated it is never evicted, however many raw connections follow.
func TestMaxUnauthConnsEvictsOldest(t *testing.T) {
	leakCheck(t)
	const limit = 4
	b := startBroker(t, brokerOpts{offer: fullOffer(), authTimeout: time.Hour,
		server: func(c *ServerConfig) { c.MaxUnauthConns = limit }})
	atMostLimit := func() {
		t.Helper()
		require.LessOrEqual(t, b.ln.Stats().UnauthConnections, int64(limit))
		require.LessOrEqual(t, unauthListed(b.ln), limit)
	}
	var raws []*quic.Conn
	dialRaw := func() *quic.Conn {
		t.Helper()
		qc, err := rawConn(t, b, nil)
		require.NoError(t, err)
		raws = append(raws, qc)
		return qc
	}
	for i := range limit {
		dialRaw()
		waitFor(t, func() bool { atMostLimit(); return b.ln.Stats().UnauthConnections == int64(i+1) })
	}
	require.Zero(t, b.ln.Stats().UnauthEvicted)

	// A fifth: the first is closed, the others live on.
	dialRaw()
	requireEvicted(t, raws[0])
	require.EqualValues(t, 1, b.ln.Stats().UnauthEvicted)
	require.EqualValues(t, limit, b.ln.Stats().UnauthConnections)
	atMostLimit()
	for _, qc := range raws[1:] {
		require.NoError(t, qc.Context().Err())
	}

	// A legitimate client while the cap is full: admitted (the next oldest,
	// raws[1], makes room), authenticated in Dial, served.
	legit := b.dial(t, nil)
	requireEvicted(t, raws[1])
	require.EqualValues(t, 2, b.ln.Stats().UnauthEvicted)
	waitFor(t, func() bool { atMostLimit(); return b.ln.Stats().UnauthConnections == limit-1 })
	_, err := legit.Publish(testCtx(t), topic, []byte("a"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)

	// Eight more idle raw connections: each evicts the oldest
	// unauthenticated one, never the authenticated client.
	for i := range 8 {
		dialRaw()
		// Registered by the server (listed or evicted) before the next
		// one, so that "oldest" is the dialling order.
		waitFor(t, func() bool {
			atMostLimit()
			st := b.ln.Stats()
			return st.UnauthConnections+int64(st.UnauthEvicted) == int64(limit-1+2+i+1)
		})
	}
	waitFor(t, func() bool { atMostLimit(); return b.ln.Stats().UnauthEvicted == 2+8-1 })
	require.EqualValues(t, limit, b.ln.Stats().UnauthConnections)
	for _, qc := range raws[2 : len(raws)-limit] {
		requireEvicted(t, qc)
	}
	for _, qc := range raws[len(raws)-limit:] {
		require.NoError(t, qc.Context().Err())
	}
	_, err = legit.Publish(testCtx(t), topic, []byte("b"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	require.NoError(t, legit.Probe(testCtx(t)))
	require.NoError(t, legit.Context().Err())
	b.mu.Lock()
	var authed []*ServerConn
	for _, sc := range b.conns {
		if sc.Authenticated() {
			authed = append(authed, sc)
		}
	}
	b.mu.Unlock()
	require.Len(t, authed, 1)
	require.NoError(t, authed[0].Context().Err(), "the authenticated connection was closed")

	// A connection that ends leaves the count.
	require.NoError(t, raws[len(raws)-1].CloseWithError(0, ""))
	waitFor(t, func() bool { return b.ln.Stats().UnauthConnections == limit-1 })
	require.Equal(t, limit-1, unauthListed(b.ln))
	require.EqualValues(t, 9, b.ln.Stats().UnauthEvicted)
}

// The zero MaxUnauthConns is DefaultMaxUnauthConns; a negative one is no
// cap, as for the other connection limits.
func TestMaxUnauthConnsDefault(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	require.Equal(t, DefaultMaxUnauthConns, b.ln.cfg.MaxUnauthConns)
	require.Equal(t, 256, DefaultMaxUnauthConns)

	nc := startBroker(t, brokerOpts{offer: fullOffer(), authTimeout: time.Hour,
		server: func(c *ServerConfig) { c.MaxUnauthConns = -1 }})
	require.Equal(t, -1, nc.ln.cfg.MaxUnauthConns)
	var raws []*quic.Conn
	for range 3 {
		qc, err := rawConn(t, nc, nil)
		require.NoError(t, err)
		raws = append(raws, qc)
	}
	waitFor(t, func() bool { return nc.ln.Stats().UnauthConnections == 3 })
	require.Zero(t, nc.ln.Stats().UnauthEvicted)
	for _, qc := range raws {
		require.NoError(t, qc.Context().Err())
	}
}
