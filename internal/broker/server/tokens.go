package server

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
)

// Perm is a set of permissions a token holds.
type Perm uint8

// Permissions. PermSubscribe covers every read of a stream (subscribe,
// stream_read); PermCacheRead covers cache_get, counter_get and
// cache_watch; PermCacheWrite every cache and counter write.
const (
	PermPublish Perm = 1 << iota
	PermSubscribe
	PermCacheRead
	PermCacheWrite

	// PermNodeView is node.view:cluster:*, the operator permission of
	// shard_inspect and subscriptions_list (docs/messages.md §4). It is
	// not a data permission: PermAll does not include it and a token holds
	// it only when granted explicitly (Identity.Grant; the token list's
	// "node.view" word).
	PermNodeView

	PermCache = PermCacheRead | PermCacheWrite
	PermAll   = PermPublish | PermSubscribe | PermCache
)

var permWords = map[string]Perm{
	"publish": PermPublish, "subscribe": PermSubscribe, "cache.read": PermCacheRead,
	"cache.write": PermCacheWrite, "cache": PermCache, "all": PermAll, "none": 0,
	"node.view": PermNodeView,
}

// String lists the permissions joined by '|' ("none" for the empty set).
func (p Perm) String() string {
	if p&(PermAll|PermNodeView) == 0 {
		return "none"
	}
	var out []string
	for _, w := range []string{"publish", "subscribe", "cache.read", "cache.write", "node.view"} {
		if p&permWords[w] != 0 {
			out = append(out, w)
		}
	}
	return strings.Join(out, "|")
}

// ParsePerm parses a '|'-separated list of permission words: publish,
// subscribe, cache.read, cache.write, cache (both cache words), all (the
// four data permissions), node.view (PermNodeView) and none.
func ParsePerm(s string) (Perm, error) {
	var p Perm
	for _, w := range strings.Split(s, "|") {
		v, ok := permWords[strings.TrimSpace(w)]
		if !ok {
			return 0, fmt.Errorf("unknown permission %q (want publish, subscribe, cache.read, cache.write, cache, all, node.view or none)", w)
		}
		p |= v
	}
	return p, nil
}

// Identity is who a token belongs to and what it may do.
type Identity struct {
	// Tenant is the only tenant the token may act for.
	Tenant string
	// Principal is the token's subject, sent as the event publisher.
	Principal string
	// Deny lists the permissions the token lacks; the zero value grants
	// every permission. A token with Deny = PermAll authenticates but may
	// neither publish, subscribe nor use caches (a fixture's
	// unauthorized_token): such requests are refused with forbidden.
	Deny Perm
	// Grant lists the permissions outside PermAll the token holds
	// (PermNodeView); the zero value grants none of them.
	Grant Perm
}

// Allows reports whether the identity holds every permission in p: the
// data permissions unless denied, PermNodeView only when granted.
func (id Identity) Allows(p Perm) bool {
	return id.Deny&p == 0 && p&PermNodeView&^id.Grant == 0
}

// ParseTokens parses a list of tenant:token[:principal[:perms]] entries
// separated by commas or newlines. The principal defaults to the tenant and
// the permissions (see ParsePerm) to all. Blank lines and lines starting
// with '#' are ignored. A token listed twice is an error, even with the same
// identity: one token must name one identity.
//
// Errors name the line (from 1) of the entry they refuse, never the token.
func ParseTokens(list string) (map[string]Identity, error) {
	out := make(map[string]Identity)
	for n, line := range strings.Split(list, "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "#") {
			continue
		}
		for _, item := range strings.Split(line, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			tok, id, err := parseTokenEntry(item)
			if err == nil {
				if _, dup := out[tok]; dup {
					err = fmt.Errorf("token entry for tenant %q: token listed twice", id.Tenant)
				}
			}
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			out[tok] = id
		}
	}
	return out, nil
}

// parseTokenEntry parses one entry. Errors never quote the token.
func parseTokenEntry(item string) (string, Identity, error) {
	parts := strings.Split(item, ":")
	if len(parts) < 2 || len(parts) > 4 || parts[0] == "" || parts[1] == "" {
		return "", Identity{}, fmt.Errorf("token entry with %d fields: want tenant:token[:principal[:perms]]", len(parts))
	}
	id := Identity{Tenant: parts[0], Principal: parts[0]}
	if len(parts) >= 3 && parts[2] != "" {
		id.Principal = parts[2]
	}
	if len(parts) == 4 {
		p, err := ParsePerm(parts[3])
		if err != nil {
			return "", Identity{}, fmt.Errorf("token entry for tenant %q: %w", id.Tenant, err)
		}
		id.Deny = PermAll &^ p
		id.Grant = p & PermNodeView
	}
	return parts[1], id, nil
}

// MaxTokensFileBytes bounds a tokens file (LoadTokens): a larger file is
// refused whole, never read in part.
const MaxTokensFileBytes = 16 << 20

// LoadTokens reads a token list (ParseTokens syntax, typically one entry
// per line) from a file, so that tokens need not appear on a command line
// where the process list shows them. A file over MaxTokensFileBytes is
// refused (a cut entry such as tenant:token:principal, its permissions
// lost, would otherwise load with every permission), and so is any
// malformed line, named by its number. A file that others than its owner
// may read (a mode with group or other bits, such as 0644) is refused, its
// mode named: the tokens are credentials.
func LoadTokens(path string) (map[string]Identity, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkPrivateFile(f, path); err != nil {
		return nil, err
	}
	var b strings.Builder
	n, err := io.Copy(&b, bufio.NewReader(io.LimitReader(f, MaxTokensFileBytes+1)))
	if err != nil {
		return nil, err
	}
	if n > MaxTokensFileBytes {
		return nil, fmt.Errorf("%s: tokens file over %d bytes: refused whole (split it or remove unused entries)", path, MaxTokensFileBytes)
	}
	toks, err := ParseTokens(b.String())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return toks, nil
}

// checkPrivateFile refuses f (opened from path) when its mode lets its
// group or others read or write it. Windows file modes say nothing of
// that: no check there.
func checkPrivateFile(f *os.File, path string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s: tokens file has mode %#o, readable or writable by others than its owner: refused (chmod 600 it)", path, perm)
	}
	return nil
}
