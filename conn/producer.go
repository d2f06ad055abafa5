package conn

import (
	"context"
	"sync"

	"github.com/flxproto/felix"
)

// Idempotent publishing: a Producer numbers its batches per route, and
// PublishIdempotent sends a batch under a sequence the caller keeps.

// Producer is an idempotent producer (FeatureIdempotentProducer, or binary
// flag 0x0100): every batch carries the producer id and a sequence, so the
// broker can refuse a duplicate or a gap (a *felix.PublishRefusedError).
//
// Brokers keep sequence state per producer and shard, starting at 0. A
// Producer numbers the batches of each (topic, key) route separately,
// 0, 1, 2, ...: exact for unkeyed publishes (shard 0) and for keys that each
// own their shard; when two keys of one Producer hash to the same shard,
// use one Producer per key. Batches of one route are written in sequence
// order even when PublishBatch is called concurrently. A Producer is bound
// to the publish stream it was created on; once that stream fails, create
// a new Producer.
type Producer struct {
	c  *Client
	ps *pubStream
	id uint64
	mu sync.Mutex
	nx map[producerRoute]uint64
}

type producerRoute struct {
	t   felix.Topic
	key string
	has bool
}

// NewProducer asks the broker for a producer id (producer_init). It needs
// FeatureIdempotentProducer; without it felix.ErrNotAdvertised is returned.
func (c *Client) NewProducer(ctx context.Context) (*Producer, error) {
	ps, err := c.pubStream(ctx)
	if err != nil {
		return nil, err
	}
	if what := ps.caps.Unadvertised(producerInit(0)); what != "" { // the request table's gate
		return nil, notAdvertised(what)
	}
	ans, err := ps.request(ctx, func(id uint64) felix.Message { return producerInit(id) })
	if err != nil {
		return nil, err
	}
	pid, ok := producerID(ans)
	if !ok {
		return nil, answerError(ans, 0)
	}
	return &Producer{c: c, ps: ps, id: pid, nx: make(map[producerRoute]uint64)}, nil
}

// ID returns the broker-assigned producer id.
func (p *Producer) ID() uint64 { return p.id }

// PublishBatch publishes records with the route's next sequence (always
// acked per batch). Binary flag 0x0100 is used when advertised, else JSON
// publish_idempotent. A batch that fails before it is written does not
// consume its sequence.
func (p *Producer) PublishBatch(ctx context.Context, t felix.Topic, payloads [][]byte, key []byte) (felix.PublishResult, error) {
	route := producerRoute{t: t, key: string(key), has: key != nil}
	p.mu.Lock()
	seq := p.nx[route]
	pa, rid, err := p.ps.send(ctx, t, payloads, PublishOptions{Ack: felix.AckPerBatch, Key: key}, &idem{producer: p.id, seq: seq}, nil)
	if err == nil {
		p.nx[route] = seq + 1
	}
	p.mu.Unlock()
	if err != nil {
		return felix.PublishResult{}, err
	}
	select {
	case a := <-pa.ch:
		return publishResult(rid, a)
	case <-ctx.Done():
		return felix.PublishResult{}, ctx.Err()
	}
}

type idem struct{ producer, seq uint64 }

// PublishIdempotent publishes one idempotent batch under a caller-chosen
// producer id and sequence (always acked per batch). It is the building
// block of a producer that re-sends an in-doubt batch under the SAME
// sequence, possibly on another connection; Producer numbers batches
// itself instead. Binary flag 0x0100 is used when advertised, else JSON
// publish_idempotent; felix.ErrNotAdvertised when neither is.
func (c *Client) PublishIdempotent(ctx context.Context, t felix.Topic, payloads [][]byte, key []byte, producerID, sequence uint64) (felix.PublishResult, error) {
	ps, err := c.pubStream(ctx)
	if err != nil {
		return felix.PublishResult{}, err
	}
	return ps.publish(ctx, t, payloads, PublishOptions{Ack: felix.AckPerBatch, Key: key}, &idem{producer: producerID, seq: sequence})
}
