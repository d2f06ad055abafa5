package conn

import (
	"context"
	"iter"
	"slices"

	"github.com/flxproto/felix"
)

// This file moves batches without taking them apart: a subscription's
// event batches as they arrived (Subscription.NextFrame / NextBatch), an
// event stream that forwards them (EventStream.ForwardBatch), and publishes
// whose payloads are a sequence or a parsed batch (Client.PublishSeq,
// PublishView, PublishViewAsync), as a proxy needs (its answers to its own
// clients are PendingAnswer.Post, in answer.go).

// payloadSource is where the payloads of a publish come from when they are
// not a [][]byte (PublishOptions.src).
type payloadSource struct {
	seq  iter.Seq[[]byte]
	view *felix.PublishBatchView
}

// appendBatch encodes b with the payloads of src (b.Payloads when nil).
func appendBatch(dst []byte, b *felix.PublishBatch, src *payloadSource) ([]byte, error) {
	switch {
	case src == nil:
		return felix.AppendPublishBatch(dst, b)
	case src.view != nil:
		return felix.AppendPublishBatchView(dst, b, src.view)
	}
	return felix.AppendPublishBatchSeq(dst, b, src.seq)
}

// collect materialises src for the JSON forms.
func (src *payloadSource) collect() [][]byte {
	if src.view != nil {
		return slices.Collect(src.view.Payloads())
	}
	return slices.Collect(src.seq)
}

// PublishSeq publishes the payloads of a sequence as one batch, like
// PublishBatch, without a [][]byte. For the binary encoding payloads is
// iterated twice (to size the frame, then to write it) and must yield the
// same payloads both times, as the Payloads of a felix.PublishBatchView or
// felix.EventBatchView do; the JSON forms collect it first. payloads may be
// reused once PublishSeq returns.
func (c *Client) PublishSeq(ctx context.Context, t felix.Topic, payloads iter.Seq[[]byte], o PublishOptions) (felix.PublishResult, error) {
	o.src = &payloadSource{seq: payloads}
	return c.PublishBatch(ctx, t, nil, o)
}

// PublishView publishes the payloads of a parsed batch (for example a
// publish a proxy read with Stream.ReadRequest and felix.ParsePublishBatch)
// to t as one batch, like PublishBatch. Only the payloads are taken from v:
// t, o.Ack and o.Key address and mark the new batch. In the binary encoding
// the payload section of v is copied as one block, without per-payload
// work or allocation; the JSON forms collect the payloads first. v must
// stay valid until PublishView returns.
func (c *Client) PublishView(ctx context.Context, t felix.Topic, v *felix.PublishBatchView, o PublishOptions) (felix.PublishResult, error) {
	o.src = &payloadSource{view: v}
	return c.PublishBatch(ctx, t, nil, o)
}

// PublishViewAsync is PublishView without waiting for the answer, as
// PublishBatchAsync: it returns once the frame is written (v may then be
// released, e.g. by the next ReadRequest), and done gets the answer. done
// must not block; PendingAnswer.Post can be called from it.
func (c *Client) PublishViewAsync(ctx context.Context, t felix.Topic, v *felix.PublishBatchView, o PublishOptions, done func(felix.PublishResult, error)) error {
	o.src = &payloadSource{view: v}
	return c.PublishBatchAsync(ctx, t, nil, o, done)
}

// NextFrame returns the next event batch of the subscription as it
// arrived, header excluded: its flags and payload, validated (a
// felix.EventBatchView of it is what NextBatch returns), for forwarding
// without decoding it (EventStream.ForwardBatch). A JSON event or
// event_batch (from a broker that sends no binary batches) and the events
// of a frame that Next had partly returned are encoded anew as a shared
// batch. The payload is valid until the next Next, NextFrame or NextBatch
// call (the frame buffer is recycled), unless SubscribeOptions.Payloads is
// PayloadsOwned. The end
// of the subscription and the errors are Next's: io.EOF, *felix.LaggedError,
// *felix.ShardMovedError, ... Next, NextFrame and NextBatch read one stream and
// are not safe for concurrent use.
func (s *Subscription) NextFrame(ctx context.Context) (felix.Frame, error) {
	es := s.es
	if es.pending {
		es.events = es.rest()
	}
	if len(es.events) == 0 {
		f, batch, err := es.read(ctx)
		if err != nil {
			return felix.Frame{}, err
		}
		if batch {
			return f, nil
		}
	}
	evs := es.events
	es.events = nil
	return s.encodeEvents(evs)
}

// NextBatch returns the next event batch as a zero-copy view: its payloads,
// offsets, publisher, timestamps and skipped count, aliasing the frame NextFrame
// would return. The view is owned by the subscription and valid until the
// next Next, NextFrame or NextBatch call; its payloads as NextFrame's.
func (s *Subscription) NextBatch(ctx context.Context) (*felix.EventBatchView, error) {
	if _, err := s.NextFrame(ctx); err != nil {
		return nil, err
	}
	return &s.es.view, nil
}

// encodeEvents encodes evs (the events of one frame) as a shared batch
// and parses it into the view NextBatch returns.
func (s *Subscription) encodeEvents(evs []Event) (felix.Frame, error) {
	var b felix.EventBatch
	if len(evs) > 0 {
		e0 := evs[0]
		b = felix.EventBatch{HasBaseOffset: e0.HasOffset, BaseOffset: e0.Offset, SkippedBefore: e0.SkippedBefore,
			HasPublisher: e0.Publisher != nil, Publisher: e0.Publisher, HasTimestamps: e0.HasTimestamp}
	}
	for _, e := range evs {
		b.Payloads = append(b.Payloads, e.Payload)
		if b.HasTimestamps {
			b.Timestamps = append(b.Timestamps, e.TimestampMicros)
		}
	}
	fr, err := felix.AppendEventBatch(nil, &b, felix.EventModifierMask)
	if err != nil {
		return felix.Frame{}, err
	}
	h, err := felix.ParseHeader(fr)
	if err != nil {
		return felix.Frame{}, err
	}
	f := felix.Frame{Header: h, Payload: fr[felix.HeaderLen:]}
	if s.es.view, err = felix.ParseEventBatch(f.Flags, f.Payload); err != nil {
		return felix.Frame{}, err
	}
	return f, nil
}

// ForwardBatch writes an event batch frame received elsewhere (a
// Subscription's NextFrame) to this stream's client: as it is, header
// rebuilt and payload copied once into the frame, when the client accepts
// its flag bits and it is a shared (0x0004) batch; otherwise it is
// re-encoded with the modifiers the client accepted (a legacy 0x0002 batch
// carries this stream's subscription id). A client that takes no binary
// event batch at all is refused with felix.ErrNotAdvertised. ctx bounds the write
// (see EventStream).
func (e *EventStream) ForwardBatch(ctx context.Context, f felix.Frame) error {
	if f.Flags.Layout() != felix.LayoutEventBatch {
		return notAdvertised("ForwardBatch of a non-event frame " + f.Flags.String())
	}
	if !f.Flags.Has(felix.FlagBinaryEventBatch) && checkFlags(f.Flags, e.peer) == nil {
		return writeErr("write event", e.w.writeFrame(ctx, f.Flags, f.Payload))
	}
	v, err := felix.ParseEventBatch(f.Flags, f.Payload)
	if err != nil {
		return err
	}
	return e.WriteBatch(ctx, &v)
}

// WriteBatch encodes the batch v for this stream's client (the modifiers
// it accepted; the legacy layout with this stream's subscription id for a
// client that offered only 0x0002) and writes it. ForwardBatch uses it
// when a frame cannot go as it is. ctx bounds the write.
func (e *EventStream) WriteBatch(ctx context.Context, v *felix.EventBatchView) error {
	b := felix.EventBatch{HasBaseOffset: v.HasBaseOffset(), BaseOffset: v.BaseOffset, SkippedBefore: v.SkippedBefore,
		HasPublisher: v.HasPublisher(), Publisher: v.Publisher, HasTimestamps: v.HasTimestamps(), Payloads: make([][]byte, 0, v.Len())}
	for ev := range v.Events() {
		b.Payloads = append(b.Payloads, ev.Payload)
		if b.HasTimestamps {
			b.Timestamps = append(b.Timestamps, ev.TimestampMicros)
		}
	}
	switch {
	case e.peer.Flags.Has(felix.FlagBinaryEventBatchShared):
	case e.peer.Flags.Has(felix.FlagBinaryEventBatch):
		b.Legacy, b.SubscriptionID = true, e.id
	default:
		return notAdvertised("binary event batches to a client that offered neither 0x0004 nor 0x0002")
	}
	return writeErr("write event", e.w.encode(ctx, func(dst []byte) ([]byte, error) {
		return felix.AppendEventBatch(dst, &b, e.peer.EventFlags())
	}))
}
