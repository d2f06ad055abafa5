package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// A broker that refuses a dial for now (CONNECTION_REFUSED at its
// connection limit: what a flood of handshakes also causes when its
// accept queue is full) is there: Connect dials it again after a back-off
// within its deadline instead of returning the refusal, and connects once
// a place is free. When the deadline ends first, the refusal is the error
// it returns, matching ErrBrokerBusy.
func TestConnectRetriesABusyBroker(t *testing.T) {
	b := startBrokerCfg(t, func(c *server.Config) {
		c.ConnLimits = func(sc *conn.ServerConfig) { sc.MaxConnections = 1 }
	})
	holder, _ := newClient(t, []string{b.addr}, nil)
	require.NoError(t, holder.Connect(ctxT(t)))

	// With the place taken, a short deadline ends on the refusal.
	short, _ := newClient(t, []string{b.addr}, nil)
	ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	err := short.Connect(ctx)
	cancel()
	require.ErrorIs(t, err, client.ErrBrokerBusy, "%v", err)
	var de *client.DialError
	require.True(t, errors.As(err, &de), "%T %v", err, err)
	require.Contains(t, err.Error(), b.addr)

	// A Connect that is refused, then finds the place free, connects.
	c, _ := newClient(t, []string{b.addr}, nil)
	refusedBefore := b.srv.ConnStats().RefusedConnections
	done := make(chan error, 1)
	go func() { done <- c.Connect(waitCtx(t, 20*time.Second)) }()
	waitFor(t, func() bool { return b.srv.ConnStats().RefusedConnections >= refusedBefore+2 }, "the second client refused twice")
	select {
	case err := <-done:
		require.FailNow(t, "Connect returned while the broker was busy", "%v", err)
	default:
	}
	require.NoError(t, holder.Close())
	require.NoError(t, <-done)
	_, err = c.Publish(ctxT(t), topic, []byte("x"), acked)
	require.NoError(t, err)
}
