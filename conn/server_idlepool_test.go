package conn

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// An older client opens a pool of connections and authenticates a stream
// on one only when it first uses it. With ConnAuthTimeout raised, such a
// connection, idle (no stream at all) for longer than AuthTimeout,
// authenticates when it is used; with the default a connection idle as
// long is closed. The two listeners differ only in the setting; the pooled
// connection is dialled first, and used only once the default listener's
// connection, dialled after it, was closed by its timeout.
func TestConnAuthTimeoutAcceptsIdlePools(t *testing.T) {
	leakCheck(t)
	const authTimeout = time.Second
	strict := startBroker(t, brokerOpts{offer: fullOffer(), authTimeout: authTimeout})
	pooled := startBroker(t, brokerOpts{offer: fullOffer(), authTimeout: authTimeout,
		server: func(c *ServerConfig) { c.ConnAuthTimeout = 10 * time.Minute }})
	dialIdle := func(b *testBroker) *quic.Conn {
		qc, err := quic.DialAddr(testCtx(t), b.addr(), &tls.Config{RootCAs: b.pool, ServerName: "localhost"},
			&quic.Config{KeepAlivePeriod: 200 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { qc.CloseWithError(0, "") })
		return qc
	}
	idle := dialIdle(pooled)
	control := dialIdle(strict)
	<-control.Context().Done()
	var ae *quic.ApplicationError
	require.ErrorAs(t, context.Cause(control.Context()), &ae)
	require.Equal(t, CloseAuthTimeout, ae.ErrorCode, "the default closes an idle connection")

	require.NoError(t, idle.Context().Err(), "the pooled connection outlived AuthTimeout")
	rs := openRaw(t, idle)
	rs.send(&felix.Auth{TenantID: "t1", Token: "x", ClientFlags: felix.Some[uint16](7)})
	m := rs.recv()
	_, ok := m.(*felix.AuthOK)
	require.True(t, ok, "authenticated on the pooled connection: %T %+v", m, m)
	rs.send(&felix.Publish{TenantID: "t1", Namespace: "ns", Stream: "s", Payload: []byte("a"), RequestID: felix.Some[uint64](1), Ack: felix.Some(felix.AckPerMessage)})
	m = rs.recv()
	_, ok = m.(*felix.PublishOK)
	require.True(t, ok, "and used: %T %+v", m, m)
}
