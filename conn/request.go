package conn

import (
	"context"
	"errors"
	"fmt"

	"github.com/flxproto/felix"
)

// ErrNotARequest: Request was given a message that is not a one-answer
// client request: a broker → client type, an unknown type (send those
// with RawRequest), or a request this package serves with a primitive of
// its own (auth is the handshake; publish, publish_idempotent and
// producer_init go through Publish and NewProducer; subscribe and
// cache_watch start event streams with Subscribe and Watch).
var ErrNotARequest = errors.New("conn: not a one-answer request")

// streamed are the requests Request refuses: each has a primitive of its
// own that keeps the stream it opens.
var streamed = map[string]string{
	"auth":               "the handshake (Dial)",
	"publish":            "Publish or PublishBatch",
	"publish_idempotent": "NewProducer",
	"producer_init":      "NewProducer",
	"subscribe":          "Subscribe",
	"cache_watch":        "Watch",
}

// pipelined are the requests sent over the shared cache streams (answered
// by request id, many in flight per stream, as upstream's client sends
// them); every other request goes on a stream of its own (the protocol
// answers it on the stream it came on, and not_leader carries no request
// id).
var pipelined = map[string]bool{
	"cache_put": true, "cache_get": true, "cache_delete": true, "cache_put_if": true, "cache_delete_if": true,
	"counter_add": true, "counter_get": true,
}

// Request sends req, a one-answer client request (any type
// felix.LookupRequest knows except those in ErrNotARequest), and returns
// the broker's answer: one of the success types the request's facts list
// (felix.RequestFacts.Answers). Request sets req's request id (do not share
// req between concurrent calls). Nothing is sent, and the error is
// felix.ErrNotAdvertised, when the broker did not advertise the request's
// feature or the feature of a member req sets
// (felix.Capabilities.Unadvertised). A failure answer is returned as its
// typed error: *felix.BrokerError (error, publish_error), *felix.NotLeaderError,
// *felix.PublishRefusedError, *felix.CursorError, felix.ErrNotAdvertised (unsupported); any
// other answer is an felix.ErrProtocol error. It is the Requestor that the typed
// calls of package api are written over.
func (c *Client) Request(ctx context.Context, req felix.Message) (felix.Message, error) {
	typ := req.MessageType()
	facts, ok := felix.LookupRequest(typ)
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a client request (RawRequest sends any message)", ErrNotARequest, typ)
	}
	if use, ok := streamed[typ]; ok {
		return nil, fmt.Errorf("%w: %s keeps a stream open: use %s", ErrNotARequest, typ, use)
	}
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	if what := c.caps.Unadvertised(req); what != "" {
		return nil, notAdvertised(what)
	}
	var ans felix.Message
	var err error
	if pipelined[typ] {
		ans, err = c.cacheRequest(ctx, req)
	} else {
		ans, err = c.ownStream(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	return checkAnswer(facts, req, ans)
}

// ownStream sends req on a stream of its own and returns its answer.
func (c *Client) ownStream(ctx context.Context, req felix.Message) (felix.Message, error) {
	felix.SetRequestID(req, c.nextID())
	cs, err := c.openStream(ctx)
	if err != nil {
		return nil, err
	}
	if what := cs.caps.Unadvertised(req); what != "" {
		cs.abort()
		return nil, notAdvertised(what)
	}
	return cs.oneShot(ctx, req)
}

// checkAnswer returns ans when it is a success answer of the request
// (with the request's id, when both carry one), else the error it is.
func checkAnswer(facts felix.RequestFacts, req, ans felix.Message) (felix.Message, error) {
	rid, sent := felix.RequestIDOf(req)
	switch ans.(type) {
	case *felix.ErrorMessage, *felix.PublishError, *felix.PublishRefused, *felix.NotLeader,
		*felix.SubscribeCursorError, *felix.Unsupported:
		return nil, answerError(ans, rid)
	}
	if !answers(facts, ans.MessageType()) {
		return nil, protocolErr("%s answered with %q", facts.Type, ans.MessageType())
	}
	if got, ok := felix.RequestIDOf(ans); ok && sent && got != rid {
		return nil, protocolErr("%s %d answered by %s for request %d", facts.Type, rid, ans.MessageType(), got)
	}
	return ans, nil
}

// answers says whether typ is one of the request's answers.
func answers(facts felix.RequestFacts, typ string) bool {
	for a := range facts.Answers() {
		if a == typ {
			return true
		}
	}
	return false
}

func (c *Client) nextID() uint64 { return c.reqID.Add(1) }
