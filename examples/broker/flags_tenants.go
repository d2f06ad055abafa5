package main

import (
	"flag"
	"time"

	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

// tenantFlags holds the per-tenant and engine-wide table bounds (commit
// state, consumer-group claims and groups) and the idle-pool setting
// (docs/limits.md §3.6 and §2).
type tenantFlags struct {
	stateEntries, totalStateEntries int
	stateBytes, totalStateBytes     int64
	claims, totalClaims             int
	groups, totalGroups             int
	connAuthTimeout                 time.Duration
}

func registerTenantFlags(fs *flag.FlagSet) *tenantFlags {
	l := new(tenantFlags)
	fs.IntVar(&l.stateEntries, "max-tenant-state-entries", engine.DefaultMaxTenantStateEntries, "commit state keys one tenant may hold (all its shards); commits beyond are refused limit_exceeded")
	fs.Int64Var(&l.stateBytes, "max-tenant-state-bytes", engine.DefaultMaxTenantStateBytes, "commit state bytes (entity keys, keys, values) one tenant may hold")
	fs.IntVar(&l.totalStateEntries, "max-state-entries", engine.DefaultMaxTotalStateEntries, "commit state keys of every tenant together: at this a tenant over its share (the bound over the tenants holding state) is refused")
	fs.Int64Var(&l.totalStateBytes, "max-state-bytes", engine.DefaultMaxTotalStateBytes, "commit state bytes of every tenant together, shared as -max-state-entries")
	fs.IntVar(&l.claims, "max-tenant-claims", engine.DefaultMaxTenantClaims, "consumer-group claimed, owed and dead-lettered records one tenant may hold; polls beyond hand out no fresh record")
	fs.IntVar(&l.totalClaims, "max-claims", engine.DefaultMaxTotalClaims, "consumer-group claims of every tenant together, shared as -max-state-entries")
	fs.IntVar(&l.groups, "max-tenant-groups", engine.DefaultMaxTenantGroups, "consumer groups one tenant may have (all its shards)")
	fs.IntVar(&l.totalGroups, "max-groups", engine.DefaultMaxTotalGroups, "consumer groups of every tenant together, shared as -max-state-entries")
	fs.DurationVar(&l.connAuthTimeout, "conn-auth-timeout", 0, "how long a connection may stay without an authenticated stream (0: the 10 s auth timeout; negative: no bound); raise it for older clients' idle connection pools")
	return l
}

// apply copies the flags into the broker configuration; non-positive
// table bounds take the defaults.
func (l *tenantFlags) apply(cfg *server.Config) {
	st, g := &cfg.Engine.State, &cfg.Engine.Groups
	st.MaxTenantEntries, st.MaxTenantBytes = l.stateEntries, l.stateBytes
	st.MaxTotalEntries, st.MaxTotalBytes = l.totalStateEntries, l.totalStateBytes
	g.MaxTenantClaims, g.MaxTotalClaims = l.claims, l.totalClaims
	g.MaxTenantGroups, g.MaxTotalGroups = l.groups, l.totalGroups
	if d := l.connAuthTimeout; d != 0 {
		prev := cfg.ConnLimits
		cfg.ConnLimits = func(c *conn.ServerConfig) {
			if prev != nil {
				prev(c)
			}
			c.ConnAuthTimeout = d
		}
	}
}
