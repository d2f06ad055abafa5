package server

import (
	"context"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/engine"
)

// GroupFeatures are the consumer-group features the broker serves (on
// durable streams; a group on an ephemeral stream is refused with
// invalid_request). FeatureGroupConsumer (named consumers) and
// FeatureGroupSkipped (the broker never skips offsets) are not served.
const GroupFeatures = felix.FeatureConsumerGroup | felix.FeatureGroupDeadLetters | felix.FeatureGroupAdmin |
	felix.FeatureGroupClaimControl | felix.FeatureGroupPublisher

// pollSlice bounds each wait of a long poll, so that a draining broker
// answers waiting polls promptly.
const pollSlice = 100 * time.Millisecond

func groupRef(tenant, ns, stream string, shard uint32, group string) engine.GroupRef {
	return engine.GroupRef{Topic: engine.Topic{Tenant: tenant, Namespace: ns, Stream: stream}, Shard: shard, Group: group}
}

// group answers the group_* requests. Settling answers are cache_ok;
// failures are error messages (the stream stays open).
func (h *handler) group(m felix.Message) bool {
	var ref engine.GroupRef
	switch m := m.(type) {
	case *felix.GroupPoll:
		ref = groupRef(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	case *felix.GroupAck:
		ref = groupRef(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	case *felix.GroupNack:
		ref = groupRef(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	case *felix.GroupExtend:
		ref = groupRef(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	case *felix.GroupDeadLetter:
		ref = groupRef(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	case *felix.GroupDeadLetters:
		ref = groupRef(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	case *felix.GroupDiscard:
		ref = groupRef(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	case *felix.GroupRedrive:
		ref = groupRef(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	case *felix.GroupSeek:
		ref = groupRef(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	case *felix.GroupDescribe:
		ref = groupRef(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	case *felix.GroupDelete:
		ref = groupRef(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	}
	if ref.Tenant != h.id.Tenant {
		return h.refuse(felix.CodeForbidden, "tenant mismatch")
	}
	eng := h.s.eng
	settled := func(rid uint64, err error) bool {
		if err != nil {
			return h.fail(err)
		}
		return h.write(&felix.CacheOK{RequestID: rid})
	}
	switch m := m.(type) {
	case *felix.GroupPoll:
		return h.groupPoll(ref, m)
	case *felix.GroupAck:
		return settled(m.RequestID, eng.GroupAck(ref, m.Offset))
	case *felix.GroupNack:
		return settled(m.RequestID, eng.GroupNack(ref, m.Offset, m.Attempts, msDur(m.DelayMs)))
	case *felix.GroupExtend:
		d, err := eng.GroupExtend(ref, m.Offset, m.Attempts, msDur(m.ExtendMs))
		if err != nil {
			return h.fail(err)
		}
		return h.write(&felix.GroupExtended{VisibleMs: uint64(d / time.Millisecond), RequestID: m.RequestID})
	case *felix.GroupDeadLetter:
		return settled(m.RequestID, eng.GroupDeadLetter(ref, m.Offset))
	case *felix.GroupDeadLetters:
		offs, err := eng.GroupDeadLetters(ref)
		if err != nil {
			return h.fail(err)
		}
		return h.write(&felix.GroupDeadLetterList{Offsets: offs, RequestID: m.RequestID})
	case *felix.GroupDiscard:
		return settled(m.RequestID, eng.GroupDiscard(ref, m.Offset))
	case *felix.GroupRedrive:
		return settled(m.RequestID, eng.GroupRedrive(ref, m.Offset))
	case *felix.GroupSeek:
		off, moved, err := eng.GroupSeek(ref, m.Start, m.IfNew)
		if err != nil {
			return h.fail(err)
		}
		return h.write(&felix.GroupPosition{Offset: off, Moved: moved, RequestID: m.RequestID})
	case *felix.GroupDescribe:
		info, err := eng.GroupDescribe(ref)
		if err != nil {
			return h.fail(err)
		}
		gi := &felix.GroupInfo{Tail: info.Tail, InFlight: info.InFlight, Owed: info.Owed, DeadLetters: info.DeadLetters, RequestID: m.RequestID}
		if info.HasCommitted {
			gi.Committed = felix.Some(info.Committed)
		}
		return h.write(gi)
	case *felix.GroupDelete:
		existed, err := eng.GroupDelete(ref)
		if err != nil {
			return h.fail(err)
		}
		return h.write(&felix.GroupDeleted{Existed: existed, RequestID: m.RequestID})
	}
	return h.refuse(felix.CodeInvalidRequest, "unexpected group request")
}

// groupPoll answers group_poll, waiting up to wait_ms (capped by the
// engine) in short slices so that a draining broker answers at once.
func (h *handler) groupPoll(ref engine.GroupRef, m *felix.GroupPoll) bool {
	ctx, cancel := context.WithCancel(h.st.Conn().Context())
	defer cancel()
	wait := min(msDur(m.WaitMs), h.s.eng.Config().Groups.MaxWait)
	deadline := time.Now().Add(wait)
	req := engine.GroupPollRequest{GroupRef: ref, Max: int(m.MaxRecords), Visibility: msDur(m.VisibilityMs)}
	var recs []engine.GroupRecord
	for {
		left := time.Until(deadline)
		req.Wait = 0
		if left > 0 && !h.s.draining.Load() {
			req.Wait = min(left, pollSlice)
		}
		var err error
		recs, err = h.s.eng.GroupPoll(ctx, req)
		if err != nil {
			return h.fail(err)
		}
		if len(recs) > 0 || req.Wait == 0 || ctx.Err() != nil {
			break
		}
	}
	ans := &felix.GroupRecords{Records: make([]felix.GroupRecord, len(recs)), RequestID: m.RequestID}
	pubs := h.peer.Features.Has(felix.FeatureGroupPublisher)
	stamps := h.peer.Features.Has(felix.FeatureRecordTimestamps)
	for i, r := range recs {
		gr := felix.GroupRecord{Offset: r.Offset, Payload: r.Payload, Attempts: r.Attempts}
		if pubs && r.Publisher != "" {
			gr.Publisher = felix.Some(r.Publisher)
		}
		if stamps {
			gr.TimestampMicros = felix.Some(r.Timestamp)
		}
		ans.Records[i] = gr
	}
	return h.write(ans)
}

// msDur converts a millisecond count to a Duration, saturating.
func msDur(ms uint64) time.Duration {
	if ms > uint64(1<<62)/uint64(time.Millisecond) {
		return time.Duration(1 << 62)
	}
	return time.Duration(ms) * time.Millisecond
}
