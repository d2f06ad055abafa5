package felixtest

import (
	"slices"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/server"
)

// Request is a request a node received, as an Intercept function sees it.
type Request struct {
	// Node is the node that received it.
	Node int
	// Type is the request's message type ("subscribe", "stream_read",
	// "cache_put", ...); a binary publish frame is "publish_batch".
	Type string
	// Topic is the stream a publish, subscribe or stream_read names (zero
	// for other requests).
	Topic felix.Topic
	// Message is the decoded JSON request (nil for a binary publish
	// frame); the node serves this value: read it, do not change it.
	Message felix.Message
}

// Answer is the answer an Intercept function makes a node give instead of
// serving a request: an error with Code, Retry, Reason and RetryAfter
// (detail.retry_after_ms), or, built by NotLeader, a redirect. A publish
// is answered on its stream (publish_error or an error ack); any other
// request gets the error and its stream ends, as a broker's refusal ends
// it. An unacknowledged publish is dropped.
type Answer struct {
	// Code is the error code (e.g. felix.CodeOverloaded).
	Code felix.ErrorCode
	// Retry is the retry class; zero means the code's default class.
	Retry felix.RetryClass
	// Reason is the detail reason ("" for none).
	Reason string
	// RetryAfter is the suggested wait (0 for none).
	RetryAfter time.Duration
	// Message is the prose (a default naming the code when empty).
	Message string

	leader felix.BrokerEndpoint // NotLeader
}

// RetryAfter is the answer overloaded, retry class retry_after, asking the
// client to wait d before it retries: nothing was applied.
func RetryAfter(d time.Duration) *Answer {
	return &Answer{Code: felix.CodeOverloaded, Retry: felix.RetryAfter, RetryAfter: d}
}

// OutcomeUnknown is the answer quorum_timeout, retry class
// outcome_unknown: the request may or may not have been applied (the
// intercepted request is in fact not applied).
func OutcomeUnknown() *Answer {
	return &Answer{Code: felix.CodeQuorumTimeout, Retry: felix.RetryOutcomeUnknown}
}

// NotLeader is the answer not_leader naming node as the shard's owner: a
// redirect to it (publish_refused not_leader for an idempotent publish,
// an error ack naming the owner for another acknowledged publish).
func (c *Cluster) NotLeader(node int) *Answer {
	return &Answer{Code: felix.CodeNotLeader, leader: felix.BrokerEndpoint{NodeID: c.NodeID(node), Addr: c.Addr(node)}}
}

type hook struct {
	fn func(Request) *Answer
}

// Intercept makes fn see every request each node receives from now on
// (after the stream's authentication), before the node serves it. When fn
// returns nil the node serves the request; otherwise it answers with the
// Answer. fn runs on the node's goroutines, possibly concurrently, and
// must not block. Several functions run in the order they were added;
// the first answer wins. Remove stops fn; it is also removed when the
// test ends.
func (c *Cluster) Intercept(fn func(Request) *Answer) (remove func()) {
	h := &hook{fn: fn}
	c.mu.Lock()
	c.setHooks(append(c.loadHooks(), h))
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.setHooks(slices.DeleteFunc(c.loadHooks(), func(x *hook) bool { return x == h }))
	}
}

// intercept is the cluster's server.Config.Intercept for node i.
func (c *Cluster) intercept(i int, in server.Intercepted) *server.Interception {
	p := c.hooks.Load() // never modified once stored
	if p == nil || len(*p) == 0 {
		return nil
	}
	hooks := *p
	r := describe(i, in)
	for _, h := range hooks {
		if a := h.fn(r); a != nil {
			in := &server.Interception{Code: a.Code, Retry: a.Retry, Reason: a.Reason, Message: a.Message,
				RetryAfter: a.RetryAfter, Leader: a.leader}
			if a.leader.NodeID != "" && r.Topic.Stream != "" {
				// The shard's current generation: a client keeps the hint.
				_, in.Generation = c.cl.OwnerOf(engineTopic(r.Topic), 0)
			}
			return in
		}
	}
	return nil
}

// describe turns what the server read into a Request.
func describe(i int, in server.Intercepted) Request {
	r := Request{Node: i, Message: in.Request.Message}
	if in.Request.Flags != 0 {
		r.Type = "publish_batch"
		if v, err := felix.ParsePublishBatch(in.Request.Flags, in.Request.Payload); err == nil {
			r.Topic = felix.Topic{TenantID: string(v.TenantID), Namespace: string(v.Namespace), Stream: string(v.Stream)}
		}
		return r
	}
	if r.Message == nil {
		return r
	}
	r.Type = r.Message.MessageType()
	switch m := r.Message.(type) {
	case *felix.Publish:
		r.Topic = felix.Topic{TenantID: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
	case *felix.PublishBatchMessage:
		r.Topic = felix.Topic{TenantID: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
	case *felix.PublishIdempotent:
		r.Topic = felix.Topic{TenantID: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
	case *felix.Subscribe:
		r.Topic = felix.Topic{TenantID: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
	case *felix.StreamRead:
		r.Topic = felix.Topic{TenantID: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
	}
	return r
}

// loadHooks returns a copy of the hooks in force.
func (c *Cluster) loadHooks() []*hook {
	if p := c.hooks.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
}

// setHooks replaces the hooks (under c.mu).
func (c *Cluster) setHooks(hs []*hook) { c.hooks.Store(&hs) }
