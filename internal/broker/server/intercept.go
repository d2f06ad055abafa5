package server

import (
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// Intercepted is a request an Intercept hook (Config.Intercept) sees: the
// tenant of the stream that carried it and the request as read (on any
// authenticated stream, publish-only ones included).
type Intercepted struct {
	Tenant  string
	Request conn.Request
}

// Interception is what an Intercept hook makes the server answer instead
// of serving a request. With Leader.NodeID set the answer is not_leader
// naming it (publish_refused not_leader for an idempotent publish, an
// error ack with code not_leader and the owner section for another
// acked publish); otherwise it is an error with Code, Retry, Reason and
// RetryAfter (detail.retry_after_ms). A publish is answered on its stream,
// which stays open; any other request's stream ends after the answer, as
// a refusal ends it. An unacked publish (any request of a publish-only
// stream) is dropped.
type Interception struct {
	Code       felix.ErrorCode
	Retry      felix.RetryClass
	Reason     string
	Message    string
	RetryAfter time.Duration
	Leader     felix.BrokerEndpoint
	Generation uint64
}

// intercept answers req as the Intercept hook says; ok is false when the
// hook lets the server serve it.
func (h *handler) intercept(req conn.Request) (more, ok bool) {
	a := h.s.cfg.Intercept(Intercepted{Tenant: h.id.Tenant, Request: req})
	if a == nil {
		return false, false
	}
	if h.st.Unidirectional() {
		return true, true // a publish-only stream: nowhere to answer, dropped
	}
	if a.Message == "" {
		a.Message = "intercepted: " + string(a.Code)
		if a.Leader.NodeID != "" {
			a.Message = "not leader: shard owned by " + a.Leader.NodeID
		}
	}
	code, retry := a.Code, a.Retry
	if a.Leader.NodeID != "" {
		code, retry = felix.CodeNotLeader, felix.CodeNotLeader.DefaultRetry()
	}
	if retry == 0 {
		retry = code.DefaultRetry()
	}
	var detail felix.Opt[felix.ErrorDetail]
	if a.Reason != "" || a.RetryAfter > 0 {
		d := felix.ErrorDetail{}
		if a.Reason != "" {
			d.Reason = felix.Some(a.Reason)
		}
		if a.RetryAfter > 0 {
			d.RetryAfterMs = felix.Some(uint64(a.RetryAfter.Milliseconds()))
		}
		detail = felix.Some(d)
	}
	owner := felix.AckOwner{NodeID: a.Leader.NodeID, Addr: a.Leader.Addr, Generation: a.Generation}
	notLeader := func(rid uint64) *felix.PublishRefused {
		return notLeaderRefusal(rid, Placement{Owner: a.Leader, Generation: a.Generation})
	}
	pubErr := func(rid uint64) felix.Message {
		return &felix.PublishError{RequestID: rid, Message: a.Message, Code: felix.Some(code), Retry: felix.Some(retry), Detail: detail}
	}
	switch {
	case req.Flags.Layout() == felix.LayoutPublishBatch:
		return true, true
	case req.Flags.Layout() == felix.LayoutAckedPublishBatch:
		p, err := felix.PeekAckedPrefix(req.Flags, req.Payload)
		if err != nil {
			h.st.Abort()
			return false, true
		}
		if p.Idempotent {
			if a.Leader.NodeID != "" {
				return h.write(notLeader(p.RequestID)), true
			}
			return h.write(pubErr(p.RequestID)), true
		}
		if !h.peer.Flags.Has(felix.FlagBinaryPublishAck) {
			return h.write(pubErr(p.RequestID)), true
		}
		ack := felix.PublishAck{Status: felix.AckError, RequestID: p.RequestID, Message: a.Message, Code: code, Retry: retry,
			HasDetail: detail.Set, Reason: a.Reason, RetryAfterMs: uint64(a.RetryAfter.Milliseconds()),
			HasOwner: a.Leader.NodeID != "", Owner: owner}
		ack = ack.Restrict(h.peer.AckFlags())
		b, err := felix.AppendPublishAck(h.buf[:0], &ack)
		if err != nil {
			h.st.Abort()
			return false, true
		}
		h.buf = b
		if err := h.st.WriteEncoded(h.st.Conn().Context(), b); err != nil {
			h.st.Abort()
			return false, true
		}
		return true, true
	case req.Flags != 0 || req.Message == nil:
		return false, false
	}
	switch m := req.Message.(type) {
	case *felix.Publish, *felix.PublishBatchMessage:
		rid, set := felix.RequestIDOf(m)
		if !set {
			return true, true // unacked: dropped
		}
		return h.write(pubErr(rid)), true
	case *felix.PublishIdempotent:
		if a.Leader.NodeID != "" {
			return h.write(notLeader(m.RequestID)), true
		}
		return h.write(pubErr(m.RequestID)), true
	}
	if a.Leader.NodeID != "" && h.peer.Features.Has(felix.FeatureRedirect) {
		nl := &felix.NotLeader{NodeID: a.Leader.NodeID, Generation: a.Generation}
		if a.Leader.Addr != "" {
			nl.Addr = felix.Some(a.Leader.Addr)
		}
		h.write(nl)
		h.st.Close()
		return false, true
	}
	h.write(&felix.ErrorMessage{Message: a.Message, Code: felix.Some(code), Retry: felix.Some(retry), Detail: detail})
	h.st.Close()
	return false, true
}
