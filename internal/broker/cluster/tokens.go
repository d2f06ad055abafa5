package cluster

import (
	"crypto/rand"
	"errors"
	"maps"
	"slices"

	"github.com/flxproto/felix/internal/broker/server"
)

// chooseTokens fills in the fixture's Token and UnauthorizedToken: the
// built-in defaults when the operator gave no tokens, else one of the
// operator's entries for the fixture's tenant with the right permissions
// or a fresh random token (nothing the operator did not configure, or
// cannot read from the fixture file, authenticates).
func (cfg *Config) chooseTokens() error {
	if cfg.Tokens == nil {
		if cfg.Token == "" {
			cfg.Token = DefaultToken
		}
		if cfg.UnauthorizedToken == "" {
			cfg.UnauthorizedToken = DefaultUnauthorizedToken
		}
	} else {
		if cfg.Token == "" {
			cfg.Token = cfg.operatorToken(func(id server.Identity) bool { return id.Deny == 0 })
		}
		if cfg.UnauthorizedToken == "" {
			cfg.UnauthorizedToken = cfg.operatorToken(func(id server.Identity) bool { return id.Deny&server.PermAll == server.PermAll })
		}
	}
	if cfg.Token == cfg.UnauthorizedToken {
		return errors.New("cluster: the fixture's token and unauthorized token are the same")
	}
	return nil
}

// operatorToken returns the first (in byte order) of the operator's tokens
// for the fixture's tenant whose identity fits and that grants nothing
// outside the data permissions, or a fresh random token.
func (cfg *Config) operatorToken(fits func(server.Identity) bool) string {
	for _, tok := range slices.Sorted(maps.Keys(cfg.Tokens)) {
		if id := cfg.Tokens[tok]; id.Tenant == cfg.Tenant && id.Grant == 0 && fits(id) {
			return tok
		}
	}
	return rand.Text()
}

// nodeTokens returns the tokens every node accepts: the fixture's two, the
// inspection token when the operator gave no tokens, and the operator's
// (whose entries win).
func (cfg *Config) nodeTokens() map[string]server.Identity {
	toks := map[string]server.Identity{
		cfg.Token:             {Tenant: cfg.Tenant, Principal: cfg.Tenant},
		cfg.UnauthorizedToken: {Tenant: cfg.Tenant, Principal: "unauthorized", Deny: server.PermAll},
	}
	if cfg.Tokens == nil {
		toks[InspectToken] = server.Identity{Tenant: cfg.Tenant, Principal: "operator", Deny: server.PermAll, Grant: server.PermNodeView}
	}
	maps.Copy(toks, cfg.Tokens)
	return toks
}

// ControlToken returns the bearer token of the control endpoint, random
// for each cluster: every request to it must carry
// "Authorization: Bearer " + ControlToken(). The fixture description
// (Fixture, WriteFixture) names it as control_token once ServeControl
// runs; nothing logs it.
func (c *Cluster) ControlToken() string { return c.ctlToken }
