package client

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
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
	// ErrBadName: a Topic or CacheRef names a tenant, namespace, stream
	// or cache that no frame can carry: longer than MaxNameBytes, or not
	// valid UTF-8 (docs/limits.md, "Names").
	ErrBadName = errors.New("client: name not allowed by the protocol")
	// ErrUnknownCache: the broker reports 0 shards for the cache (it does
	// not exist), so a sharded watch refuses it.
	ErrUnknownCache = errors.New("client: unknown cache (0 shards)")
)

// MaxNameBytes is the longest tenant, namespace, stream or cache name the
// protocol carries (the binary layouts store a name behind a 16-bit
// length). A broker may set a lower bound of its own (the reference
// broker's -max-name-bytes), which it answers invalid_request.
const MaxNameBytes = 1<<16 - 1

// NameError refuses a request whose Topic or CacheRef cannot be right,
// before anything is sent: a tenant other than the client's, an empty
// name, or a name the protocol cannot carry. errors.Is matches Kind
// (ErrTenantMismatch, ErrEmptyName or ErrBadName). Retrying cannot help.
type NameError struct {
	// Op is the operation refused ("publish", "subscribe", "cache_put", ...).
	Op string
	// Kind is ErrTenantMismatch, ErrEmptyName or ErrBadName.
	Kind error
	// Field names the name ErrBadName refuses ("stream name", ...).
	Field string
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
	if e.Kind == ErrBadName {
		v := map[string]string{"tenant": e.Tenant, "namespace": e.Namespace}[e.Field]
		if v == "" {
			v = e.Name
		}
		if !utf8.ValidString(v) {
			return fmt.Sprintf("client: %s: the %s is not valid UTF-8: names are UTF-8 text of 1 to %d bytes; nothing was sent", e.Op, e.Field, MaxNameBytes)
		}
		return fmt.Sprintf("client: %s: the %s is %d bytes long: names are UTF-8 text of 1 to %d bytes; nothing was sent", e.Op, e.Field, len(v), MaxNameBytes)
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
		what := "stream name"
		if cache {
			what = "cache name"
		}
		for _, f := range [...][2]string{{"tenant", tenant}, {"namespace", namespace}, {what, name}} {
			if len(f[1]) > MaxNameBytes || !utf8.ValidString(f[1]) {
				e.Kind, e.Field = ErrBadName, f[0]
				return e
			}
		}
		return nil
	}
	return e
}
