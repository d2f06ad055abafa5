package conn

import (
	"context"
	"net"

	"github.com/flxproto/felix"
)

// This file holds what a cluster-aware client builds on besides the
// inspection calls: the idempotent publish with a caller-chosen sequence,
// a liveness probe and the broker's address.

// RemoteAddr returns the broker's UDP address.
func (c *Client) RemoteAddr() net.Addr { return c.qc.RemoteAddr() }

// Probe opens and authenticates a fresh stream, then finishes it: nil when
// the broker still takes new streams. A draining broker answers the auth
// with a *BrokerError (code draining); a lost connection gives a
// *TransportError.
func (c *Client) Probe(ctx context.Context) error {
	cs, err := c.openStream(ctx)
	if err != nil {
		return err
	}
	cs.s.Close()
	cs.s.CancelRead(0)
	return nil
}

// PublishIdempotent publishes one idempotent batch under a caller-chosen
// producer id and sequence (always acked per batch). It is the building
// block of a producer that re-sends an in-doubt batch under the SAME
// sequence, possibly on another connection; Producer numbers batches
// itself instead. Binary flag 0x0100 is used when advertised, else JSON
// publish_idempotent; ErrNotAdvertised when neither is.
func (c *Client) PublishIdempotent(ctx context.Context, t Topic, payloads [][]byte, key []byte, producerID, sequence uint64) (PublishResult, error) {
	ps, err := c.pubStream(ctx)
	if err != nil {
		return PublishResult{}, err
	}
	return ps.publish(ctx, t, payloads, PublishOptions{Ack: felix.AckPerBatch, Key: key}, &idem{producer: producerID, seq: sequence})
}
