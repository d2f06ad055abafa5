package main

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// The budget flags reach the server's and conn's configurations, and a 0
// (which the code would replace by the default) is refused.
func TestBudgetFlags(t *testing.T) {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	b := registerBudgetFlags(fs)
	require.NoError(t, fs.Parse([]string{"-max-answer-bytes", "1000", "-max-tenant-answer-bytes", "-1",
		"-max-handshakes-per-addr", "32", "-max-tenant-sub-bytes", "2000", "-max-sub-bytes", "3000",
		"-tenant-delivery-workers", "3", "-delivery-workers", "5"}))
	var cfg server.Config
	cfg.ConnLimits = func(c *conn.ServerConfig) { c.MaxConnections = 7 }
	require.NoError(t, b.apply(&cfg))
	var sc conn.ServerConfig
	cfg.ConnLimits(&sc)
	require.Equal(t, 7, sc.MaxConnections, "the other flags' limits are kept")
	require.EqualValues(t, 1000, sc.MaxAnswerBytes)
	require.EqualValues(t, -1, sc.MaxTenantAnswerBytes)
	require.Equal(t, 32, sc.MaxHandshakesPerAddr)
	require.EqualValues(t, 2000, cfg.MaxTenantSubscriptionBytes)
	require.EqualValues(t, 3000, cfg.MaxSubscriptionBytes)
	require.Equal(t, 3, cfg.TenantDeliveryWorkers)
	require.Equal(t, 5, cfg.DeliveryWorkers)

	for _, f := range []string{"-max-answer-bytes", "-max-tenant-answer-bytes", "-max-handshakes-per-addr", "-max-tenant-sub-bytes", "-max-sub-bytes"} {
		err := run([]string{"-addr", "127.0.0.1:0", f, "0"})
		require.ErrorContains(t, err, f, f)
	}
	for _, args := range [][]string{{"-tenant-delivery-workers", "0"}, {"-delivery-workers", "0"},
		{"-tenant-delivery-workers", "9", "-delivery-workers", "8"}} {
		err := run(append([]string{"-addr", "127.0.0.1:0"}, args...))
		require.ErrorContains(t, err, "-delivery-workers", args)
	}
}
