package main

import (
	"flag"
	"io"
	"testing"

	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// The bounds of issue 22 reach the broker's configuration from their
// flags, take the documented defaults without them, and a name bound
// beyond what the binary layouts carry is refused.
func TestBoundFlagsReachTheConfig(t *testing.T) {
	parse := func(args ...string) (server.Config, error) {
		fs := flag.NewFlagSet("broker", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		auth := authFlags(fs)
		lims := registerLimitFlags(fs)
		require.NoError(t, fs.Parse(args))
		cfg := server.Config{AuthLimits: *auth}
		return cfg, lims.apply(&cfg)
	}
	cfg, err := parse()
	require.NoError(t, err)
	e := cfg.Engine
	require.Equal(t, engine.DefaultMaxTenantCacheBytes, int(e.MaxTenantCacheBytes))
	require.Equal(t, engine.DefaultMaxTotalCacheBytes, int(e.MaxTotalCacheBytes))
	require.Equal(t, engine.DefaultMaxTotalCacheLogBytes, int(e.MaxTotalCacheLogBytes))
	require.Equal(t, engine.DefaultMaxNameBytes, e.MaxNameBytes)
	require.Equal(t, engine.DefaultMaxProducersPerTenant, e.MaxProducersPerTenant)
	require.Equal(t, server.DefaultAuthGlobalBurst, cfg.AuthLimits.GlobalBurst)
	require.Equal(t, server.DefaultAuthGlobalRate, cfg.AuthLimits.GlobalRate)
	require.Equal(t, server.DefaultAuthMaxAddrs, cfg.AuthLimits.MaxAddrs)

	cfg, err = parse("-max-tenant-cache-bytes", "11", "-max-total-cache-bytes", "12", "-max-total-cache-log-bytes", "13",
		"-max-name-bytes", "14", "-max-producers-per-tenant", "15", "-auth-global-fail-burst", "16",
		"-auth-global-fail-rate", "17", "-auth-max-addrs", "18")
	require.NoError(t, err)
	e = cfg.Engine
	require.Equal(t, []int64{11, 12, 13}, []int64{e.MaxTenantCacheBytes, e.MaxTotalCacheBytes, e.MaxTotalCacheLogBytes})
	require.Equal(t, []int{14, 15, 16, 18}, []int{e.MaxNameBytes, e.MaxProducersPerTenant, cfg.AuthLimits.GlobalBurst, cfg.AuthLimits.MaxAddrs})
	require.Equal(t, 17.0, cfg.AuthLimits.GlobalRate)

	for _, bad := range [][]string{{"-max-name-bytes", "65536"}, {"-max-name-bytes", "0"}, {"-max-producers-per-tenant", "0"}} {
		_, err := parse(bad...)
		require.ErrorContains(t, err, bad[0], bad)
	}
}
