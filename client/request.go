package client

import (
	"context"
	"fmt"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
)

// Request sends req, a one-answer client request, to the broker that
// serves it and returns its answer: it is the api.Requestor that the
// client's typed calls (CachePut, Commit, Group, StreamRead, ..., written
// once as api.Calls) are sent through, and the way to send any other
// request of felix.Requests() that has no typed call.
//
// A request routed to a stream shard (felix.RouteStreamShard) goes to the
// shard's leader when the client knows it (a keyed one is mapped to its
// shard over the stream's shard count, asked once and kept; once that
// count is known the stream's owners are asked once too, and owners from
// any shard_owners answer, the application's included, are kept), any
// broker otherwise; redirects are followed without being reported. Failures are
// judged by the client's decision table (docs/errors.md §9): a request
// felix.RequestFacts.Safe says may be re-sent is retried after a lost
// connection; one that is not returns an *AmbiguousError when its outcome
// is unknown. Names are checked first (*NameError, nothing sent). The
// answer and the errors are conn.Client.Request's.
func (c *Client) Request(ctx context.Context, req felix.Message) (felix.Message, error) {
	return c.request(ctx, req, nil)
}

// request sends req through the call loop, to pin only when it is set.
func (c *Client) request(ctx context.Context, req felix.Message, pin *broker) (ans felix.Message, err error) {
	cl, err := c.callFor(ctx, req, pin)
	if err != nil {
		return nil, err
	}
	// doubt: an earlier attempt may have been applied (its answer was
	// lost, or said outcome_unknown) and the call re-sent it (a safe one).
	var doubt error
	var addr string
	err = c.run(ctx, cl, func(ctx context.Context, cc *conn.Client, b *broker) error {
		var err error
		addr = b.addr
		ans, err = cc.Request(ctx, req)
		if err != nil && doubt == nil && decide(err, false).act == actAmbiguous {
			doubt = err
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := resentAnswer(req, ans, doubt, addr); err != nil {
		c.stats.ambiguous.Add(1)
		return nil, err
	}
	c.learnAnswer(req, ans)
	return ans, nil
}

// resentAnswer judges the answer to a request re-sent after an attempt
// that may have been applied (doubt, the failure that left it in doubt):
// the answer of a re-sent delete tells what the re-send found, not what
// the first attempt removed. A cache_delete that finds nothing after such
// an attempt cannot say whether the key was absent or the first attempt
// removed its value, so it is an *AmbiguousError instead of a definite
// "absent"; one that finds a value reports it (that value was there and
// is now removed).
func resentAnswer(req, ans felix.Message, doubt error, addr string) error {
	if doubt == nil {
		return nil
	}
	if _, ok := req.(*felix.CacheDelete); !ok {
		return nil
	}
	if cv, ok := ans.(*felix.CacheValue); ok && !cv.Value.Set {
		return &AmbiguousError{Op: req.MessageType(), Addr: addr, resent: true,
			Err: fmt.Errorf("the re-send found the key absent, but the first attempt (%w) may have removed a value: the key is gone now; the value it held, if any, is unknown", doubt)}
	}
	return nil
}

// At returns a Requestor that sends every request to the broker at addr
// only: retried there after a lost connection (with backoff, within
// Config.MaxAttempts, when the request is safe to re-send), never moved to
// another broker and never redirected: the same call loop as Request,
// pinned. For per-broker views: api.New(c.At(addr)).Subscriptions(...),
// ShardInspect(...).
func (c *Client) At(addr string) api.Requestor {
	return atBroker{c: c, b: c.addBroker(addr, "At")}
}

type atBroker struct {
	c *Client
	b *broker
}

// Request sends req to the broker of Client.At.
func (a atBroker) Request(ctx context.Context, req felix.Message) (felix.Message, error) {
	return a.c.request(ctx, req, a.b)
}

// callFor checks req's names and returns the call that sends it: its
// operation name, safety and route from the protocol's facts, or pin
// when it is set (a pinned call needs no route: finding a keyed
// request's shard could cost a stream_shards round trip).
func (c *Client) callFor(ctx context.Context, req felix.Message, pin *broker) (call, error) {
	typ := req.MessageType()
	facts, ok := felix.LookupRequest(typ)
	if !ok {
		return call{}, fmt.Errorf("%w: %q is not a client request", conn.ErrNotARequest, typ)
	}
	cl := call{op: typ, safe: facts.Safe, pin: pin}
	if t, ok := felix.RouteTargetOf(req); ok {
		if err := c.checkNames(typ, t.TenantID, t.Namespace, t.Name, t.Kind == felix.ShardKindCache); err != nil {
			return call{}, err
		}
		if facts.Route != felix.RouteAny && pin == nil {
			cl.key = c.keyOf(ctx, t)
			// A first call, before the client knew it talks to a
			// cluster, finds its key once a redirect shows it needs one,
			// so the owner it is sent to is remembered.
			cl.keyOf = func(ctx context.Context) *ownerKey { return c.keyOf(ctx, t) }
		}
	}
	return cl, nil
}

// keyOf is the owner key of the shard t names (nil on a standalone
// broker, or when a keyed request's stream has an unknown shard count:
// any broker then forwards or redirects it).
func (c *Client) keyOf(ctx context.Context, t felix.RouteTarget) *ownerKey {
	if !c.clustered.Load() {
		return nil
	}
	k := &ownerKey{kind: t.Kind, tenant: t.TenantID, namespace: t.Namespace, name: t.Name}
	switch {
	case t.Shard.Set:
		k.shard = t.Shard.V
	case t.Keyed:
		info, ok := c.shardInfo(ctx, Topic{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Name})
		if !ok {
			return nil
		}
		k.shard = info.routing.ShardOf(t.Key, true, info.shards)
	}
	return k
}

// learnAnswer keeps what an answer teaches the client about routing: a
// stream's shard count and routing (stream_shards) and the owners of a
// stream's or cache's shards (shard_owners), whoever asked for them (the
// client itself or the application through Request), so that the next
// request for a shard goes straight to its owner.
func (c *Client) learnAnswer(req, ans felix.Message) {
	switch v := ans.(type) {
	case *felix.StreamShardsView:
		if v.Shards == 0 {
			return
		}
		r, ok := req.(*felix.StreamShards)
		if !ok {
			return
		}
		c.mu.Lock()
		c.shards[Topic{TenantID: r.TenantID, Namespace: r.Namespace, Stream: r.Stream}] = shardInfo{shards: v.Shards, routing: v.Routing.V}
		c.mu.Unlock()
	case *felix.ShardOwnersView:
		r, ok := req.(*felix.ShardOwners)
		if !ok {
			return
		}
		c.learnOwners(ownerKey{kind: r.Kind, tenant: r.TenantID, namespace: r.Namespace, name: r.Name}, v.Owners, "shard_owners")
	}
}
