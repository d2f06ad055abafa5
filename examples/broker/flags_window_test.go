package main

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// -conn-recv-window reaches conn's configuration with the default unless
// set, and a 0 (which conn would replace by the default) is refused.
func TestWindowFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want uint64
	}{
		{nil, conn.DefaultMaxConnReceiveWindow},
		{[]string{"-conn-recv-window", "16777216"}, 16 << 20},
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
		require.Equal(t, tc.want, sc.MaxConnReceiveWindow)
	}
	err := run([]string{"-addr", "127.0.0.1:0", "-conn-recv-window", "0"})
	require.ErrorContains(t, err, "-conn-recv-window")
}
