package engine

import (
	"sort"
	"strconv"

	"github.com/flxproto/felix"
)

// Commit-state defaults (StateConfig fields left zero take these).
const (
	// DefaultMaxStateEntries bounds the state keys of one shard.
	DefaultMaxStateEntries = 100_000
	// DefaultMaxStateBytes bounds the state of one shard (keys plus values).
	DefaultMaxStateBytes = 64 << 20
	// DefaultMaxTenantStateEntries and DefaultMaxTenantStateBytes bound
	// the commit state of all of one tenant's shards.
	DefaultMaxTenantStateEntries = 1_000_000
	DefaultMaxTenantStateBytes   = 256 << 20
	// DefaultMaxTotalStateEntries and DefaultMaxTotalStateBytes bound the
	// commit state of every shard: at these a tenant over its share (the
	// bound divided by the tenants holding state) is refused, one within
	// it is not.
	DefaultMaxTotalStateEntries = 4_000_000
	DefaultMaxTotalStateBytes   = 1 << 30
	// MaxCommitChanges bounds the state operations of one commit.
	MaxCommitChanges = 1000
	// MaxStateKey bounds a state key.
	MaxStateKey = 1024
)

// StateConfig bounds the commit state: per shard, per tenant and
// engine-wide, in keys and in bytes of entity keys, keys and values. A
// commit that would exceed a bound is refused with limit_exceeded naming
// it, and nothing is written. Zero fields take the defaults.
type StateConfig struct {
	MaxEntries int   // per shard
	MaxBytes   int64 // per shard
	// MaxTenantEntries and MaxTenantBytes bound one tenant's state.
	MaxTenantEntries int
	MaxTenantBytes   int64
	// MaxTotalEntries and MaxTotalBytes bound every tenant's state
	// together, by fair share (see budget).
	MaxTotalEntries int
	MaxTotalBytes   int64
}

func (c StateConfig) withDefaults() StateConfig {
	if c.MaxEntries <= 0 {
		c.MaxEntries = DefaultMaxStateEntries
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxStateBytes
	}
	if c.MaxTenantEntries <= 0 {
		c.MaxTenantEntries = DefaultMaxTenantStateEntries
	}
	if c.MaxTenantBytes <= 0 {
		c.MaxTenantBytes = DefaultMaxTenantStateBytes
	}
	if c.MaxTotalEntries <= 0 {
		c.MaxTotalEntries = DefaultMaxTotalStateEntries
	}
	if c.MaxTotalBytes <= 0 {
		c.MaxTotalBytes = DefaultMaxTotalStateBytes
	}
	return c
}

type stateKey struct{ entity, key string }

type stateEntry struct {
	value   []byte
	version uint64
}

// shardState is the commit state of one shard (guarded by shard.mu).
type shardState struct {
	m       map[stateKey]stateEntry
	peak    int // most keys m held since it was last rebuilt
	bytes   int64
	asOf    uint64 // offset of the last commit applied
	applied bool
}

// CommitRequest is an atomic commit: one event appended to the shard the
// entity key routes to, together with state changes under that entity.
type CommitRequest struct {
	Topic
	EntityKey []byte
	Event     []byte
	Changes   []felix.StateChange
	// HasExpected makes the commit conditional on the shard's tail.
	HasExpected    bool
	ExpectedOffset uint64
	Publisher      string
}

// Commit appends the event and applies the changes atomically: either both
// happen (the event's offset is the version of every key written) or
// neither. A stale expected offset is a *Refusal (offset_mismatch naming the
// tail). Commits need a durable stream.
func (e *Engine) Commit(req CommitRequest) (PublishResult, error) {
	s, err := e.stream(req.Topic)
	if err != nil {
		return PublishResult{}, err
	}
	if !s.cfg.Durable {
		return PublishResult{}, errorf(felix.CodeInvalidRequest, "commits need a durable stream")
	}
	if len(req.Changes) > MaxCommitChanges {
		return PublishResult{}, errorf(felix.CodeLimitExceeded, "more than "+strconv.Itoa(MaxCommitChanges)+" state changes in one commit")
	}
	for i, c := range req.Changes {
		if c.Key == "" || len(c.Key) > MaxStateKey {
			return PublishResult{}, errorf(felix.CodeInvalidRequest, "change "+strconv.Itoa(i)+": state key must be 1.."+strconv.Itoa(MaxStateKey)+" bytes")
		}
	}
	entity := string(req.EntityKey)
	changes := make([]felix.StateChange, len(req.Changes))
	for i, c := range req.Changes {
		changes[i] = felix.StateChange{Op: c.Op, Key: c.Key, Value: append([]byte(nil), c.Value...)}
	}
	idx := s.cfg.Routing.Shard(req.EntityKey, uint32(len(s.shards)))
	return s.shards[idx].publish(PublishRequest{
		Topic: req.Topic, Payloads: [][]byte{req.Event}, Keyed: true, Key: req.EntityKey, Publisher: req.Publisher,
		HasExpected: req.HasExpected, ExpectedOffset: req.ExpectedOffset,
		commit: func(sh *shard, off uint64) error { return sh.applyLocked(entity, changes, off) },
	})
}

// applyLocked checks the bounds, then applies changes at offset off (the
// last change of a key decides its value).
func (sh *shard) applyLocked(entity string, changes []felix.StateChange, off uint64) error {
	if sh.state == nil {
		sh.state = &shardState{m: make(map[stateKey]stateEntry)}
	}
	st, cfg := sh.state, sh.st.e.cfg.State
	final := make(map[string]felix.StateChange, len(changes))
	for _, c := range changes {
		final[c.Key] = c
	}
	entries, bytes := len(st.m), st.bytes
	for k, c := range final {
		if old, had := st.m[stateKey{entity, k}]; had {
			entries--
			bytes -= int64(len(entity) + len(k) + len(old.value))
		}
		if c.Op == felix.StatePut {
			entries++
			bytes += int64(len(entity) + len(k) + len(c.Value))
		}
	}
	if entries > cfg.MaxEntries {
		return errorf(felix.CodeLimitExceeded, "commit state entries: this shard's limit of "+strconv.Itoa(cfg.MaxEntries)+" is reached")
	}
	if bytes > cfg.MaxBytes {
		return errorf(felix.CodeLimitExceeded, "commit state bytes: this shard's limit of "+strconv.FormatInt(cfg.MaxBytes, 10)+" is reached")
	}
	e, tenant := sh.st.e, sh.st.topic.Tenant
	dEntries, dBytes := int64(entries-len(st.m)), bytes-st.bytes
	if err := e.stateEntries.take(tenant, dEntries); err != nil {
		return err
	}
	if err := e.stateBytes.take(tenant, dBytes); err != nil {
		e.stateEntries.give(tenant, dEntries)
		return err
	}
	for k, c := range final {
		if c.Op == felix.StatePut {
			st.m[stateKey{entity, k}] = stateEntry{value: c.Value, version: off}
		} else {
			delete(st.m, stateKey{entity, k})
		}
	}
	st.m = shrunk(st.m, &st.peak)
	st.bytes, st.asOf, st.applied = bytes, off, true
	return nil
}

// StateValue is a state_get answer.
type StateValue struct {
	// Value is the key's value; Found is false for a key never written or
	// deleted.
	Value []byte
	Found bool
	// Version is the offset of the commit that wrote Value (when Found).
	Version uint64
	// AsOf is the offset of the last commit on the shard; HasAsOf is false
	// before the first one.
	AsOf    uint64
	HasAsOf bool
}

// StateGet reads a state key under the entity key (on the shard the entity
// key routes to).
func (e *Engine) StateGet(t Topic, entityKey []byte, key string) (StateValue, error) {
	s, err := e.stream(t)
	if err != nil {
		return StateValue{}, err
	}
	sh := s.shards[s.cfg.Routing.Shard(entityKey, uint32(len(s.shards)))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var v StateValue
	if sh.state == nil {
		return v, nil
	}
	v.AsOf, v.HasAsOf = sh.state.asOf, sh.state.applied
	if ent, ok := sh.state.m[stateKey{string(entityKey), key}]; ok {
		v.Value, v.Found, v.Version = ent.value, true, ent.version
	}
	return v, nil
}

// PublishIf appends payloads only when the shard's tail is expected
// (publish_if); otherwise a *Refusal offset_mismatch names the tail and
// nothing is written. It needs a durable stream and at least one payload.
func (e *Engine) PublishIf(req PublishRequest, expected uint64) (PublishResult, error) {
	s, err := e.stream(req.Topic)
	if err != nil {
		return PublishResult{}, err
	}
	if !s.cfg.Durable {
		return PublishResult{}, errorf(felix.CodeInvalidRequest, "publish_if needs a durable stream")
	}
	if len(req.Payloads) == 0 {
		return PublishResult{}, errorf(felix.CodeInvalidRequest, "publish_if with no payloads")
	}
	req.Idempotent = false
	req.HasExpected, req.ExpectedOffset = true, expected
	return e.Publish(req)
}

func offsetMismatch(expected, tail uint64) *Refusal {
	return &Refusal{Reason: RefusedOffsetMismatch, Tail: tail,
		Message: "expected offset " + strconv.FormatUint(expected, 10) + " but the shard's next offset is " + strconv.FormatUint(tail, 10)}
}

// OffsetForTime returns the offset of the first retained record of the
// shard appended at or after atMicros; ok is false when there is none.
// Append times are the engine clock's and assumed not to go backwards.
// Ephemeral streams keep no records: invalid_request.
func (e *Engine) OffsetForTime(t Topic, shardIdx uint32, atMicros uint64) (uint64, bool, error) {
	sh, err := e.shard(t, shardIdx)
	if err != nil {
		return 0, false, err
	}
	if !sh.st.cfg.Durable {
		return 0, false, errorf(felix.CodeInvalidRequest, "stream has no history (ephemeral)")
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	live := sh.recs[sh.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].seg.ts >= atMicros })
	if i == len(live) {
		return 0, false, nil
	}
	return sh.base + uint64(i), true, nil
}

// shrunk returns m, or a copy of it once it holds a quarter of the keys it
// once did (Go maps keep their buckets when keys are deleted), so the
// memory of deleted keys is returned. peak tracks the most keys since the
// last copy.
func shrunk[K comparable, V any](m map[K]V, peak *int) map[K]V {
	*peak = max(*peak, len(m))
	if *peak < 1024 || len(m) > *peak/4 {
		return m
	}
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	*peak = len(m)
	return c
}
