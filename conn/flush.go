package conn

import (
	"context"
	"errors"

	"github.com/flxproto/felix"
)

// Flush waits until the broker has read every fire-and-forget publish
// (PublishOptions.NoAck) this client wrote before the call. On each
// publish stream that carried one since its last Flush it sends a
// stream_shards query for the stream last published to there and waits
// for the answer: a broker reads a stream's frames in order, so the
// answer comes after the publishes before it were read. Flush says
// nothing about whether they were accepted (a refused fire-and-forget
// batch is never reported; publish acknowledged for that). It needs
// felix.FeatureStreamShards on the publish stream (felix.ErrNotAdvertised
// otherwise). Close drains as well: it finishes the publish streams and
// waits, up to 2 s, for the broker to finish them.
func (c *Client) Flush(ctx context.Context) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	c.pubMu.Lock()
	pubs := append([]*pubStream(nil), c.pubs...)
	c.pubMu.Unlock()
	var errs []error
	for _, ps := range pubs {
		ps.flushMu.Lock()
		t, dirty := ps.unflushed, ps.dirty
		ps.dirty = false
		ps.flushMu.Unlock()
		if !dirty {
			continue
		}
		if err := ps.flush(ctx, t); err != nil {
			ps.flushMu.Lock()
			ps.dirty = true // still not known to be read
			ps.flushMu.Unlock()
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// flush sends a stream_shards query for t on ps and waits for any answer
// to it.
func (ps *pubStream) flush(ctx context.Context, t felix.Topic) error {
	if ps.dead() {
		return ps.stickyErr()
	}
	if !ps.caps.CanRequest("stream_shards") {
		return notAdvertised("flush needs stream_shards (" + felix.FeatureStreamShards.String() + ")")
	}
	// Any answer, an error message included, was sent after the frames
	// before the query were read.
	_, err := ps.request(ctx, func(id uint64) felix.Message {
		return &felix.StreamShards{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, RequestID: id}
	})
	return err
}
