package conn

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/flxproto/felix"
)

// Commit validation errors (errors.Is-able; the error returned is a
// *CommitError naming the offending operation).
var (
	// ErrCommitEventCount: a commit carries exactly one publish or enqueue;
	// it had none or more than one (upstream: EventCount).
	ErrCommitEventCount = errors.New("conn: a commit needs exactly one publish or enqueue")
	// ErrCommitNotOnOwningShard: an operation names a stream other than the
	// commit's, so it cannot be on the shard the entity key routes to
	// (upstream: NotOnOwningShard).
	ErrCommitNotOnOwningShard = errors.New("conn: commit operation not on the entity's stream and shard")
	// ErrCommitInvalidOp: an operation cannot be sent as written (an empty
	// state key, an unknown kind).
	ErrCommitInvalidOp = errors.New("conn: invalid commit operation")
)

// CommitOpKind is what a commit operation does.
type CommitOpKind uint8

// Commit operation kinds.
const (
	// OpPublish appends the commit's event to the stream.
	OpPublish CommitOpKind = iota + 1
	// OpEnqueue appends the commit's event for the stream's consumer groups
	// (on the wire the same event as OpPublish).
	OpEnqueue
	// OpPut sets a state key under the entity.
	OpPut
	// OpDelete removes a state key under the entity.
	OpDelete
)

// String returns the kind's name.
func (k CommitOpKind) String() string {
	switch k {
	case OpPublish:
		return "publish"
	case OpEnqueue:
		return "enqueue"
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	}
	return "op(" + strconv.Itoa(int(k)) + ")"
}

// CommitOp is one operation of a commit. Build it with PublishEvent,
// EnqueueEvent, PutState or DeleteState.
type CommitOp struct {
	Kind CommitOpKind
	// Stream is the stream the operation is on; "" means the commit's own.
	Stream string
	// Key is the state key (OpPut, OpDelete).
	Key string
	// Value is the event (OpPublish, OpEnqueue) or the state value (OpPut).
	Value []byte
}

// PublishEvent is the commit's event, published to stream ("" = the
// commit's stream).
func PublishEvent(stream string, event []byte) CommitOp {
	return CommitOp{Kind: OpPublish, Stream: stream, Value: event}
}

// EnqueueEvent is the commit's event, enqueued for stream's consumer groups.
func EnqueueEvent(stream string, event []byte) CommitOp {
	return CommitOp{Kind: OpEnqueue, Stream: stream, Value: event}
}

// PutState sets state key to value under the commit's entity.
func PutState(stream, key string, value []byte) CommitOp {
	return CommitOp{Kind: OpPut, Stream: stream, Key: key, Value: value}
}

// DeleteState removes state key under the commit's entity.
func DeleteState(stream, key string) CommitOp {
	return CommitOp{Kind: OpDelete, Stream: stream, Key: key}
}

// CommitError is a commit refused by the client before anything was sent.
type CommitError struct {
	// Err is ErrCommitEventCount, ErrCommitNotOnOwningShard or
	// ErrCommitInvalidOp.
	Err error
	// Index is the offending operation's index in CommitRequest.Ops (-1
	// when the commit as a whole is at fault: no event at all).
	Index int
	// Op is the offending operation (zero when Index is -1).
	Op CommitOp
	// Stream is the commit's stream.
	Stream string
}

// Error names the offending operation.
func (e *CommitError) Error() string {
	if e.Index < 0 {
		return e.Err.Error() + " (the commit has no publish or enqueue)"
	}
	s := e.Err.Error() + ": operation " + strconv.Itoa(e.Index) + " (" + e.Op.Kind.String()
	if e.Op.Stream != "" {
		s += " on stream " + strconv.Quote(e.Op.Stream)
	}
	if e.Op.Key != "" {
		s += " key " + strconv.Quote(e.Op.Key)
	}
	return s + "; commit stream " + strconv.Quote(e.Stream) + ")"
}

// Unwrap returns the sentinel.
func (e *CommitError) Unwrap() error { return e.Err }

// CommitRequest is an atomic commit: exactly one event (a publish or an
// enqueue) and any number of state changes, all applied together on the
// stream and shard the entity key routes to, or none.
type CommitRequest struct {
	// Topic is the stream the entity lives on.
	Topic
	// EntityKey routes the commit to a shard (like a publish key) and
	// scopes its state keys.
	EntityKey []byte
	// Ops are the operations, in order; every one must be on Topic.Stream.
	Ops []CommitOp
	// ExpectedOffset, when set, makes the commit conditional: it is applied
	// only if the shard's next offset is this one, else refused with a
	// *PublishRefusedError (offset_mismatch; Tail names the shard's tail).
	// Needs felix.FeaturePublishConditional.
	ExpectedOffset felix.Opt[uint64]
}

// validate checks the commit as upstream's client does before sending:
// every operation on the commit's stream, exactly one event.
func (r *CommitRequest) validate() (event []byte, changes []felix.StateChange, err error) {
	events := 0
	for i, op := range r.Ops {
		if op.Stream != "" && op.Stream != r.Stream {
			return nil, nil, &CommitError{Err: ErrCommitNotOnOwningShard, Index: i, Op: op, Stream: r.Stream}
		}
		switch op.Kind {
		case OpPublish, OpEnqueue:
			events++
			if events > 1 {
				return nil, nil, &CommitError{Err: ErrCommitEventCount, Index: i, Op: op, Stream: r.Stream}
			}
			event = op.Value
		case OpPut:
			if op.Key == "" {
				return nil, nil, &CommitError{Err: ErrCommitInvalidOp, Index: i, Op: op, Stream: r.Stream}
			}
			changes = append(changes, felix.StateChange{Op: felix.StatePut, Key: op.Key, Value: op.Value})
		case OpDelete:
			if op.Key == "" {
				return nil, nil, &CommitError{Err: ErrCommitInvalidOp, Index: i, Op: op, Stream: r.Stream}
			}
			changes = append(changes, felix.StateChange{Op: felix.StateDelete, Key: op.Key})
		default:
			return nil, nil, &CommitError{Err: ErrCommitInvalidOp, Index: i, Op: op, Stream: r.Stream}
		}
	}
	if events == 0 {
		return nil, nil, &CommitError{Err: ErrCommitEventCount, Index: -1, Stream: r.Stream}
	}
	if event == nil {
		event = []byte{}
	}
	if changes == nil {
		changes = []felix.StateChange{}
	}
	return event, changes, nil
}

// Validate checks the commit as Commit does before sending anything: it
// returns a *CommitError (errors.Is ErrCommitEventCount,
// ErrCommitNotOnOwningShard or ErrCommitInvalidOp) naming the offending
// operation, or nil.
func (r *CommitRequest) Validate() error {
	_, _, err := r.validate()
	return err
}

// Commit validates req (a *CommitError, nothing sent, when it is not one
// event plus state changes on one stream) and sends it. It returns the
// offset of the event, which is also the version of every state key it
// wrote. Needs felix.FeatureAtomicCommit (ErrNotAdvertised, nothing sent).
// A stale ExpectedOffset is a *PublishRefusedError; a broker that does not
// lead the shard answers a *NotLeaderError.
func (c *Client) Commit(ctx context.Context, req CommitRequest) (offset uint64, err error) {
	event, changes, err := req.validate()
	if err != nil {
		return 0, err
	}
	if req.ExpectedOffset.Set && !c.caps.CanExpectedOffset() {
		return 0, notAdvertised("commit expected_offset (" + felix.FeaturePublishConditional.String() + ")")
	}
	m := &felix.Commit{TenantID: req.TenantID, Namespace: req.Namespace, Stream: req.Stream, EntityKey: req.EntityKey,
		Event: event, Changes: changes, RequestID: c.nextID(), ExpectedOffset: req.ExpectedOffset}
	if m.EntityKey == nil {
		m.EntityKey = []byte{}
	}
	ans, err := c.request(ctx, m)
	if err != nil {
		return 0, err
	}
	ok, err := answerAs[*felix.CommitOK](ans, m.RequestID)
	if err != nil {
		return 0, err
	}
	return ok.Offset, nil
}

// StateValue is a state key read with StateGet.
type StateValue struct {
	// Value is the key's value; Found is false for a key never written or
	// deleted (absent, not empty).
	Value []byte
	Found bool
	// Version is the offset of the commit that wrote Value, valid when
	// HasVersion.
	Version    uint64
	HasVersion bool
	// AsOf is the offset of the last commit the answer reflects, valid
	// when HasAsOf.
	AsOf    uint64
	HasAsOf bool
}

// StateGet reads state key under entityKey on stream t (from the shard the
// entity key routes to). Needs felix.FeatureAtomicCommit.
func (c *Client) StateGet(ctx context.Context, t Topic, entityKey []byte, key string) (StateValue, error) {
	m := &felix.StateGet{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, EntityKey: entityKey, Key: key,
		RequestID: c.nextID()}
	if m.EntityKey == nil {
		m.EntityKey = []byte{}
	}
	ans, err := c.request(ctx, m)
	if err != nil {
		return StateValue{}, err
	}
	sv, err := answerAs[*felix.StateValue](ans, m.RequestID)
	if err != nil {
		return StateValue{}, err
	}
	return StateValue{Value: sv.Value.V, Found: sv.Value.Set, Version: sv.Version.V, HasVersion: sv.Version.Set,
		AsOf: sv.AsOf.V, HasAsOf: sv.AsOf.Set}, nil
}

// PublishIf appends payloads (routed by key; nil = no key, shard 0) only if
// the shard's next offset is expected. It returns the offset of the first
// record (HasOffset when the client offered flag 0x1000). A stale
// expected offset is a *PublishRefusedError whose Tail names the shard's
// next offset; nothing was written. Needs felix.FeaturePublishConditional.
func (c *Client) PublishIf(ctx context.Context, t Topic, payloads [][]byte, key []byte, expected uint64) (PublishResult, error) {
	m := &felix.PublishIf{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, Payloads: payloads,
		ExpectedOffset: expected, RequestID: c.nextID()}
	if key != nil {
		m.Key = felix.Some(key)
	}
	ans, err := c.request(ctx, m)
	if err != nil {
		return PublishResult{}, err
	}
	return publishResultJSON(m.RequestID, ans)
}

// Tail returns the shard's next offset of an offset_mismatch refusal.
func (e *PublishRefusedError) Tail() (uint64, bool) {
	if e.Refusal == nil || e.Refusal.Reason.Kind != felix.RefusalOffsetMismatch {
		return 0, false
	}
	return e.Refusal.Reason.Tail, true
}

// CondResult is the answer to a conditional cache write.
type CondResult struct {
	// Applied says whether the write happened.
	Applied bool
	// Version is the version written (applied put) or the key's current
	// version (not applied), valid when HasVersion (false: no live entry).
	Version    uint64
	HasVersion bool
}

// CachePutIf writes key = value only if cond holds: felix.CondAbsent (no
// live entry) or felix.CondVersion (the entry's version is cond.Version).
// ttl 0 means no expiry. Needs felix.FeatureCacheConditional.
func (c *Client) CachePutIf(ctx context.Context, ref CacheRef, key string, value []byte, cond felix.CacheCondition, ttl time.Duration) (CondResult, error) {
	m := &felix.CachePutIf{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key, Value: value, Condition: cond}
	if ttl > 0 {
		m.TTLMs = felix.Some(durMs(ttl))
	}
	ans, err := c.cacheRequest(ctx, "cache_put_if", func(id uint64) felix.Message { m.RequestID = id; return m })
	if err != nil {
		return CondResult{}, err
	}
	return condResult(ans, m.RequestID)
}

// CacheDeleteIf removes key only if its version is version. Needs
// felix.FeatureCacheConditional.
func (c *Client) CacheDeleteIf(ctx context.Context, ref CacheRef, key string, version uint64) (CondResult, error) {
	m := &felix.CacheDeleteIf{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key, Version: version}
	ans, err := c.cacheRequest(ctx, "cache_delete_if", func(id uint64) felix.Message { m.RequestID = id; return m })
	if err != nil {
		return CondResult{}, err
	}
	return condResult(ans, m.RequestID)
}

func condResult(ans felix.Message, rid uint64) (CondResult, error) {
	r, err := answerAs[*felix.CacheConditionResult](ans, rid)
	if err != nil {
		return CondResult{}, err
	}
	return CondResult{Applied: r.Applied, Version: r.Version.V, HasVersion: r.Version.Set}, nil
}

// CacheItem is a cache value with its version.
type CacheItem struct {
	Value []byte
	Found bool
	// Version is the entry's version (for CachePutIf / CacheDeleteIf),
	// valid when HasVersion: the broker sends it on a hit to clients that
	// offered felix.FeatureCacheConditional.
	Version    uint64
	HasVersion bool
}

// CacheGetVersioned is CacheGet returning the entry's version too.
func (c *Client) CacheGetVersioned(ctx context.Context, ref CacheRef, key string) (CacheItem, error) {
	m := &felix.CacheGet{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: key}
	ans, err := c.cacheRequest(ctx, "cache_get", func(id uint64) felix.Message { m.RequestID = felix.Some(id); return m })
	if err != nil {
		return CacheItem{}, err
	}
	cv, err := answerAs[*felix.CacheValue](ans, m.RequestID.V)
	if err != nil {
		return CacheItem{}, err
	}
	return CacheItem{Value: cv.Value.V, Found: cv.Value.Set, Version: cv.Version.V, HasVersion: cv.Version.Set}, nil
}
