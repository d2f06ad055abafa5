package server

import (
	"errors"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/engine"
)

// CommitFeatures are the commit, conditional-write and time-index features
// the broker serves (on durable streams; ephemeral streams refuse them
// with invalid_request): commit / state_get, publish_if and expected_offset
// on commit, offset_for_time and timestamps on group records.
const CommitFeatures = felix.FeatureAtomicCommit | felix.FeaturePublishConditional | felix.FeatureRecordTimestamps

// conditional answers commit, state_get, publish_if and offset_for_time.
// Each names one stream; an explicit shard is refused (this broker does not
// advertise FeatureExplicitShard), the entity or routing key decides.
func (h *handler) conditional(m felix.Message) bool {
	eng := h.s.eng
	switch m := m.(type) {
	case *felix.Commit:
		if m.TenantID != h.id.Tenant {
			return h.refuse(felix.CodeForbidden, "tenant mismatch")
		}
		if m.Shard.Set {
			return h.fail(newErr(felix.CodeInvalidRequest, "explicit shards are not supported by this broker"))
		}
		res, err := eng.Commit(engine.CommitRequest{Topic: engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream},
			EntityKey: m.EntityKey, Event: m.Event, Changes: m.Changes, HasExpected: m.ExpectedOffset.Set,
			ExpectedOffset: m.ExpectedOffset.V, Publisher: h.id.Principal})
		if err != nil {
			return h.write(h.refusal(m.RequestID, err))
		}
		return h.write(&felix.CommitOK{RequestID: m.RequestID, Offset: res.Offset})
	case *felix.StateGet:
		if m.TenantID != h.id.Tenant {
			return h.refuse(felix.CodeForbidden, "tenant mismatch")
		}
		if m.Shard.Set {
			return h.fail(newErr(felix.CodeInvalidRequest, "explicit shards are not supported by this broker"))
		}
		v, err := eng.StateGet(engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.EntityKey, m.Key)
		if err != nil {
			return h.fail(err)
		}
		sv := &felix.StateValue{RequestID: m.RequestID}
		if v.Found {
			sv.Value, sv.Version = felix.Some(v.Value), felix.Some(v.Version)
		}
		if v.HasAsOf {
			sv.AsOf = felix.Some(v.AsOf)
		}
		return h.write(sv)
	case *felix.PublishIf:
		if m.TenantID != h.id.Tenant {
			return h.refuse(felix.CodeForbidden, "tenant mismatch")
		}
		if m.Shard.Set {
			return h.fail(newErr(felix.CodeInvalidRequest, "explicit shards are not supported by this broker"))
		}
		res, err := eng.PublishIf(engine.PublishRequest{Topic: engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream},
			Payloads: m.Payloads, Keyed: m.Key.Set, Key: m.Key.V, Publisher: h.id.Principal}, m.ExpectedOffset)
		if err != nil {
			return h.write(h.refusal(m.RequestID, err))
		}
		return h.write(&felix.PublishOK{RequestID: m.RequestID, Offset: felix.Some(res.Offset)})
	case *felix.OffsetForTime:
		if m.TenantID != h.id.Tenant {
			return h.refuse(felix.CodeForbidden, "tenant mismatch")
		}
		off, ok, err := eng.OffsetForTime(engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}, m.Shard, m.AtMicros)
		if err != nil {
			return h.fail(err)
		}
		ov := &felix.OffsetValue{RequestID: m.RequestID}
		if ok {
			ov.Offset = felix.Some(off)
		}
		return h.write(ov)
	}
	return h.refuse(felix.CodeInvalidRequest, "unexpected request")
}

// refusal converts a failed conditional write: offset_mismatch becomes
// publish_refused naming the tail, anything else an error message.
func (h *handler) refusal(rid uint64, err error) felix.Message {
	var rf *engine.Refusal
	if errors.As(err, &rf) && rf.Reason == engine.RefusedOffsetMismatch {
		return &felix.PublishRefused{RequestID: rid, Message: rf.Message,
			Reason: felix.PublishRefusalReason{Kind: felix.RefusalOffsetMismatch, Tail: rf.Tail}}
	}
	return errorMessage(err)
}
