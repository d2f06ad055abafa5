package server

import (
	"errors"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
)

// payloads collects a view's payloads into the handler's reused list (the
// engine copies them).
func (h *handler) payloads(v *felix.PublishBatchView) [][]byte {
	h.pl = h.pl[:0]
	for p := range v.Payloads() {
		h.pl = append(h.pl, p)
	}
	return h.pl
}

func (h *handler) viewRequest(v *felix.PublishBatchView) engine.PublishRequest {
	return engine.PublishRequest{
		Topic:     engine.Topic{Tenant: string(v.TenantID), Namespace: string(v.Namespace), Stream: string(v.Stream)},
		Payloads:  h.payloads(v),
		Keyed:     v.HasKey(),
		Key:       v.Key,
		Publisher: h.id.Principal,
	}
}

// plainPublish applies an unacknowledged binary publish (0x0001 / 0x0041).
// It has no answer: an undecodable frame or a tenant mismatch tears the
// stream down, an unknown stream drops the batch.
func (h *handler) plainPublish(req conn.Request) bool {
	v, err := felix.ParsePublishBatch(req.Flags, req.Payload)
	if err != nil || h.deny(string(v.TenantID), PermPublish) != "" {
		h.s.st.badFrames.Add(1)
		h.s.log.Debug("unacked publish refused: stream torn down", "err", err)
		h.st.Abort()
		return false
	}
	pr := h.viewRequest(&v)
	if p := h.placeWrite(pr.Topic, pr.Keyed, pr.Key); p.Refuse != nil {
		h.s.log.Debug("unacked publish dropped", "err", p.Refuse)
		return true
	}
	if _, err := h.s.eng.Publish(pr); err != nil {
		h.s.log.Debug("unacked publish dropped", "err", err)
		if h.s.draining.Load() {
			h.st.Abort() // the client learns that its stream is gone
			return false
		}
	}
	return true
}

// ackedPublish applies an acked binary publish (0x0009, 0x0049) or an
// idempotent one (0x0109, 0x0149). An unreadable prefix ends the stream; a
// malformed body is answered with an error for its request id.
func (h *handler) ackedPublish(req conn.Request) bool {
	p, err := felix.PeekAckedPrefix(req.Flags, req.Payload)
	if err != nil {
		h.s.st.badFrames.Add(1)
		h.s.log.Debug("acked publish prefix unreadable: stream ended", "err", err)
		h.st.Abort()
		return false
	}
	v, err := felix.ParsePublishBatch(req.Flags, req.Payload)
	if err != nil {
		h.s.st.badFrames.Add(1)
		return h.publishAnswer(p, engine.PublishResult{}, newErr(felix.CodeInvalidRequest, "malformed publish batch: "+err.Error()))
	}
	if why := h.deny(string(v.TenantID), PermPublish); why != "" {
		return h.publishAnswer(p, engine.PublishResult{}, newErr(felix.CodeForbidden, why))
	}
	pr := h.viewRequest(&v)
	if p.Idempotent {
		pr.Idempotent, pr.ProducerID, pr.Sequence = true, v.ProducerID, v.Sequence
	}
	place := h.placeWrite(pr.Topic, pr.Keyed, pr.Key)
	if p.Idempotent && !place.Local && place.Refuse == nil {
		return h.write(notLeaderRefusal(p.RequestID, place))
	}
	if place.Refuse != nil {
		return h.forwardedAnswer(p, engine.PublishResult{}, place.Refuse, place)
	}
	res, err := h.s.eng.Publish(pr)
	return h.forwardedAnswer(p, res, err, place)
}

// forwardedAnswer is publishAnswer with the owner section for a batch
// this node forwarded to the shard owner (a non-local placement).
func (h *handler) forwardedAnswer(p felix.AckedPrefix, res engine.PublishResult, err error, place Placement) bool {
	h.fwd = !place.Local && place.Owner.NodeID != ""
	h.fwdOwner = place.owner()
	defer func() { h.fwd = false }()
	return h.publishAnswer(p, res, err)
}

func newErr(code felix.ErrorCode, msg string) *engine.Error {
	return &engine.Error{Code: code, Retry: code.DefaultRetry(), Message: msg}
}

// publishAnswer answers an acked binary publish: idempotent frames in JSON
// (publish_ok / publish_error / publish_refused), others with a binary ack
// carrying only the sections the client offered (or in JSON for a client
// that cannot parse 0x0010).
func (h *handler) publishAnswer(p felix.AckedPrefix, res engine.PublishResult, err error) bool {
	if h.st.Unidirectional() {
		return true // nowhere to answer
	}
	if p.Idempotent {
		return h.write(h.idempotentAnswer(p.RequestID, res, err))
	}
	if !h.peer.Flags.Has(felix.FlagBinaryPublishAck) {
		return h.write(h.jsonAnswer(p.RequestID, res, err))
	}
	a := felix.PublishAck{Status: felix.AckOK, RequestID: p.RequestID, HasOffset: res.HasOffset, Offset: res.Offset}
	if err != nil {
		code, retry, msg, reason := codeOf(err)
		if len(msg) > 512 {
			msg = msg[:512]
		}
		a = felix.PublishAck{Status: felix.AckError, RequestID: p.RequestID, Message: msg, Code: code, Retry: retry,
			HasDetail: reason != "", Reason: reason}
	}
	if h.fwd {
		a.HasOwner, a.Owner = true, h.fwdOwner
	}
	a = a.Restrict(h.peer.AckFlags())
	b, aerr := felix.AppendPublishAck(h.buf[:0], &a)
	if aerr != nil {
		h.st.Abort()
		return false
	}
	h.buf = b
	if werr := h.st.WriteEncoded(h.st.Conn().Context(), b); werr != nil {
		h.st.Abort()
		return false
	}
	return true
}

// jsonAnswer is the answer to an acked JSON publish: publish_ok (with the
// first offset, which conn drops for clients without flag 0x1000) or
// publish_error.
func (h *handler) jsonAnswer(rid uint64, res engine.PublishResult, err error) felix.Message {
	if err != nil {
		code, retry, msg, reason := codeOf(err)
		pe := &felix.PublishError{RequestID: rid, Message: msg, Code: felix.Some(code), Retry: felix.Some(retry)}
		if reason != "" {
			pe.Detail = felix.Some(felix.ErrorDetail{Reason: felix.Some(reason)})
		}
		return pe
	}
	ok := &felix.PublishOK{RequestID: rid}
	if res.HasOffset {
		ok.Offset = felix.Some(res.Offset)
	}
	return ok
}

// idempotentAnswer is the answer to publish_idempotent or a 0x0100 frame.
func (h *handler) idempotentAnswer(rid uint64, res engine.PublishResult, err error) felix.Message {
	var rf *engine.Refusal
	if !errors.As(err, &rf) {
		return h.jsonAnswer(rid, res, err)
	}
	reason := felix.PublishRefusalReason{}
	switch rf.Reason {
	case engine.RefusedUnknownProducer:
		reason.Kind = felix.RefusalUnknownProducer
	case engine.RefusedSequenceExpired:
		reason.Kind = felix.RefusalSequenceExpired
	case engine.RefusedSequenceGap:
		reason.Kind, reason.Expected = felix.RefusalSequenceGap, rf.Expected
	case engine.RefusedSequenceReused:
		if !h.peer.Features.Has(felix.FeatureSequenceReused) {
			// docs/errors.md §5: clients that did not offer it get publish_ok and
			// the batch is silently not written.
			return &felix.PublishOK{RequestID: rid}
		}
		reason.Kind = felix.RefusalSequenceReused
	}
	return &felix.PublishRefused{RequestID: rid, Reason: reason, Message: rf.Message}
}

// jsonPublish handles publish and publish_batch. An absent ack means
// per_message / per_batch, which needs a request_id.
func (h *handler) jsonPublish(tenant, ns, stream string, payloads [][]byte, keyed bool, key []byte,
	ack felix.AckMode, rid felix.Opt[uint64], explicitShard bool) bool {
	acked := ack != felix.AckNone
	if acked && !rid.Set {
		return h.fail(newErr(felix.CodeInvalidRequest, "missing request_id for acked publish"))
	}
	if why := h.deny(tenant, PermPublish); why != "" {
		if acked {
			h.write(&felix.PublishError{RequestID: rid.V, Message: why, Code: felix.Some(felix.CodeForbidden), Retry: felix.Some(felix.RetryFatal)})
		}
		h.st.Close()
		return false
	}
	var res engine.PublishResult
	var err error
	t := engine.Topic{Tenant: tenant, Namespace: ns, Stream: stream}
	if explicitShard {
		err = newErr(felix.CodeInvalidRequest, "explicit shards are not supported by this broker")
	} else if p := h.placeWrite(t, keyed, key); p.Refuse != nil {
		err = p.Refuse
	} else {
		res, err = h.s.eng.Publish(engine.PublishRequest{Topic: t,
			Payloads: payloads, Keyed: keyed, Key: key, Publisher: h.id.Principal})
	}
	if !acked {
		return true
	}
	return h.write(h.jsonAnswer(rid.V, res, err))
}
