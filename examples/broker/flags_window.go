package main

import (
	"errors"
	"flag"

	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// windowFlag holds -conn-recv-window, the QUIC receive window of an
// authenticated connection, and the per-tenant bounds on what a tenant's
// windows hold together, -max-tenant-conns and -max-tenant-window-growth
// (docs/limits.md §2).
type windowFlag struct {
	window       uint64
	tenantConns  int
	tenantGrowth int64
}

func registerWindowFlag(fs *flag.FlagSet) *windowFlag {
	w := new(windowFlag)
	fs.Uint64Var(&w.window, "conn-recv-window", conn.DefaultMaxConnReceiveWindow,
		"bytes a client may have sent on an authenticated connection that the broker has not read (the QUIC receive window, at most -conn-inflight-bytes): "+
			"caps what one connection pins in tiny QUIC frames (about 160 bytes per window byte) and one connection's upload at window ÷ RTT (1 MiB at 50 ms: about 20 MiB/s)")
	fs.IntVar(&w.tenantConns, "max-tenant-conns", conn.DefaultMaxTenantConns,
		"authenticated connections of one tenant (beyond: the connection's first auth is answered limit_exceeded, reason max_tenant_conns, retry_after); "+
			"with -max-tenant-window-growth it bounds what one tenant pins in tiny QUIC frames (negative: no cap)")
	fs.Int64Var(&w.tenantGrowth, "max-tenant-window-growth", conn.DefaultMaxTenantWindowGrowth,
		"bytes by which the receive windows of one tenant's connections may grow above their initial 96 KiB together, toward -conn-recv-window each "+
			"(beyond: the window stays as it is; the client is slowed by flow control, not refused; negative: no bound)")
	return w
}

// apply sets the window and the per-tenant bounds in cfg, refusing 0 (the
// server would replace it by its default).
func (w *windowFlag) apply(cfg *server.Config) error {
	if w.window == 0 {
		return errors.New("-conn-recv-window 0: want at least 1")
	}
	if w.tenantConns == 0 {
		return errors.New("-max-tenant-conns 0: want at least 1, or negative for no cap")
	}
	if w.tenantGrowth == 0 {
		return errors.New("-max-tenant-window-growth 0: want at least 1, or negative for no bound")
	}
	inner := cfg.ConnLimits
	cfg.ConnLimits = func(c *conn.ServerConfig) {
		if inner != nil {
			inner(c)
		}
		c.MaxConnReceiveWindow, c.MaxTenantConns, c.MaxTenantWindowGrowth = w.window, w.tenantConns, w.tenantGrowth
	}
	return nil
}
