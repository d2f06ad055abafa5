package main

import (
	"errors"
	"flag"

	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// windowFlag holds -conn-recv-window, the QUIC receive window of an
// authenticated connection (docs/limits.md §2).
type windowFlag struct{ window uint64 }

func registerWindowFlag(fs *flag.FlagSet) *windowFlag {
	w := new(windowFlag)
	fs.Uint64Var(&w.window, "conn-recv-window", conn.DefaultMaxConnReceiveWindow,
		"bytes a client may have sent on an authenticated connection that the broker has not read (the QUIC receive window, at most -conn-inflight-bytes): "+
			"caps what one connection pins in tiny QUIC frames (about 160 bytes per window byte) and one connection's upload at window ÷ RTT (1 MiB at 50 ms: about 20 MiB/s)")
	return w
}

// apply sets the window in cfg, refusing 0 (the server would replace it
// by its default).
func (w *windowFlag) apply(cfg *server.Config) error {
	if w.window == 0 {
		return errors.New("-conn-recv-window 0: want at least 1")
	}
	inner := cfg.ConnLimits
	cfg.ConnLimits = func(c *conn.ServerConfig) {
		if inner != nil {
			inner(c)
		}
		c.MaxConnReceiveWindow = w.window
	}
	return nil
}
