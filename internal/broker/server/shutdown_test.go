package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"testing"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// Graceful shutdown: the broker finishes every event stream, then closes
// the connection with application code 0, and nothing leaks. A reader
// blocked in Next normally reads the end of its stream (io.EOF); QUIC gives
// no acknowledgement the broker could wait for, so if the close overtakes
// the FIN the reader gets ErrBrokerShutdown instead. A subscriber that was
// not reading when the connection closed always gets ErrBrokerShutdown
// (the connection close discards what was not read).
func TestGracefulShutdown(t *testing.T) {
	cfg := durableCfg()
	cfg.Addr = "127.0.0.1:0"
	srv, err := server.Listen(cfg)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	ctx := ctxT(t)
	c, err := conn.Dial(ctx, srv.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: srv.CertPool()},
		TenantID: server.DemoTenant, Token: server.DemoToken})
	require.NoError(t, err)
	defer c.Close()
	sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	idle, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	_, err = c.Publish(ctx, topic, []byte("before"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "before", string(ev.Payload))

	end := make(chan error, 1)
	go func() {
		_, err := sub.Next(ctx)
		end <- err
	}()
	require.NoError(t, srv.Shutdown(ctx))
	require.NoError(t, <-done)
	<-c.Context().Done()
	var ae *quic.ApplicationError
	require.True(t, errors.As(context.Cause(c.Context()), &ae), "%v", context.Cause(c.Context()))
	require.Equal(t, quic.ApplicationErrorCode(0), ae.ErrorCode)
	require.Equal(t, "broker shutting down", ae.ErrorMessage)

	if err := <-end; err != io.EOF {
		require.ErrorIs(t, err, conn.ErrBrokerShutdown, "the blocked reader ends with a clean end or a broker shutdown")
	}
	_, err = idle.Next(ctx)
	require.ErrorIs(t, err, conn.ErrBrokerShutdown)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, conn.CloseShuttingDown, ae.ErrorCode)
}

func TestSubscribeErrors(t *testing.T) {
	cfg := durableCfg()
	cfg.Engine.DefaultStream.RetainRecords = 5
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	c := dial(t, srv, nil)
	for range 10 {
		_, err := c.Publish(ctx, topic, []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	_, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartAt(2)})
	var ce *felix.CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, felix.CursorError{Reason: "too_old", Requested: 2, Available: 5}, *ce)
	_, err = c.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartAt(11)})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, felix.CursorError{Reason: "in_future", Requested: 11, Available: 10}, *ce)
	sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer sub.Close()
	require.Equal(t, uint64(5), sub.Info().StartOffset.V)
	require.Equal(t, uint64(10), sub.Info().LiveOffset.V)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(5), ev.Offset)

	strict := startBroker(t, server.Config{Engine: engineStrict()})
	sc := dial(t, strict, nil)
	_, err = sc.Subscribe(ctx, topic, conn.SubscribeOptions{})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotFound, be.Code)
	// A broker that creates nothing on first use: asking again cannot
	// succeed, and the answer's class says so (the client acts on it).
	require.Equal(t, felix.RetryFatal, be.Retry)
	require.Contains(t, be.Message, "serves declared streams only")
	nc := dial(t, strict, func(c *conn.Config) { c.NoFeatures = true })
	_, _, err = api.New(nc).CacheGet(ctx, cref, "k")
	require.ErrorAs(t, err, &be)
	require.Empty(t, be.Code, "no code for a client without ERROR_CODES")
	require.Contains(t, be.Message, "cache scope not found")
}
