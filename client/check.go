package client

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of requests refused by the client before sending
// (matched through a *NameError).
var (
	// ErrTenantMismatch: a Topic or CacheRef names a tenant other than the
	// client's (Config.TenantID). A connection acts for the tenant it
	// authenticated as; a broker would refuse the request (forbidden).
	ErrTenantMismatch = errors.New("client: tenant mismatch")
	// ErrEmptyName: a Topic or CacheRef leaves its tenant, namespace or
	// stream / cache name empty (a zero Topic{}, typically).
	ErrEmptyName = errors.New("client: empty name")
	// ErrUnknownCache: the broker reports 0 shards for the cache (it does
	// not exist), so a sharded watch refuses it.
	ErrUnknownCache = errors.New("client: unknown cache (0 shards)")
)

// NameError refuses a request whose Topic or CacheRef cannot be right,
// before anything is sent: a tenant other than the client's, or an empty
// name. errors.Is matches Kind (ErrTenantMismatch or ErrEmptyName).
// Retrying cannot help.
type NameError struct {
	// Op is the operation refused ("publish", "subscribe", "cache_put", ...).
	Op string
	// Kind is ErrTenantMismatch or ErrEmptyName.
	Kind error
	// Tenant, Namespace and Name are the request's names (Name is the
	// stream or cache).
	Tenant, Namespace, Name string
	// ClientTenant is the tenant the client authenticates as.
	ClientTenant string
	// cache: Name is a cache (else a stream).
	cache bool
}

// Error names both tenants (or the empty field) and what to do.
func (e *NameError) Error() string {
	what := "stream"
	if e.cache {
		what = "cache"
	}
	if e.Kind == ErrTenantMismatch {
		return fmt.Sprintf("client: %s: the %s %s/%s is in tenant %q, but this client authenticates as tenant %q: a connection acts for one tenant (set TenantID to %q, or use a client configured for %q); nothing was sent",
			e.Op, what, e.Namespace, e.Name, e.Tenant, e.ClientTenant, e.ClientTenant, e.Tenant)
	}
	var empty []string
	if e.Tenant == "" {
		empty = append(empty, "TenantID")
	}
	if e.Namespace == "" {
		empty = append(empty, "Namespace")
	}
	if e.Name == "" {
		if e.cache {
			empty = append(empty, "Cache")
		} else {
			empty = append(empty, "Stream")
		}
	}
	return fmt.Sprintf("client: %s: empty %s name (tenant %q, namespace %q, %s %q): set %s; nothing was sent",
		e.Op, what, e.Tenant, e.Namespace, what, e.Name, strings.Join(empty, ", "))
}

// Is matches Kind.
func (e *NameError) Is(target error) bool { return target == e.Kind }

// checkTopic refuses a topic with an empty name or another tenant.
func (c *Client) checkTopic(op string, t Topic) error {
	return c.checkNames(op, t.TenantID, t.Namespace, t.Stream, false)
}

// checkCache refuses a cache reference with an empty name or another
// tenant.
func (c *Client) checkCache(op string, r CacheRef) error {
	return c.checkNames(op, r.TenantID, r.Namespace, r.Cache, true)
}

func (c *Client) checkNames(op, tenant, namespace, name string, cache bool) error {
	e := &NameError{Op: op, Tenant: tenant, Namespace: namespace, Name: name, ClientTenant: c.cfg.Conn.TenantID, cache: cache}
	switch {
	case tenant == "" || namespace == "" || name == "":
		e.Kind = ErrEmptyName
	case c.cfg.Conn.TenantID != "" && tenant != c.cfg.Conn.TenantID:
		e.Kind = ErrTenantMismatch
	default:
		return nil
	}
	return e
}
