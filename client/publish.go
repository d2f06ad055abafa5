package client

import (
	"context"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// PublishResult is the broker's answer to an acked publish: the offset of
// the batch's first record when the broker said (HasOffset), and the shard
// owner it was forwarded to (HasOwner).
type PublishResult = felix.PublishResult

// PublishOptions selects how a publish is acknowledged and routed.
type PublishOptions struct {
	// Ack is the mode of an acknowledged publish: felix.AckPerBatch (what
	// the zero value means) or felix.AckPerMessage. The call returns after
	// the broker's answer either way, and the broker answers once per
	// batch, for every record of it, whatever the mode: a client sees no
	// difference between the two (docs/client-and-broker-notes.md, note
	// 13). PublishResult.Offset is the first record's offset; record i is
	// at Offset+i.
	Ack felix.AckMode
	// NoAck publishes fire-and-forget: the call returns once the batch is
	// written to the connection, with no broker round trip, and a refusal
	// is never seen. It must be asked for: the zero PublishOptions is
	// acknowledged. Leave Ack zero with it. Flush waits until the brokers
	// read what was written this way; Close drains it too.
	NoAck bool
	// Key is the routing key of every record (nil: unkeyed, shard 0).
	Key []byte
}

// Publish publishes one record; see PublishBatch.
func (c *Client) Publish(ctx context.Context, t Topic, payload []byte, o PublishOptions) (PublishResult, error) {
	p := [1][]byte{payload}
	return c.PublishBatch(ctx, t, p[:], o)
}

// PublishBatch publishes records as one batch, to the shard owner when the
// client knows it (learnt from redirects, forwarded acks and shard_owners)
// or else to any broker, which forwards it.
//
// A failure is retried only when nothing can have been applied: a failed
// dial, a redirect (followed, never reported), or a broker answer of retry
// class retry / retry_after (after a backoff honouring retry_after_ms).
// Terminal answers (fatal class: forbidden, invalid request, ...) are
// returned at once as *felix.BrokerError. When the batch may have been
// applied — the broker answered outcome_unknown, or the connection was
// lost after the batch was written — it is NOT re-sent: the call returns an
// *AmbiguousError (errors.Is(err, ErrAmbiguous)). Use
// PublishBatchMayDuplicate to re-send anyway, or a Producer for re-sends
// without duplicates.
func (c *Client) PublishBatch(ctx context.Context, t Topic, payloads [][]byte, o PublishOptions) (PublishResult, error) {
	return c.publish(ctx, t, payloads, o, false)
}

// PublishBatchMayDuplicate is PublishBatch with at-least-once delivery: a
// batch whose outcome is unknown (lost ack, lost connection,
// outcome_unknown) is RE-SENT, so it MAY BE WRITTEN TWICE. Use it only when
// consumers tolerate duplicates; prefer an idempotent Producer otherwise.
func (c *Client) PublishBatchMayDuplicate(ctx context.Context, t Topic, payloads [][]byte, o PublishOptions) (PublishResult, error) {
	o.NoAck = false // re-sending needs an answer to wait for
	return c.publish(ctx, t, payloads, o, true)
}

func (c *Client) publish(ctx context.Context, t Topic, payloads [][]byte, o PublishOptions, dup bool) (PublishResult, error) {
	if err := c.checkTopic("publish", t); err != nil {
		return PublishResult{}, err
	}
	pub := func(ctx context.Context, cc *conn.Client, b *broker, key *ownerKey) (PublishResult, error) {
		r, err := cc.PublishBatch(ctx, t, payloads, conn.PublishOptions{Ack: o.Ack, NoAck: o.NoAck, Key: o.Key})
		if err == nil && r.HasOwner {
			if key == nil {
				// A first call, before the client knew it talks to a
				// cluster: the owner is still worth keeping.
				key = c.streamKey(ctx, t, o.Key)
			}
			if key != nil {
				c.learnOwner(*key, ownerHint{nodeID: r.Owner.NodeID, addr: r.Owner.Addr, gen: r.Owner.Generation}, "ack owner from "+b.addr)
			}
		}
		return r, err
	}
	c.stats.inFlight.Add(1)
	defer c.stats.inFlight.Add(-1)
	var first *outcome
	// Fast path: one live connection, no routing (a standalone broker). A
	// failure goes to the retry loop as its first attempt.
	if !c.clustered.Load() {
		if b := c.home.Load(); b != nil {
			b.mu.Lock()
			cc := b.cc
			b.mu.Unlock()
			if cc != nil && cc.Context().Err() == nil {
				res, err := pub(ctx, cc, b, nil)
				if err == nil {
					c.stats.published(o)
					return res, nil
				}
				first = &outcome{b: b, cc: cc, err: err}
			}
		}
	}
	key := c.streamKey(ctx, t, o.Key)
	if first != nil {
		key = nil // the fast path's call had no routing either
	}
	var res PublishResult
	cl := call{op: "publish", key: key, safe: dup}
	if key == nil && first == nil {
		cl.keyOf = func(ctx context.Context) *ownerKey { return c.streamKey(ctx, t, o.Key) }
	}
	err := c.runFrom(ctx, cl, func(ctx context.Context, cc *conn.Client, b *broker) error {
		r, err := pub(ctx, cc, b, key)
		if err == nil {
			res = r
		}
		return err
	}, first)
	if err == nil {
		c.stats.published(o)
	}
	return res, err
}
