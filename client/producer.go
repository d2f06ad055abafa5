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
// shard) from 0; the sequence advances only when a batch is acknowledged.
// A batch whose outcome is unknown (lost ack, lost connection, broker
// failover, outcome_unknown) is re-sent under the SAME sequence — on a new
// connection or another broker if need be — so the broker writes it once:
// a batch it already holds is answered from memory with the offset of its
// first write, which PublishBatch returns. A batch still in doubt when the
// call gives up (context, retry budget) is re-sent, same sequence, before
// the route's next batch. A publish_refused other than not_leader (a
// sequence gap, an unknown producer, a reused sequence) stops the
// Producer: that call returns the *conn.PublishRefusedError and every
// later one an error matching ErrProducerStopped.
//
// Batches of one route are sent one at a time, in call order.
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
}

const opIdempotent = "publish_idempotent"

// NewProducer asks a broker for a producer id (producer_init; needs
// FeatureIdempotentProducer, else an error matching conn.ErrNotAdvertised).
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

// PublishBatch publishes records as one idempotent batch (acked per
// batch) with the next sequence of its (stream, shard) and returns the
// broker's answer; see Producer for the re-send rules.
func (p *Producer) PublishBatch(ctx context.Context, t Topic, payloads [][]byte, key []byte) (PublishResult, error) {
	k := ownerKey{kind: felix.ShardKindStream, tenant: t.TenantID, namespace: t.Namespace, name: t.Stream}
	rk := routeKey{}
	if key != nil {
		if info, ok := p.c.shardInfo(ctx, t); ok {
			k.shard = info.routing.ShardOf(key, true, info.shards)
		} else {
			rk.key, rk.byKey = string(key), true
		}
	}
	rk.shard = k
	p.mu.Lock()
	if err := p.stopped; err != nil {
		p.mu.Unlock()
		return PublishResult{}, err
	}
	r := p.routes[rk]
	if r == nil {
		r = &route{}
		p.routes[rk] = r
	}
	p.mu.Unlock()

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inDoubt != nil {
		if _, err := p.send(ctx, k, r, r.inDoubt); err != nil {
			return PublishResult{}, fmt.Errorf("client: earlier batch (sequence %d) still in doubt: %w", r.inDoubt.seq, err)
		}
	}
	return p.send(ctx, k, r, &pending{t: t, payloads: payloads, key: key, seq: r.next})
}

// send publishes b until it is answered: the sequence advances on an ack;
// a refusal stops the producer; when the call gives up in doubt, b stays
// the route's in-doubt batch.
func (p *Producer) send(ctx context.Context, k ownerKey, r *route, b *pending) (PublishResult, error) {
	var res PublishResult
	key := &k
	if !p.c.clustered.Load() {
		key = nil
	}
	err := p.c.run(ctx, call{op: opIdempotent, key: key, safe: true}, func(ctx context.Context, cc *conn.Client, br *broker) error {
		rr, err := cc.PublishIdempotent(ctx, b.t, b.payloads, b.key, p.id, b.seq)
		if err != nil {
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
	var pr *conn.PublishRefusedError
	if errors.As(err, &pr) {
		p.mu.Lock()
		if p.stopped == nil {
			p.stopped = fmt.Errorf("%w: %w", ErrProducerStopped, err)
		}
		p.mu.Unlock()
		r.inDoubt = nil
		return PublishResult{}, err
	}
	if RetryClassOf(err) == felix.RetryFatal && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrClosed) {
		// Refused outright (forbidden, invalid, ...): nothing written.
		r.inDoubt = nil
		return PublishResult{}, err
	}
	if r.inDoubt != b {
		// Kept for a re-send after this call returns: the caller may reuse
		// its buffers.
		own := &pending{t: b.t, seq: b.seq, payloads: make([][]byte, len(b.payloads))}
		for i, pl := range b.payloads {
			own.payloads[i] = append([]byte(nil), pl...)
		}
		if b.key != nil {
			own.key = append([]byte{}, b.key...)
		}
		r.inDoubt = own
	}
	return PublishResult{}, err
}
