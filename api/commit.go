package api

import (
	"context"
	"errors"
	"strconv"

	"github.com/flxproto/felix"
)

// Commit validation errors (errors.Is-able; the error returned is a
// *CommitError naming the offending operation).
var (
	// ErrCommitEventCount: a commit carries exactly one publish or enqueue;
	// it had none or more than one (upstream: EventCount).
	ErrCommitEventCount = errors.New("api: a commit needs exactly one publish or enqueue")
	// ErrCommitNotOnOwningShard: an operation names a stream other than the
	// commit's, so it cannot be on the shard the entity key routes to
	// (upstream: NotOnOwningShard).
	ErrCommitNotOnOwningShard = errors.New("api: commit operation not on the entity's stream and shard")
	// ErrCommitInvalidOp: an operation cannot be sent as written (an empty
	// state key, an unknown kind).
	ErrCommitInvalidOp = errors.New("api: invalid commit operation")
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
	felix.Topic
	// EntityKey routes the commit to a shard (like a publish key) and
	// scopes its state keys.
	EntityKey []byte
	// Ops are the operations, in order; every one must be on Topic.Stream.
	Ops []CommitOp
	// ExpectedOffset, when set, makes the commit conditional: it is applied
	// only if the shard's next offset is this one, else refused with a
	// *felix.PublishRefusedError (offset_mismatch; Tail names the shard's tail).
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
// event plus state changes on one stream) and sends it to the leader of
// the shard the entity key routes to. It returns the offset of the event,
// which is also the version of every state key it wrote. Needs
// felix.FeatureAtomicCommit, and felix.FeaturePublishConditional for
// ExpectedOffset (felix.ErrNotAdvertised, nothing sent). A stale
// ExpectedOffset is a *felix.PublishRefusedError (Tail names the shard's
// tail; nothing was written). A commit is not safe to re-send: an unknown
// outcome is ambiguous (read the state with StateGet to find out).
func (x Calls) Commit(ctx context.Context, req CommitRequest) (offset uint64, err error) {
	event, changes, err := req.validate()
	if err != nil {
		return 0, err
	}
	m := &felix.Commit{TenantID: req.TenantID, Namespace: req.Namespace, Stream: req.Stream, EntityKey: req.EntityKey,
		Event: event, Changes: changes, ExpectedOffset: req.ExpectedOffset}
	if m.EntityKey == nil {
		m.EntityKey = []byte{}
	}
	ok, err := do[*felix.CommitOK](ctx, x, m)
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

// StateGet reads state key under entityKey on stream t, from the leader
// of the shard the entity key routes to. A key never written or deleted
// is Found == false (absent, not empty). Needs felix.FeatureAtomicCommit.
func (x Calls) StateGet(ctx context.Context, t felix.Topic, entityKey []byte, key string) (StateValue, error) {
	m := &felix.StateGet{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, EntityKey: entityKey, Key: key}
	if m.EntityKey == nil {
		m.EntityKey = []byte{}
	}
	sv, err := do[*felix.StateValue](ctx, x, m)
	if err != nil {
		return StateValue{}, err
	}
	return StateValue{Value: sv.Value.V, Found: sv.Value.Set, Version: sv.Version.V, HasVersion: sv.Version.Set,
		AsOf: sv.AsOf.V, HasAsOf: sv.AsOf.Set}, nil
}

// PublishIf appends payloads (routed by key; nil = no key, shard 0) on
// the shard's leader only if the shard's next offset is expected. It
// returns the offset of the first record (HasOffset when the client
// offered flag 0x1000). A stale expected offset is a
// *felix.PublishRefusedError whose Tail names the shard's next offset;
// nothing was written. Needs felix.FeaturePublishConditional; not safe to
// re-send (a re-send of an applied write would be refused as stale).
func (x Calls) PublishIf(ctx context.Context, t felix.Topic, payloads [][]byte, key []byte, expected uint64) (felix.PublishResult, error) {
	m := &felix.PublishIf{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, Payloads: payloads, ExpectedOffset: expected}
	if key != nil {
		m.Key = felix.Some(key)
	}
	ok, err := do[*felix.PublishOK](ctx, x, m)
	if err != nil {
		return felix.PublishResult{}, err
	}
	return felix.PublishResult{Offset: ok.Offset.V, HasOffset: ok.Offset.Set}, nil
}
