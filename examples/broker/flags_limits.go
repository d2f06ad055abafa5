package main

import (
	"flag"

	"github.com/flxproto/felix/examples/broker/server"
)

// authFlags registers the auth throttle flags (docs/limits.md).
func authFlags(fs *flag.FlagSet) *server.AuthLimits {
	l := new(server.AuthLimits)
	fs.IntVar(&l.AddrBurst, "auth-fail-burst", server.DefaultAuthAddrBurst, "failed auths a source address may make before it is throttled")
	fs.Float64Var(&l.AddrRate, "auth-fail-rate", server.DefaultAuthAddrRate, "failed auths per second a throttled source address is allowed")
	fs.IntVar(&l.ConnBurst, "auth-conn-fail-burst", server.DefaultAuthConnBurst, "failed auths one connection may make before it is throttled")
	fs.Float64Var(&l.ConnRate, "auth-conn-fail-rate", server.DefaultAuthConnRate, "failed auths per second a throttled connection is allowed")
	fs.DurationVar(&l.MaxWait, "auth-max-wait", server.DefaultAuthMaxWait, "longest an auth is held back by the throttle; beyond it the auth is refused (overloaded, retry_after)")
	return l
}
