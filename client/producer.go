package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// Producer is an idempotent producer with upstream's semantics: every
// batch carries the producer id and a sequence numbered per (stream,
// shard) from 0; the sequence advances only when the broker acknowledges
// a batch. A batch whose outcome is unknown (lost ack, lost connection,
// broker failover, outcome_unknown) is re-sent under the SAME sequence —
// on a new connection or another broker if need be — so the broker writes
// it once: a batch it already holds is answered from memory with the
// offset of its first write, which PublishBatch returns.
//
// A batch stays in doubt, holding its sequence, until the broker answers
// for it; no error frees it. When a call gives up on a batch in doubt (its
// context ended, the retry budget is spent, the client closed), it returns
// an *AmbiguousError (errors.Is(err, ErrAmbiguous)) naming the producer,
// the sequence and the real cause: the caller MUST NOT re-send those
// payloads, since the Producer re-sends the batch itself, same sequence,
// before the route's next batch (a call that cannot settle it first
// returns an error that is not ErrAmbiguous: its own payloads were not
// sent and may be passed again). Any other error means the batch was not
// written. A publish_refused other than not_leader (a sequence gap, an
// unknown producer, a reused sequence) stops the Producer: that call
// returns the *felix.PublishRefusedError and every later one an error
// matching ErrProducerStopped.
//
// A Producer is safe for concurrent use. Batches of one route (stream and
// shard) are sent one at a time, in the order the calls got the route: a
// call waits for the route's batch in flight, so it may block as long as
// that batch's own call (both bounded by their contexts and the client's
// retry budget); batches of different routes go in parallel.
type Producer struct {
	c  *Client
	id uint64

	mu      sync.Mutex
	routes  map[routeKey]*route
	stopped error
}

// routeKey names a sequence space: a (stream, shard), or a (stream, key)
// when the broker does not tell the stream's shard count (each key then
// numbers its own batches, exact when keys do not share a shard).
type routeKey struct {
	shard ownerKey
	key   string
	byKey bool
}

// route is the sequence state of one (stream, shard).
type route struct {
	mu      sync.Mutex // held while a batch of the route is in flight
	next    uint64
	inDoubt *pending
}

type pending struct {
	t        Topic
	payloads [][]byte
	key      []byte
	seq      uint64
	// doubt: an attempt may have written the batch (its answer was lost
	// or said outcome_unknown); only an ack or a refusal settles it.
	doubt bool
}

const opIdempotent = "publish_idempotent"

// NewProducer asks a broker for a producer id (producer_init; needs
// FeatureIdempotentProducer, else an error matching felix.ErrNotAdvertised).
func (c *Client) NewProducer(ctx context.Context) (*Producer, error) {
	var id uint64
	err := c.run(ctx, call{op: "producer_init", safe: true}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		p, err := cc.NewProducer(ctx)
		if err != nil {
			return err
		}
		id = p.ID()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Producer{c: c, id: id, routes: make(map[routeKey]*route)}, nil
}

// ID returns the broker-assigned producer id.
func (p *Producer) ID() uint64 { return p.id }

// PublishBatch publishes payloads as one idempotent batch with the next
// sequence of its (stream, shard), routed by o.Key like
// Client.PublishBatch, and returns the broker's answer. An idempotent
// batch is always acknowledged per batch: o.Ack is not consulted. See
// Producer for what an error means and for the re-send rules.
func (p *Producer) PublishBatch(ctx context.Context, t Topic, payloads [][]byte, o PublishOptions) (PublishResult, error) {
	if err := p.c.checkTopic("producer publish", t); err != nil {
		return PublishResult{}, err // nothing sent, no sequence taken
	}
	k := ownerKey{kind: felix.ShardKindStream, tenant: t.TenantID, namespace: t.Namespace, name: t.Stream}
	rk := routeKey{}
	if o.Key != nil {
		if info, ok := p.c.shardInfo(ctx, t); ok {
			k.shard = info.routing.ShardOf(o.Key, true, info.shards)
		} else {
			rk.key, rk.byKey = string(o.Key), true
		}
	}
	rk.shard = k
	r, err := p.route(rk)
	if err != nil {
		return PublishResult{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := p.stoppedErr(); err != nil {
		return PublishResult{}, err
	}
	if d := r.inDoubt; d != nil {
		if _, err := p.send(ctx, k, r, d); err != nil {
			// Not ErrAmbiguous: these payloads were not sent, the caller
			// may pass them again.
			cause := err
			var amb *AmbiguousError
			if errors.As(err, &amb) {
				cause = amb.Err
			}
			return PublishResult{}, fmt.Errorf("client: producer %d: batch not sent (no sequence taken): the earlier batch (sequence %d) is still in doubt: %w",
				p.id, d.seq, cause)
		}
	}
	return p.send(ctx, k, r, &pending{t: t, payloads: payloads, key: o.Key, seq: r.next})
}

// route returns the sequence state of rk, created on first use.
func (p *Producer) route(rk routeKey) (*route, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.stopped; err != nil {
		return nil, err
	}
	r := p.routes[rk]
	if r == nil {
		r = &route{}
		p.routes[rk] = r
	}
	return r, nil
}

func (p *Producer) stoppedErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

// send publishes b until the broker answers for it or the call gives up:
// an ack advances the sequence; a refusal stops the producer; an error
// after which b may have been written leaves b the route's in-doubt batch
// (same sequence) and is returned as an *AmbiguousError; any other error
// means b was not written.
func (p *Producer) send(ctx context.Context, k ownerKey, r *route, b *pending) (PublishResult, error) {
	var res PublishResult
	var addr string
	key := &k
	if !p.c.clustered.Load() {
		key = nil
	}
	err := p.c.run(ctx, call{op: opIdempotent, key: key, safe: true}, func(ctx context.Context, cc *conn.Client, br *broker) error {
		addr = br.addr
		rr, err := cc.PublishIdempotent(ctx, b.t, b.payloads, b.key, p.id, b.seq)
		if err != nil {
			if decide(err, false).act == actAmbiguous {
				// The table's ambiguous row for a write: it may have
				// been written.
				b.doubt = true
			}
			return err
		}
		if rr.HasOwner && key != nil {
			p.c.learnOwner(k, ownerHint{nodeID: rr.Owner.NodeID, addr: rr.Owner.Addr, gen: rr.Owner.Generation}, "ack owner from "+br.addr)
		}
		res = rr
		return nil
	})
	if err == nil {
		r.next = b.seq + 1
		r.inDoubt = nil
		return res, nil
	}
	var pr *felix.PublishRefusedError
	if errors.As(err, &pr) && pr.Reason != "not_leader" {
		p.mu.Lock()
		if p.stopped == nil {
			p.stopped = fmt.Errorf("%w: %w", ErrProducerStopped, err)
		}
		p.mu.Unlock()
		r.inDoubt = nil
		return PublishResult{}, err
	}
	if !b.doubt {
		// Every attempt was answered "not written" (or never sent): the
		// sequence stays free for the next batch.
		return PublishResult{}, fmt.Errorf("client: producer %d: batch (sequence %d) not written: %w", p.id, b.seq, err)
	}
	if r.inDoubt != b {
		// Kept for a re-send after this call returns: the caller may reuse
		// its buffers.
		own := &pending{t: b.t, seq: b.seq, doubt: true, payloads: make([][]byte, len(b.payloads))}
		for i, pl := range b.payloads {
			own.payloads[i] = append([]byte(nil), pl...)
		}
		if b.key != nil {
			own.key = append([]byte{}, b.key...)
		}
		r.inDoubt = own
	}
	return PublishResult{}, &AmbiguousError{Op: opIdempotent, Addr: addr, Producer: p.id, Sequence: b.seq, Err: err}
}
