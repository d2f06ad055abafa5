package engine

import (
	"strconv"

	"github.com/flxproto/felix"
)

// DefaultMaxNameBytes bounds every name a client chooses (tenant,
// namespace, stream, cache, cache key, watch prefix): what the binary
// layouts can carry (a 16-bit length), so that a name accepted over JSON
// can also be sent in a binary frame. Config.MaxNameBytes lowers it.
const DefaultMaxNameBytes = 1<<16 - 1

// maxName is the name bound in force.
func (e *Engine) maxName() int {
	if n := e.cfg.MaxNameBytes; n > 0 && n < DefaultMaxNameBytes {
		return n
	}
	return DefaultMaxNameBytes
}

// checkName refuses a name over the bound (invalid_request, fatal), before
// anything is looked up or created.
func (e *Engine) checkName(what, name string) error {
	if limit := e.maxName(); len(name) > limit {
		return &Error{Code: felix.CodeInvalidRequest, Retry: felix.RetryFatal,
			Message: what + " of " + strconv.Itoa(len(name)) + " bytes is over the name limit of " + strconv.Itoa(limit) + " bytes"}
	}
	return nil
}

// CheckTopic refuses a stream whose names are over the name bound
// (invalid_request), as every request naming it is refused.
func (e *Engine) CheckTopic(t Topic) error { return e.checkTopic(t) }

// CheckCache refuses a cache whose names, or a key or prefix in it, are
// over the name bound (invalid_request).
func (e *Engine) CheckCache(r CacheRef, key string) error { return e.checkCache(r, key) }

// checkTopic checks a stream's names.
func (e *Engine) checkTopic(t Topic) error {
	if err := e.checkName("tenant", t.Tenant); err != nil {
		return err
	}
	if err := e.checkName("namespace", t.Namespace); err != nil {
		return err
	}
	return e.checkName("stream name", t.Stream)
}

// checkCache checks a cache's names and a key (or prefix) in it.
func (e *Engine) checkCache(r CacheRef, key string) error {
	if err := e.checkName("tenant", r.Tenant); err != nil {
		return err
	}
	if err := e.checkName("namespace", r.Namespace); err != nil {
		return err
	}
	if err := e.checkName("cache name", r.Cache); err != nil {
		return err
	}
	return e.checkName("key", key)
}
