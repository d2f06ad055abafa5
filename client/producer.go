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
// A keyed batch is numbered in the space of the shard its key lands on,
// over the stream's shard count (asked once and kept). While that count
// is unknown (the stream does not exist yet, or the broker does not
// answer stream_shards) it is asked again before each keyed batch, and
// the batch goes to any broker under a sequence of the stream's own; once
// the count is known, the batches acknowledged meanwhile are accounted to
// the shards their keys land on and every later batch is routed to its
// shard's owner. That is exact when the batches sent while the count was
// unknown landed on one shard (a first batch that creates the stream).
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

// routeKey names a sequence space: a (stream, shard), the broker's own
// unit of sequences, or (unknown) the stream's space for keyed batches
// sent while its shard count is unknown.
type routeKey struct {
	shard   ownerKey
	unknown bool
}

// route is the sequence state of one (stream, shard).
type route struct {
	mu      sync.Mutex // held while a batch of the route is in flight
	next    uint64
	inDoubt *pending
	// landed (unknown route only) are the keys and sequences of the
	// batches acked while the shard count was unknown; settled: they were
	// accounted to their shards and the route is no longer used.
	landed  []landing
	settled bool
}

// landing is a batch acked while its stream's shard count was unknown.
type landing struct {
	key []byte
	seq uint64
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
	for {
		rk, err := p.routeOf(ctx, t, o.Key)
		if err != nil {
			return PublishResult{}, err
		}
		r, err := p.route(rk)
		if err != nil {
			return PublishResult{}, err
		}
		if res, ok, err := p.publishOn(ctx, rk, r, &pending{t: t, payloads: payloads, key: o.Key}); ok {
			return res, err
		}
		// The shard count was learnt while this call waited for the
		// route: route by it.
	}
}

// routeOf returns the sequence space of a batch with key on t: shard 0's
// for an unkeyed batch, the key's shard's once the stream's shard count
// is known (asked again while unknown: a stream created since has one),
// the stream's while-unknown space otherwise.
func (p *Producer) routeOf(ctx context.Context, t Topic, key []byte) (routeKey, error) {
	rk := routeKey{shard: ownerKey{kind: felix.ShardKindStream, tenant: t.TenantID, namespace: t.Namespace, name: t.Stream}}
	if key == nil {
		return rk, nil
	}
	info, ok := p.c.shardInfo(ctx, t)
	if !ok {
		rk.unknown = true
		return rk, nil
	}
	rk.shard.shard = info.routing.ShardOf(key, true, info.shards)
	return rk, p.settleUnknown(ctx, rk.shard, info)
}

// publishOn sends b on route r (its in-doubt batch first) under the next
// sequence; false when r was settled (no longer used) before its turn.
func (p *Producer) publishOn(ctx context.Context, rk routeKey, r *route, b *pending) (PublishResult, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.settled {
		return PublishResult{}, false, nil
	}
	if err := p.stoppedErr(); err != nil {
		return PublishResult{}, true, err
	}
	if d := r.inDoubt; d != nil {
		if _, err := p.send(ctx, rk, r, d); err != nil {
			return PublishResult{}, true, p.notSent(d, err)
		}
	}
	b.seq = r.next
	res, err := p.send(ctx, rk, r, b)
	return res, true, err
}

// notSent is the error of a call that could not settle the route's
// earlier batch d (err) and so did not send its own: not ErrAmbiguous,
// these payloads were not sent and the caller may pass them again.
func (p *Producer) notSent(d *pending, err error) error {
	cause := err
	var amb *AmbiguousError
	if errors.As(err, &amb) {
		cause = amb.Err
	}
	return fmt.Errorf("client: producer %d: batch not sent (no sequence taken): the earlier batch (sequence %d) is still in doubt: %w",
		p.id, d.seq, cause)
}

// settleUnknown accounts the keyed batches sent while the shard count of
// k's stream was unknown (now info) to the shards their keys land on, so
// that each shard's sequences go on from the last one it holds; a batch
// of that time still in doubt is settled first, under its sequence.
func (p *Producer) settleUnknown(ctx context.Context, k ownerKey, info shardInfo) error {
	uk := routeKey{shard: ownerKey{kind: k.kind, tenant: k.tenant, namespace: k.namespace, name: k.name}, unknown: true}
	p.mu.Lock()
	u := p.routes[uk]
	p.mu.Unlock()
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.settled {
		return nil
	}
	if d := u.inDoubt; d != nil {
		if _, err := p.send(ctx, uk, u, d); err != nil {
			return p.notSent(d, err)
		}
	}
	for _, l := range u.landed {
		sk := uk.shard
		sk.shard = info.routing.ShardOf(l.key, true, info.shards)
		r, err := p.route(routeKey{shard: sk})
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.next = max(r.next, l.seq+1)
		r.mu.Unlock()
	}
	u.settled, u.landed = true, nil
	p.mu.Lock()
	delete(p.routes, uk)
	p.mu.Unlock()
	return nil
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
func (p *Producer) send(ctx context.Context, rk routeKey, r *route, b *pending) (PublishResult, error) {
	var res PublishResult
	var addr string
	k := rk.shard
	key := &k
	if !p.c.clustered.Load() || rk.unknown {
		key = nil // any broker: the shard is not known
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
		if rk.unknown {
			r.landed = append(r.landed, landing{key: append([]byte(nil), b.key...), seq: b.seq})
		}
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
