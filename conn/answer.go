package conn

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/flxproto/felix"
)

// This file turns a server's outcomes into wire frames: the answer of a
// publish in the form its request and the client call for (binary ack or
// JSON, docs/errors.md §Where a failure shows up), in per-stream request
// order, and typed errors back into the frames they were decoded from
// (Stream.WriteErr on a control stream, EventStream.End as the last frame of
// an event stream).

// answerForm is how a publish is answered.
type answerForm uint8

const (
	formNone   answerForm = iota // fire-and-forget: no answer
	formBinary                   // binary ack 0x0010
	formJSON                     // publish_ok / publish_error / publish_refused
)

// PendingAnswer is the reserved answer of one publish (Stream.
// ReservePublish). Answers are written in the order they were reserved,
// whatever the order Resolve is called in, so a server may finish publishes
// concurrently and still answer them in request order.
type PendingAnswer struct {
	s    *Stream
	form answerForm
	rid  uint64

	// Set by Resolve under s.ans.mu.
	ready bool
	msg   felix.Message
	ack   felix.PublishAck

	written chan struct{} // closed once written (or failed): err is set
	err     error
}

// RequestID returns the request id the answer carries (0 for a
// fire-and-forget publish, which gets no answer).
func (p *PendingAnswer) RequestID() uint64 { return p.rid }

// Acked reports whether the publish is answered at all (false for a
// fire-and-forget publish, whose Resolve writes nothing).
func (p *PendingAnswer) Acked() bool { return p.form != formNone }

// answerQueue keeps a stream's reserved answers in request order.
type answerQueue struct {
	mu      sync.Mutex
	q       []*PendingAnswer
	running bool           // a goroutine (or a Resolve call) is writing the head
	last    *PendingAnswer // the latest reservation
}

// ReservePublish reserves the answer of a publish request read from s: a
// binary batch (0x0001 / 0x0008 / 0x0100 forms) or a JSON publish,
// publish_batch, publish_idempotent or publish_if. Call Resolve on the
// result once the publish is done, from any goroutine; the answers of a
// stream are written in the order of their ReservePublish calls. Reserve
// before reading the next request, in the reading goroutine.
//
// The form follows the request and the client's offer: an acked binary
// batch is answered with a binary ack (its optional sections restricted to
// the client's flags), an idempotent binary batch (0x0100) and every JSON
// publish with publish_ok / publish_error / publish_refused carrying the
// request id, and a fire-and-forget publish with nothing. A request that is
// not a publish, or an acked JSON publish without request_id, returns a
// *felix.BrokerError with code invalid_request (answer it with WriteErr).
//
// A client may finish its side of the stream (io.EOF from ReadRequest)
// before its answers were written: call WaitAnswers before Close, which
// would otherwise end the stream under the outstanding answers.
func (s *Stream) ReservePublish(req Request) (*PendingAnswer, error) {
	pa := &PendingAnswer{s: s}
	if req.Flags != 0 {
		switch req.Flags.Layout() {
		case felix.LayoutPublishBatch:
			return pa, nil
		case felix.LayoutAckedPublishBatch:
			pre, err := felix.PeekAckedPrefix(req.Flags, req.Payload)
			if err != nil {
				return nil, &felix.BrokerError{Type: "error", Message: "malformed publish batch: " + err.Error(), Code: felix.CodeInvalidRequest}
			}
			pa.rid, pa.form = pre.RequestID, formBinary
			if pre.Idempotent {
				pa.form = formJSON
			}
		default:
			return nil, &felix.BrokerError{Type: "error", Message: "not a publish: frame " + req.Flags.String(), Code: felix.CodeInvalidRequest}
		}
	} else {
		var (
			ack felix.Opt[felix.AckMode]
			rid felix.Opt[uint64]
		)
		switch m := req.Message.(type) {
		case *felix.Publish:
			ack, rid = m.Ack, m.RequestID
		case *felix.PublishBatchMessage:
			ack, rid = m.Ack, m.RequestID
		case *felix.PublishIdempotent:
			ack, rid = felix.Some(felix.AckPerBatch), felix.Some(m.RequestID)
		case *felix.PublishIf:
			ack, rid = felix.Some(felix.AckPerBatch), felix.Some(m.RequestID)
		default:
			typ := "nil"
			if req.Message != nil {
				typ = req.Message.MessageType()
			}
			return nil, &felix.BrokerError{Type: "error", Message: "not a publish: " + typ, Code: felix.CodeInvalidRequest}
		}
		if ack.Set && ack.V == felix.AckNone {
			return pa, nil // fire-and-forget
		}
		if !rid.Set {
			// An absent ack means acked, and an acked publish needs an id
			// to be answered with.
			return nil, &felix.BrokerError{Type: "error", Message: "acked publish without request_id", Code: felix.CodeInvalidRequest}
		}
		pa.rid, pa.form = rid.V, formJSON
	}
	if s.w == nil {
		// A uni publish stream has no answers: only fire-and-forget
		// publishes travel on it.
		pa.form = formNone
		return pa, nil
	}
	pa.written = make(chan struct{})
	s.ans.mu.Lock()
	s.ans.q = append(s.ans.q, pa)
	s.ans.last = pa
	s.ans.mu.Unlock()
	return pa, nil
}

// Resolve answers the publish: res on success (its offset and owner hint
// are sent when the client offered them), or err, converted to the frame of
// the answer's form:
//   - *felix.BrokerError: a failed binary ack or publish_error with its code,
//     retry class (zero: the code's default, docs/errors.md), detail and
//     owner hint;
//   - *felix.PublishRefusedError: publish_refused (Refusal, or the Reason word);
//   - *felix.NotLeaderError: a failure with code not_leader (retry redirect)
//     naming the owner (owner section 0x0080 of a binary ack);
//   - anything else: code internal (outcome_unknown), the error's text as
//     the message.
//
// Resolve returns once its answer was written, waiting for earlier
// reservations of the stream to be answered first. ctx bounds that wait
// and the write as for Stream.WriteMessage; when ctx ends while earlier
// answers are outstanding, ctx's error is returned and the answer is still
// written in its turn. A fire-and-forget publish writes nothing. Resolve
// must be called once per reservation: an unresolved reservation holds
// back every later answer of the stream.
func (p *PendingAnswer) Resolve(ctx context.Context, res felix.PublishResult, err error) error {
	if p.form == formNone {
		return nil
	}
	s := p.s
	s.ans.mu.Lock()
	if p.ready {
		s.ans.mu.Unlock()
		return errors.New("conn: publish answer resolved twice")
	}
	p.ready = true
	p.build(res, err)
	if s.ans.running || s.ans.q[0] != p {
		// Earlier answers first: a writer writes this one in its turn.
		s.ans.mu.Unlock()
		select {
		case <-p.written:
			return p.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// p is the head and nobody writes: write it here.
	s.ans.q = s.ans.q[1:]
	s.ans.running = true
	s.ans.mu.Unlock()
	p.err = p.write(ctx)
	close(p.written)
	s.ans.mu.Lock()
	if len(s.ans.q) > 0 && s.ans.q[0].ready {
		go s.writeAnswers() // keeps running
	} else {
		s.ans.running = false
	}
	s.ans.mu.Unlock()
	return p.err
}

// Post records the outcome of the publish like Resolve, but returns at
// once: the answer is written in its turn, on a goroutine of this package
// when no Resolve call is writing. Use it where blocking is not allowed,
// such as the done callback of Client.PublishBatchAsync or
// PublishViewAsync (a proxy answering its client from the upstream's
// answer). A second Post or Resolve is ignored.
func (p *PendingAnswer) Post(res felix.PublishResult, err error) {
	if p.form == formNone {
		return
	}
	s := p.s
	s.ans.mu.Lock()
	defer s.ans.mu.Unlock()
	if p.ready {
		return
	}
	p.ready = true
	p.build(res, err)
	if !s.ans.running && s.ans.q[0].ready {
		s.ans.running = true
		go s.writeAnswers()
	}
}

// writeAnswers writes the resolved answers at the head of the queue, in
// order, under the stream's context (their Resolve calls may have given
// up waiting), and stops at the first unresolved one.
func (s *Stream) writeAnswers() {
	for {
		s.ans.mu.Lock()
		if len(s.ans.q) == 0 || !s.ans.q[0].ready {
			s.ans.running = false
			s.ans.mu.Unlock()
			return
		}
		p := s.ans.q[0]
		s.ans.q[0] = nil
		s.ans.q = s.ans.q[1:]
		s.ans.mu.Unlock()
		p.err = p.write(s.Context())
		close(p.written)
	}
}

// WaitAnswers waits until every answer reserved on s so far was written
// (or failed), for example before Close; it returns ctx's error when ctx
// ends first.
func (s *Stream) WaitAnswers(ctx context.Context) error {
	s.ans.mu.Lock()
	last := s.ans.last
	s.ans.mu.Unlock()
	if last == nil {
		return nil
	}
	select {
	case <-last.written:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// build converts the outcome into the answer's message or ack.
func (p *PendingAnswer) build(res felix.PublishResult, err error) {
	if err == nil {
		if p.form == formBinary {
			p.ack = felix.PublishAck{Status: felix.AckOK, RequestID: p.rid, HasOffset: res.HasOffset, Offset: res.Offset,
				HasOwner: res.HasOwner, Owner: res.Owner}
			return
		}
		ok := &felix.PublishOK{RequestID: p.rid}
		if res.HasOffset {
			ok.Offset = felix.Some(res.Offset)
		}
		p.msg = ok
		return
	}
	var pr *felix.PublishRefusedError
	if errors.As(err, &pr) {
		p.msg = refusedMessage(pr, p.rid)
		return
	}
	be := brokerAnswer(err)
	if p.form == formBinary {
		p.ack = felix.PublishAck{Status: felix.AckError, RequestID: p.rid, Message: be.Message, Code: be.Code,
			HasOwner: be.HasOwner, Owner: be.Owner}
		if be.Code != "" {
			p.ack.Retry = be.RetryClass()
		}
		if be.Reason != "" || be.RetryAfter > 0 {
			p.ack.HasDetail, p.ack.Reason, p.ack.RetryAfterMs = true, be.Reason, uint64(be.RetryAfter/time.Millisecond)
		}
		return
	}
	em := errorMessage(be)
	p.msg = &felix.PublishError{RequestID: p.rid, Message: em.Message, Code: em.Code, Retry: em.Retry, Detail: em.Detail}
}

// write writes the built answer on the stream.
func (p *PendingAnswer) write(ctx context.Context) error {
	s := p.s
	if p.msg != nil {
		return s.WriteMessage(ctx, p.msg)
	}
	a := p.ack.Restrict(s.peer.Flags)
	return writeErr("write", s.w.encodeBounded(ctx, a.FrameLen(), func(dst []byte) ([]byte, error) { return felix.AppendPublishAck(dst, &a) }))
}

// AnswerPublish answers a publish request at once: ReservePublish and
// Resolve in one call (see both). For a request that is not a publish it
// answers the *felix.BrokerError ReservePublish returned, with WriteErr, and
// returns it.
func (s *Stream) AnswerPublish(ctx context.Context, req Request, res felix.PublishResult, err error) error {
	p, rerr := s.ReservePublish(req)
	if rerr != nil {
		if werr := s.WriteErr(ctx, rerr); werr != nil {
			return werr
		}
		return rerr
	}
	return p.Resolve(ctx, res, err)
}

// ErrorAnswer is a server's helper: the error answer (the error frame, as
// the *felix.BrokerError a client decodes from it) that a server half
// sends for err, a server-side error. It does not read an answer a client
// received: it makes one. A *felix.BrokerError is answered as it is (Type
// "error" when empty); a *felix.NotLeaderError as code not_leader (retry
// redirect) with the owner hint; a *felix.LaggedError,
// *felix.ShardMovedError or *felix.StreamDeletedError as the error an
// event stream ends with for a client that cannot parse their own frames
// (see EventStream.End); a *felix.CursorError as invalid_request; anything
// else as code internal with the error's text (retry outcome_unknown: a
// server that does not know whether it applied a request must not let the
// client assume it did not). A nil err returns nil, and so does a
// context's cancellation or expiry (context.Canceled,
// context.DeadlineExceeded): no decision was made, and none is made up
// (Stream.WriteErr answers an abandoned request itself).
func ErrorAnswer(err error) *felix.BrokerError {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	var (
		be *felix.BrokerError
		nl *felix.NotLeaderError
		lg *felix.LaggedError
		sm *felix.ShardMovedError
		sd *felix.StreamDeletedError
		ce *felix.CursorError
	)
	switch {
	case errors.As(err, &be):
		if be.Type == "" {
			c := *be
			c.Type = "error"
			return &c
		}
		return be
	case errors.As(err, &nl):
		return &felix.BrokerError{Type: "error", Message: "not leader; owner " + nl.NodeID, Code: felix.CodeNotLeader,
			Retry: felix.RetryRedirect, HasOwner: true, Owner: felix.AckOwner{NodeID: nl.NodeID, Addr: nl.Addr, Generation: nl.Generation}}
	case errors.As(err, &lg):
		return &felix.BrokerError{Type: "error", Message: "lagged; resume from " + strconv.FormatUint(lg.ResumeFrom, 10),
			Code: felix.CodeOverloaded, Retry: felix.RetryRetry, Reason: "lagged"}
	case errors.As(err, &sm):
		return &felix.BrokerError{Type: "error", Message: "shard moved to " + sm.NodeID, Code: felix.CodeShardUnavailable,
			Retry: felix.RetryRetry, Reason: "moving"}
	case errors.As(err, &sd):
		return &felix.BrokerError{Type: "error", Message: "stream deleted", Code: felix.CodeNotFound, Retry: felix.RetryFatal}
	case errors.As(err, &ce):
		return &felix.BrokerError{Type: "error", Message: ce.Error(), Code: felix.CodeInvalidRequest}
	}
	return &felix.BrokerError{Type: "error", Message: err.Error(), Code: felix.CodeInternal}
}

// brokerAnswer is the error frame a server half answers err with:
// ErrorAnswer's, and for a request abandoned because its context ended
// (no broker decision to convey) code internal, retry outcome_unknown.
func brokerAnswer(err error) *felix.BrokerError {
	if be := ErrorAnswer(err); be != nil {
		return be
	}
	return &felix.BrokerError{Type: "error", Message: "request abandoned: " + err.Error(), Code: felix.CodeInternal}
}

// refusedMessage builds the publish_refused of pr for request rid.
func refusedMessage(pr *felix.PublishRefusedError, rid uint64) *felix.PublishRefused {
	if pr.Refusal != nil {
		c := *pr.Refusal
		c.RequestID = rid
		return &c
	}
	m := &felix.PublishRefused{RequestID: rid, Message: pr.Message}
	for k := felix.RefusalUnknownProducer; k <= felix.RefusalNotLeader; k++ {
		if refusalWord(k) == pr.Reason {
			m.Reason.Kind = k
		}
	}
	return m
}

// WriteErr answers err on the control stream s with the frame a client
// decodes back into it: *felix.BrokerError → error (code, retry, detail shaped
// to the client's offer); *felix.NotLeaderError → not_leader when the client
// offered FeatureRedirect, else an error with code not_leader;
// *felix.CursorError → subscribe_cursor_error; *felix.PublishRefusedError →
// publish_refused; anything else → the error ErrorAnswer gives. It does
// not end the stream. ctx bounds the write (see Stream).
func (s *Stream) WriteErr(ctx context.Context, err error) error {
	if err == nil {
		return errors.New("conn: WriteErr with a nil error")
	}
	var (
		nl *felix.NotLeaderError
		ce *felix.CursorError
		pr *felix.PublishRefusedError
	)
	switch {
	case errors.As(err, &nl) && s.peer.Features.Has(felix.FeatureRedirect):
		m := &felix.NotLeader{NodeID: nl.NodeID, Generation: nl.Generation}
		if nl.Addr != "" {
			m.Addr = felix.Some(nl.Addr)
		}
		return s.WriteMessage(ctx, m)
	case errors.As(err, &ce):
		return s.WriteMessage(ctx, &felix.SubscribeCursorError{Reason: felix.CursorErrorReason(ce.Reason), Requested: ce.Requested, Available: ce.Available})
	case errors.As(err, &pr):
		return s.WriteMessage(ctx, refusedMessage(pr, pr.RequestID))
	}
	return s.WriteError(ctx, brokerAnswer(err))
}

// StartSubscription starts the subscription requested on the control
// stream s: it opens the event stream (OpenEventStream, with the id of
// ans), answers ans (subscribed) on s and closes s, whose job is done. ctx
// bounds these writes (s.Context() is a fit).
//
// From then on the returned EventStream alone governs the subscription.
// Write its events under es.Context() (or a context derived from it) and
// end it with End. Never use s.Context() for them: a client is free to
// stop reading its control stream as soon as it read subscribed (this
// package's Client does), which cancels s.Context() while the
// subscription goes on; events written under it would be dropped and the
// subscription would look cleanly ended. es.Context() ends only when the
// client stops reading the event stream (it unsubscribed), the event
// stream is closed or aborted, or the connection closes.
func (s *Stream) StartSubscription(ctx context.Context, ans *felix.Subscribed) (*EventStream, error) {
	es, err := s.OpenEventStream(ctx, ans.SubscriptionID)
	if err != nil {
		return nil, err
	}
	if err := s.WriteMessage(ctx, ans); err != nil {
		es.Abort()
		return nil, err
	}
	s.Close()
	return es, nil
}

// End ends the event stream with the frame err stands for, then finishes
// it: nil or io.EOF is a clean end (FIN only); *felix.LaggedError is
// subscription_lagged (cache_watch_lagged for a watch) carrying this
// stream's subscription id and the error's resume offset; *felix.ShardMovedError
// is shard_moved; *felix.StreamDeletedError is stream_deleted; anything else is
// an error frame (ErrorAnswer). A client that did not offer what a
// terminal frame needs (FeatureSubscriptionLagged with flag 0x0020,
// FeatureShardMoved, FeatureStreamDeleted) gets the fallback the protocol
// allows instead: a lag becomes shard_moved with the resume offset when the
// client offered FeatureShardMoved, and otherwise each becomes the error
// frame of ErrorAnswer (code overloaded / shard_unavailable /
// not_found), so that a failed upstream never reaches a client as a clean
// end. When the frame cannot be written, the stream is aborted (a reset,
// not a clean end) and the write's error returned. ctx bounds the write.
func (e *EventStream) End(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return e.Close()
	}
	m := e.terminal(err)
	if werr := e.WriteMessage(ctx, m); werr != nil {
		e.Abort()
		return werr
	}
	return e.Close()
}

// terminal picks the last frame for err (see End).
func (e *EventStream) terminal(err error) felix.Message {
	var (
		lg *felix.LaggedError
		sm *felix.ShardMovedError
		sd *felix.StreamDeletedError
	)
	shardMoved := e.peer.Features.Has(felix.FeatureShardMoved)
	switch {
	case errors.As(err, &lg):
		if lg.Watch {
			return &felix.CacheWatchLagged{ResumeFrom: lg.ResumeFrom}
		}
		if e.peer.SubscriptionLagged() {
			return &felix.SubscriptionLagged{SubscriptionID: e.id, ResumeFrom: lg.ResumeFrom}
		}
		if shardMoved {
			return &felix.ShardMoved{SubscriptionID: e.id, ResumeFrom: felix.Some(lg.ResumeFrom)}
		}
	case errors.As(err, &sm):
		if shardMoved {
			m := &felix.ShardMoved{SubscriptionID: e.id, Generation: sm.Generation}
			if sm.HasResumeFrom {
				m.ResumeFrom = felix.Some(sm.ResumeFrom)
			}
			if sm.NodeID != "" {
				m.NodeID = felix.Some(sm.NodeID)
			}
			if sm.Addr != "" {
				m.Addr = felix.Some(sm.Addr)
			}
			return m
		}
	case errors.As(err, &sd):
		if e.peer.Features.Has(felix.FeatureStreamDeleted) {
			return &felix.StreamDeleted{SubscriptionID: e.id}
		}
	}
	return errorMessage(brokerAnswer(err))
}
