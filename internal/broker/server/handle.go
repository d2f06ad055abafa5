package server

import (
	"errors"
	"io"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
)

// handler serves one authenticated client stream: it reads requests in
// order and answers each before reading the next, so publish answers are
// released in request order and at most one publish per stream is ever
// unanswered (well within the granted publish window).
type handler struct {
	s    *Server
	st   *conn.Stream
	peer felix.PeerCapabilities
	id   Identity
	buf  []byte
	pl   [][]byte      // reused payload list
	subs *atomic.Int64 // subscriptions and watches open on the connection

	fwd      bool // the publish being answered was forwarded to fwdOwner
	fwdOwner felix.AckOwner
}

// reserveSub counts a new subscription or watch of tenant, with key (its
// key or prefix, kept for its life), against the connection's limit and
// the tenant's and broker's subscription budgets (sub_budget.go); it
// answers limit_exceeded, naming the limit, and returns nil when one is
// reached. The pump releases the slot when it ends.
func (h *handler) reserveSub(tenant string, key int) *subSlot {
	if h.subs.Add(1) > int64(h.s.cfg.MaxSubscriptionsPerConn) {
		h.subs.Add(-1)
		h.refuse(felix.CodeLimitExceeded, "max subscriptions per connection exceeded")
		return nil
	}
	cost := int64(SubscriptionCost + key)
	if why := h.s.subBudget.take(tenant, cost); why != "" {
		h.subs.Add(-1)
		h.s.st.subRefused.Add(1)
		h.refuse(felix.CodeLimitExceeded, why)
		return nil
	}
	return &subSlot{conn: h.subs, b: &h.s.subBudget, tenant: tenant, cost: cost}
}

func (h *handler) serve() {
	for {
		req, err := h.st.ReadRequest(h.st.Conn().Context())
		if err != nil {
			if errors.Is(err, io.EOF) {
				h.st.Close()
				return
			}
			if felix.ErrorClass(err) != "" {
				h.s.st.badFrames.Add(1)
				h.s.log.Debug("bad frame: stream ended", "err", err)
			}
			h.st.Abort()
			return
		}
		h.s.st.requests.Add(1)
		h.s.inflight.Add(1)
		more := h.handle(req)
		h.s.inflight.Add(-1)
		if !more {
			return
		}
	}
}

// handle answers one request; it returns false when the stream has ended.
func (h *handler) handle(req conn.Request) bool {
	if h.s.cfg.Intercept != nil {
		if more, ok := h.intercept(req); ok {
			return more
		}
	}
	if req.Flags != 0 {
		switch req.Flags.Layout() {
		case felix.LayoutPublishBatch:
			return h.plainPublish(req)
		case felix.LayoutAckedPublishBatch:
			return h.ackedPublish(req)
		}
		h.s.st.badFrames.Add(1)
		return h.refuse(felix.CodeInvalidRequest, "unexpected frame "+req.Flags.String())
	}
	if h.st.Unidirectional() {
		return h.uniMessage(req.Message)
	}
	switch m := req.Message.(type) {
	case *felix.Publish:
		var key []byte
		if m.Key.Set {
			key = m.Key.V
		}
		return h.jsonPublish(m.TenantID, m.Namespace, m.Stream, [][]byte{m.Payload}, m.Key.Set, key,
			m.Ack.Or(felix.AckPerMessage), m.RequestID, m.Shard.Set)
	case *felix.PublishBatchMessage:
		return h.jsonPublish(m.TenantID, m.Namespace, m.Stream, m.Payloads, m.Key.Set, m.Key.V,
			m.Ack.Or(felix.AckPerBatch), m.RequestID, m.Shard.Set)
	case *felix.ProducerInit:
		if !h.id.Allows(PermPublish) {
			return h.refuse(felix.CodeForbidden, "forbidden")
		}
		return h.write(&felix.ProducerInitOK{RequestID: m.RequestID, ProducerID: h.s.eng.ProducerInit()})
	case *felix.PublishIdempotent:
		if why := h.deny(m.TenantID, PermPublish); why != "" {
			h.write(&felix.PublishError{RequestID: m.RequestID, Message: why, Code: felix.Some(felix.CodeForbidden), Retry: felix.Some(felix.RetryFatal)})
			h.st.Close()
			return false
		}
		t := engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
		if p := h.placeWrite(t, m.Key.Set, m.Key.V); p.Refuse != nil {
			return h.write(h.idempotentAnswer(m.RequestID, engine.PublishResult{}, p.Refuse))
		} else if !p.Local {
			return h.write(notLeaderRefusal(m.RequestID, p))
		}
		res, err := h.s.eng.Publish(engine.PublishRequest{
			Topic:    t,
			Payloads: m.Payloads, Keyed: m.Key.Set, Key: m.Key.V, Publisher: h.id.Principal,
			Idempotent: true, ProducerID: m.ProducerID, Sequence: m.Sequence})
		return h.write(h.idempotentAnswer(m.RequestID, res, err))
	case *felix.Subscribe:
		h.subscribe(m)
		return false
	case *felix.CacheWatch:
		h.watch(m)
		return false
	case *felix.CachePut, *felix.CacheGet, *felix.CacheDelete, *felix.CachePutIf, *felix.CacheDeleteIf,
		*felix.CounterAdd, *felix.CounterGet, *felix.CacheShards:
		return h.cache(m)
	case *felix.StreamShards:
		if m.TenantID != h.id.Tenant {
			return h.refuse(felix.CodeForbidden, "tenant mismatch")
		}
		t := engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
		if err := h.s.eng.CheckTopic(t); err != nil {
			return h.fail(err)
		}
		view := &felix.StreamShardsView{RequestID: m.RequestID}
		if c, ok := h.s.eng.StreamInfo(t); ok {
			view.Shards = max(c.Shards, 1)
			if c.Routing != felix.RoutingModulo {
				// Written only for jump_hash: absent means modulo (docs/messages.md §4).
				view.Routing = felix.Some(c.Routing)
			}
		}
		return h.write(view)
	case *felix.StreamRead:
		return h.streamRead(m)
	case *felix.Topology, *felix.ShardOwners:
		more, _ := h.clusterRequest(m)
		return more
	case *felix.ShardInspect, *felix.SubscriptionsList:
		more, _ := h.inspectRequest(m)
		return more
	case *felix.GroupPoll, *felix.GroupAck, *felix.GroupNack, *felix.GroupExtend, *felix.GroupDeadLetter,
		*felix.GroupDeadLetters, *felix.GroupDiscard, *felix.GroupRedrive, *felix.GroupSeek,
		*felix.GroupDescribe, *felix.GroupDelete:
		if p, elsewhere := h.leaderOnly(m); elsewhere {
			return h.redirect(p)
		}
		return h.group(m)
	case *felix.Commit, *felix.StateGet, *felix.PublishIf, *felix.OffsetForTime:
		if p, elsewhere := h.leaderOnly(m); elsewhere {
			return h.redirect(p)
		}
		return h.conditional(m)
	case *felix.UnknownMessage:
		return h.unsupported(m.Type, "", m.RequestID())
	case *felix.Extension:
		return h.unsupported("extension", m.Name, m.RequestID)
	case *felix.ErrorMessage:
		h.st.Close() // a client-sent error ends the stream without an answer
		return false
	}
	typ := req.Message.MessageType()
	if _, ok := felix.LookupRequest(typ); ok {
		// A request this broker does not serve (and does not advertise).
		return h.unsupported(typ, "", felix.Opt[uint64]{})
	}
	return h.refuse(felix.CodeInvalidRequest, "unexpected message type "+typ)
}

// unsupported answers a request the broker does not serve: unsupported
// when both sides negotiated FeatureUnsupported (the stream stays open),
// otherwise the stream ends.
func (h *handler) unsupported(typ, ext string, rid felix.Opt[uint64]) bool {
	typ, ext = echoed(typ), echoed(ext)
	if h.peer.Unsupported(h.s.offer.Features.Has(felix.FeatureUnsupported)) {
		u := &felix.Unsupported{RequestType: typ, RequestID: rid}
		if ext != "" {
			u.Extension = felix.Some(ext)
		}
		return h.write(u)
	}
	h.s.log.Debug("unknown request type: stream ended", "type", typ)
	h.st.Close()
	return false
}

// MaxEchoedNameBytes bounds a peer-chosen name the broker repeats back
// (the request_type and extension of unsupported) or logs: a longer one is
// cut to its first MaxEchoedNameBytes bytes (at a UTF-8 boundary), so that
// every answer fits the frame limit whatever the request carried (a 16 MiB
// type name would otherwise be echoed in a frame over 16 MiB).
const MaxEchoedNameBytes = 256

// echoed returns s cut to MaxEchoedNameBytes at a UTF-8 boundary.
func echoed(s string) string {
	if len(s) <= MaxEchoedNameBytes {
		return s
	}
	n := MaxEchoedNameBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// uniMessage handles a JSON frame on a publish-only stream: publishes are
// applied (never answered), anything else ends the stream.
func (h *handler) uniMessage(m felix.Message) bool {
	var pr engine.PublishRequest
	switch m := m.(type) {
	case *felix.Publish:
		pr = engine.PublishRequest{Topic: engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream},
			Payloads: [][]byte{m.Payload}, Keyed: m.Key.Set, Key: m.Key.V}
	case *felix.PublishBatchMessage:
		pr = engine.PublishRequest{Topic: engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream},
			Payloads: m.Payloads, Keyed: m.Key.Set, Key: m.Key.V}
	default:
		h.st.Abort()
		return false
	}
	if h.deny(pr.Tenant, PermPublish) != "" {
		h.st.Abort()
		return false
	}
	if p := h.placeWrite(pr.Topic, pr.Keyed, pr.Key); p.Refuse != nil {
		return true // nowhere to answer: dropped
	}
	pr.Publisher = h.id.Principal
	_, _ = h.s.eng.Publish(pr)
	return true
}

// write sends a JSON answer; it returns false (stream ended) when the
// write fails.
func (h *handler) write(m felix.Message) bool {
	if err := h.st.WriteMessage(h.st.Conn().Context(), m); err != nil {
		h.s.log.Debug("write failed: stream ended", "type", m.MessageType(), "err", err)
		h.st.Abort()
		return false
	}
	return true
}

// refuse answers an error and ends the stream.
func (h *handler) refuse(code felix.ErrorCode, msg string) bool {
	_ = h.st.WriteError(h.st.Conn().Context(), &felix.BrokerError{Type: "error", Message: msg, Code: code})
	h.st.Close()
	return false
}

// fail answers an error and keeps the stream.
func (h *handler) fail(err error) bool {
	return h.write(errorMessage(err))
}

// errorMessage converts an engine error to an error message (conn drops
// code, retry and detail for clients without FeatureErrorCodes).
func errorMessage(err error) felix.Message {
	var ce *engine.CursorError
	if errors.As(err, &ce) {
		return &felix.SubscribeCursorError{Reason: felix.CursorErrorReason(ce.Reason), Requested: ce.Requested, Available: ce.Available}
	}
	code, retry, msg, reason := codeOf(err)
	m := &felix.ErrorMessage{Message: msg, Code: felix.Some(code), Retry: felix.Some(retry)}
	if reason != "" {
		m.Detail = felix.Some(felix.ErrorDetail{Reason: felix.Some(reason)})
	}
	return m
}

func codeOf(err error) (felix.ErrorCode, felix.RetryClass, string, string) {
	var ee *engine.Error
	if errors.As(err, &ee) {
		return ee.Code, ee.Retry, ee.Message, ee.Reason
	}
	return felix.CodeInternal, felix.RetryRetry, err.Error(), ""
}

func ttlOf(ms felix.Opt[uint64]) *time.Duration {
	if !ms.Set {
		return nil
	}
	d := time.Duration(min(ms.V, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
	return &d
}
