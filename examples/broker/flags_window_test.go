package main

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// -conn-recv-window, -max-tenant-conns and -max-tenant-window-growth reach
// conn's configuration with their defaults unless set, and a 0 (which conn
// would replace by the default) is refused.
func TestWindowFlag(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		window uint64
		conns  int
		growth int64
	}{
		{nil, conn.DefaultMaxConnReceiveWindow, conn.DefaultMaxTenantConns, conn.DefaultMaxTenantWindowGrowth},
		{[]string{"-conn-recv-window", "16777216", "-max-tenant-conns", "5", "-max-tenant-window-growth", "-1"}, 16 << 20, 5, -1},
	} {
		fs := flag.NewFlagSet("broker", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		w := registerWindowFlag(fs)
		require.NoError(t, fs.Parse(tc.args))
		var cfg server.Config
		cfg.ConnLimits = func(c *conn.ServerConfig) { c.MaxConnections = 7 }
		require.NoError(t, w.apply(&cfg))
		var sc conn.ServerConfig
		cfg.ConnLimits(&sc)
		require.Equal(t, 7, sc.MaxConnections, "the other flags' limits are kept")
		require.Equal(t, tc.window, sc.MaxConnReceiveWindow)
		require.Equal(t, tc.conns, sc.MaxTenantConns)
		require.Equal(t, tc.growth, sc.MaxTenantWindowGrowth)
	}
	for _, f := range []string{"-conn-recv-window", "-max-tenant-conns", "-max-tenant-window-growth"} {
		err := run([]string{"-addr", "127.0.0.1:0", f, "0"})
		require.ErrorContains(t, err, f, f)
	}
}
