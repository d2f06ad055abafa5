package conn

import (
	"time"

	"github.com/flxproto/felix"
)

// This file converts between the package's API values and the root
// package's control messages.

// jsonPublish builds the JSON publish (one record) or publish_batch. ack
// is always written (an absent ack means "acked" to the broker); rid is
// written when the publish is acked.
func jsonPublish(t felix.Topic, payloads [][]byte, key []byte, ack felix.AckMode, rid uint64) felix.Message {
	var k felix.Opt[[]byte]
	if key != nil {
		k = felix.Some(key)
	}
	var id felix.Opt[uint64]
	if ack != felix.AckNone {
		id = felix.Some(rid)
	}
	if len(payloads) == 1 {
		return &felix.Publish{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, Payload: payloads[0],
			Key: k, RequestID: id, Ack: felix.Some(ack)}
	}
	return &felix.PublishBatchMessage{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, Payloads: payloads,
		Key: k, RequestID: id, Ack: felix.Some(ack)}
}

func jsonPublishIdempotent(t felix.Topic, payloads [][]byte, key []byte, rid, producer, seq uint64) felix.Message {
	var k felix.Opt[[]byte]
	if key != nil {
		k = felix.Some(key)
	}
	return &felix.PublishIdempotent{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, Payloads: payloads,
		Key: k, RequestID: rid, ProducerID: producer, Sequence: seq}
}

func producerInit(rid uint64) felix.Message { return &felix.ProducerInit{RequestID: rid} }

func producerID(m felix.Message) (uint64, bool) {
	if ok, is := m.(*felix.ProducerInitOK); is {
		return ok.ProducerID, true
	}
	return 0, false
}

// answerError converts an answer that is not the expected success into an
// error: the typed broker errors, or felix.ErrProtocol for anything else.
func answerError(m felix.Message, rid uint64) error {
	switch a := m.(type) {
	case *felix.ErrorMessage:
		be := brokerErrorFrom(a)
		be.RequestID = rid
		return be
	case *felix.PublishError:
		be := &felix.BrokerError{Type: "publish_error", RequestID: a.RequestID, Message: a.Message}
		fillCodes(be, a.Code, a.Retry, a.Detail)
		return be
	case *felix.PublishRefused:
		return &felix.PublishRefusedError{RequestID: a.RequestID, Reason: refusalWord(a.Reason.Kind), Message: a.Message, Refusal: a}
	case *felix.NotLeader:
		return &felix.NotLeaderError{NodeID: a.NodeID, Addr: a.Addr.V, Generation: a.Generation}
	case *felix.SubscribeCursorError:
		return &felix.CursorError{Reason: string(a.Reason), Requested: a.Requested, Available: a.Available}
	case *felix.Unsupported:
		return notAdvertised("broker answered unsupported to " + a.RequestType)
	}
	return protocolErr("unexpected answer %q", m.MessageType())
}

func refusalWord(k felix.RefusalKind) string {
	switch k {
	case felix.RefusalUnknownProducer:
		return "unknown_producer"
	case felix.RefusalSequenceExpired:
		return "sequence_expired"
	case felix.RefusalSequenceReused:
		return "sequence_reused"
	case felix.RefusalSequenceGap:
		return "sequence_gap"
	case felix.RefusalOffsetMismatch:
		return "offset_mismatch"
	case felix.RefusalNotLeader:
		return "not_leader"
	}
	return "unknown"
}

func brokerErrorFrom(m *felix.ErrorMessage) *felix.BrokerError {
	be := &felix.BrokerError{Type: "error", Message: m.Message}
	fillCodes(be, m.Code, m.Retry, m.Detail)
	return be
}

func fillCodes(be *felix.BrokerError, code felix.Opt[felix.ErrorCode], retry felix.Opt[felix.RetryClass], d felix.Opt[felix.ErrorDetail]) {
	be.Code = code.V
	be.Retry = retry.V
	if d.Set {
		be.Reason = d.V.Reason.V
		be.RetryAfter = msDuration(d.V.RetryAfterMs.V)
	}
}

func msDuration(ms uint64) time.Duration {
	if ms > uint64(1<<63-1)/uint64(time.Millisecond) {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(ms) * time.Millisecond
}

// errorMessage builds the error message for e with every optional field
// (shapeMessage drops what the client did not offer).
func errorMessage(e *felix.BrokerError) *felix.ErrorMessage {
	m := &felix.ErrorMessage{Message: e.Message}
	if e.Code != "" {
		m.Code = felix.Some(e.Code)
		r := e.Retry
		if r == 0 {
			r = e.Code.DefaultRetry()
		}
		m.Retry = felix.Some(r)
	}
	if e.Reason != "" || e.RetryAfter > 0 {
		var d felix.ErrorDetail
		if e.Reason != "" {
			d.Reason = felix.Some(e.Reason)
		}
		if e.RetryAfter > 0 {
			d.RetryAfterMs = felix.Some(uint64(e.RetryAfter / time.Millisecond))
		}
		m.Detail = felix.Some(d)
	}
	return m
}

// publishResultJSON converts a JSON answer to an acked publish.
func publishResultJSON(rid uint64, m felix.Message) (felix.PublishResult, error) {
	if ok, is := m.(*felix.PublishOK); is {
		return felix.PublishResult{Offset: ok.Offset.V, HasOffset: ok.Offset.Set}, nil
	}
	return felix.PublishResult{}, answerError(m, rid)
}

func subscribeMessage(t felix.Topic, o SubscribeOptions) *felix.Subscribe {
	m := &felix.Subscribe{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, Shard: o.Shard}
	if o.Start.Kind != felix.StartLatest {
		m.Start = felix.Some(o.Start)
	}
	if o.QueueCapacity != 0 {
		m.QueueCapacity = felix.Some(o.QueueCapacity)
	}
	return m
}

// messageGates lists the broker→client messages a client can only parse
// when it offered a feature (docs/negotiation.md §2, broker side). Answers to
// feature-gated requests (counter_value, cache_watch_started, ...) are not
// listed: a client that sent the request parses its answer, whatever it
// offered.
var messageGates = map[string]felix.Features{
	"shard_moved":    felix.FeatureShardMoved,
	"stream_deleted": felix.FeatureStreamDeleted,
	"unsupported":    felix.FeatureUnsupported,
	"not_leader":     felix.FeatureRedirect,
}

// shapeMessage fits a broker→client message to what the client offered:
// optional fields it did not ask for are dropped (on a copy), and a message
// it cannot parse is refused with felix.ErrNotAdvertised.
func shapeMessage(m felix.Message, peer felix.PeerCapabilities) (felix.Message, error) {
	typ := m.MessageType()
	if f, ok := messageGates[typ]; ok && !peer.Features.Has(f) {
		return nil, notAdvertised(typ + " to a client that did not offer " + f.String())
	}
	switch a := m.(type) {
	case *felix.AuthOK:
		if peer.Legacy {
			return nil, notAdvertised("auth_ok to a legacy client")
		}
	case *felix.SubscriptionLagged:
		if !peer.SubscriptionLagged() {
			return nil, notAdvertised("subscription_lagged to a client without SUBSCRIPTION_LAGGED and flag 0x0020")
		}
	case *felix.ErrorMessage:
		if !peer.ErrorCodes() && (a.Code.Set || a.Retry.Set || a.Detail.Set) {
			c := *a
			c.Code, c.Retry, c.Detail = felix.Opt[felix.ErrorCode]{}, felix.Opt[felix.RetryClass]{}, felix.Opt[felix.ErrorDetail]{}
			return &c, nil
		}
	case *felix.PublishError:
		if !peer.ErrorCodes() && (a.Code.Set || a.Retry.Set || a.Detail.Set) {
			c := *a
			c.Code, c.Retry, c.Detail = felix.Opt[felix.ErrorCode]{}, felix.Opt[felix.RetryClass]{}, felix.Opt[felix.ErrorDetail]{}
			return &c, nil
		}
	case *felix.PublishOK:
		if !peer.AckOffsets() && a.Offset.Set {
			c := *a
			c.Offset = felix.Opt[uint64]{}
			return &c, nil
		}
	case *felix.CacheValue:
		if !peer.Features.Has(felix.FeatureCacheConditional) && a.Version.Set {
			c := *a
			c.Version = felix.Opt[uint64]{}
			return &c, nil
		}
	case *felix.Subscribed:
		if !peer.Flags.Has(felix.FlagEventBatchOffsets) && (a.StartOffset.Set || a.LiveOffset.Set) {
			c := *a
			c.StartOffset, c.LiveOffset = felix.Opt[uint64]{}, felix.Opt[uint64]{}
			return &c, nil
		}
	}
	return m, nil
}

// jsonItem converts a JSON frame read on an event stream.
func (s *eventSub) jsonItem(m felix.Message) (item, bool) {
	switch a := m.(type) {
	case *felix.EventMessage:
		if s.watch {
			break
		}
		return item{events: []Event{{Payload: a.Payload, Offset: a.Offset.V, HasOffset: a.Offset.Set}}}, false
	case *felix.EventBatchMessage:
		if s.watch {
			break
		}
		evs := make([]Event, len(a.Payloads))
		for i, p := range a.Payloads {
			evs[i] = Event{Payload: p}
			if a.BaseOffset.Set {
				evs[i].Offset, evs[i].HasOffset = a.BaseOffset.V+uint64(i), true
			}
		}
		return item{events: evs}, false
	case *felix.CacheEvent:
		if !s.watch {
			break
		}
		return item{cevents: []CacheEvent{cacheEventFrom(a)}}, false
	case *felix.ShardMoved:
		return item{err: &felix.ShardMovedError{SubscriptionID: a.SubscriptionID, ResumeFrom: a.ResumeFrom.V, HasResumeFrom: a.ResumeFrom.Set,
			NodeID: a.NodeID.V, Addr: a.Addr.V, Generation: a.Generation}}, true
	case *felix.SubscriptionLagged:
		return item{err: &felix.LaggedError{SubscriptionID: a.SubscriptionID, ResumeFrom: a.ResumeFrom}}, true
	case *felix.CacheWatchLagged:
		return item{err: &felix.LaggedError{ResumeFrom: a.ResumeFrom, Watch: true}}, true
	case *felix.StreamDeleted:
		return item{err: &felix.StreamDeletedError{SubscriptionID: a.SubscriptionID}}, true
	case *felix.ErrorMessage:
		return item{err: brokerErrorFrom(a)}, true
	}
	return item{err: protocolErr("unexpected %q on an event stream", m.MessageType())}, true
}
