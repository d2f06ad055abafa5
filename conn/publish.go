package conn

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/flxproto/felix"
)

// PublishOptions selects how a publish is sent and answered.
type PublishOptions struct {
	// Ack selects the mode of an acknowledged publish: felix.AckPerBatch
	// (also what the zero value, felix.AckNone, means unless NoAck is set)
	// or felix.AckPerMessage. A client sees no difference between the two:
	// the mode is carried to the broker, which answers one ack per request
	// frame whatever the mode, covering every record of the batch
	// (docs/client-and-broker-notes.md, note 13).
	Ack felix.AckMode
	// NoAck publishes fire-and-forget: the call returns once the frame is
	// written, without a broker round trip, and a refusal is never seen
	// (the broker drops the batch or resets the stream). It must be asked
	// for: the zero PublishOptions is acknowledged. Ack must be left
	// AckNone with it.
	NoAck bool
	// Key is the routing key shared by every record; nil means unkeyed
	// (shard 0). An empty non-nil key is a real key. Keyed publishes need
	// flag 0x0040 for the binary form and fall back to JSON otherwise.
	Key []byte

	src *payloadSource // payloads of PublishSeq / PublishView (batch.go)
}

// check refuses an unknown ack mode and NoAck with an ack mode.
func (o *PublishOptions) check() error {
	switch {
	case o.Ack > felix.AckPerBatch:
		return &felix.Error{Class: felix.ErrInvalidValue, Layout: "publish", Field: "ack", Offset: -1, Detail: "unknown ack mode"}
	case o.NoAck && o.Ack != felix.AckNone:
		return &felix.Error{Class: felix.ErrInvalidValue, Layout: "publish", Field: "ack", Offset: -1, Detail: "NoAck with ack mode " + o.Ack.String()}
	}
	return nil
}

// Publish publishes one record; see PublishBatch.
func (c *Client) Publish(ctx context.Context, t felix.Topic, payload []byte, o PublishOptions) (felix.PublishResult, error) {
	p := [1][]byte{payload}
	return c.PublishBatch(ctx, t, p[:], o)
}

// PublishBatch publishes records as one batch. A fire-and-forget publish
// (NoAck) returns once the frame is written. An acked publish (the
// default) waits for the broker's answer: nil and the result on success,
// a *felix.BrokerError for a publish_error or failed ack. Acked publishes are
// pipelined: up to the granted publish_window (DefaultPipelineDepth
// without a grant) may be unanswered on a stream at once, and answers are
// matched by request_id. A batch whose frame would exceed
// Config.MaxFrameBytes is refused before sending (*felix.FrameLimitError).
//
// The encoding follows what the broker advertised on the publish stream:
// binary batches when it advertised the needed bits (0x0008 acked, 0x0040
// keyed), else the JSON publish / publish_batch forms (always with Config.
// ForceJSON). Cancelling ctx abandons the wait; a frame already written
// stays written and its answer is discarded.
func (c *Client) PublishBatch(ctx context.Context, t felix.Topic, payloads [][]byte, o PublishOptions) (felix.PublishResult, error) {
	if err := o.check(); err != nil {
		return felix.PublishResult{}, err
	}
	ps, err := c.pubStream(ctx)
	if err != nil {
		return felix.PublishResult{}, err
	}
	return ps.publish(ctx, t, payloads, o, nil)
}

// PublishBatchAsync sends records as one batch like PublishBatch but does
// not wait for the answer: it returns once the frame is written (after
// waiting for a publish window slot when the publish is acked), and done is
// then called exactly once with the result. For a fire-and-forget publish
// done is called before PublishBatchAsync returns. done runs on a goroutine
// of the client (normally the publish stream's reader) and must not block;
// it is also called, with an error, when the stream or the client closes
// before the answer. ctx bounds only the
// wait for a slot and the write; an error from them is returned and done is
// not called. payloads may be reused once PublishBatchAsync returns.
//
// One goroutine can keep a whole publish window in flight this way, which
// is what the pipelined throughput benchmark does.
func (c *Client) PublishBatchAsync(ctx context.Context, t felix.Topic, payloads [][]byte, o PublishOptions, done func(felix.PublishResult, error)) error {
	if err := o.check(); err != nil {
		return err
	}
	ps, err := c.pubStream(ctx)
	if err != nil {
		return err
	}
	cb := func(rid uint64, a answer) { done(publishResult(rid, a)) }
	pa, _, err := ps.send(ctx, t, payloads, o, nil, cb)
	if err != nil {
		return err
	}
	if pa == nil {
		done(felix.PublishResult{}, nil)
	}
	return nil
}

// pubStream returns a live publish stream, round-robin, replacing one that
// ended.
func (c *Client) pubStream(ctx context.Context) (*pubStream, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	i := int(c.pubNext.Add(1)) % c.cfg.PublishStreams
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	if i < len(c.pubs) && !c.pubs[i].dead() {
		return c.pubs[i], nil
	}
	ps, err := c.openPubStream(ctx)
	if err != nil {
		return nil, err
	}
	if c.window != nil && !ps.caps.PerStreamWindow() && ps.caps.PublishWindow > 0 {
		ps.window = c.window
	}
	if i < len(c.pubs) {
		c.pubs[i] = ps
	} else {
		c.pubs = append(c.pubs, ps)
	}
	return ps, nil
}

// pubStream is a long-lived publish stream with its answer reader.
type pubStream struct {
	c      *Client
	cs     *clientStream
	caps   felix.Capabilities
	window chan struct{}

	mu      sync.Mutex
	pending map[uint64]*pendingAnswer
	err     error // sticky: set when the stream ended
	done    chan struct{}

	flushMu   sync.Mutex
	unflushed felix.Topic // last fire-and-forget topic since the last Flush
	dirty     bool
}

// pendingAnswer is an outstanding request on a stream.
type pendingAnswer struct {
	ch      chan answer                // capacity 1; nil when cb is set
	cb      func(rid uint64, a answer) // asynchronous publishes: called by the reader
	rid     uint64
	slot    bool // holds a publish window slot
	release chan struct{}
	sent    time.Time // when the publish was written (only with a PublishAcked hook)
	records int       // records in the batch (only with a PublishAcked hook)
}

// send hands a to the waiter.
func (pa *pendingAnswer) send(a answer) {
	if pa.cb != nil {
		pa.cb(pa.rid, a)
		return
	}
	pa.ch <- a
}

// answer is a decoded answer or the error that replaced it.
type answer struct {
	msg felix.Message
	ack felix.PublishAck
	bin bool
	err error
}

func (c *Client) openPubStream(ctx context.Context) (*pubStream, error) {
	cs, err := c.openStream(ctx)
	if err != nil {
		return nil, err
	}
	ps := &pubStream{c: c, cs: cs, caps: cs.caps, pending: make(map[uint64]*pendingAnswer), done: make(chan struct{})}
	depth := uint32(DefaultPipelineDepth)
	if cs.caps.PublishWindow > 0 {
		depth = cs.caps.PublishWindow
	}
	ps.window = make(chan struct{}, depth)
	c.wg.Add(1)
	go ps.readLoop()
	return ps, nil
}

func (ps *pubStream) dead() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.err != nil
}

// publish sends one batch on ps and, when acked, waits for its answer.
func (ps *pubStream) publish(ctx context.Context, t felix.Topic, payloads [][]byte, o PublishOptions, id *idem) (felix.PublishResult, error) {
	pa, rid, err := ps.send(ctx, t, payloads, o, id, nil)
	if err != nil || pa == nil {
		return felix.PublishResult{}, err
	}
	select {
	case a := <-pa.ch:
		return publishResult(rid, a)
	case <-ctx.Done():
		return felix.PublishResult{}, ctx.Err()
	}
}

// send writes one batch on ps. For an acked publish it first takes a window
// slot and registers the request (its answer goes to the returned
// pendingAnswer's channel, or to cb when cb is set); for a fire-and-forget
// publish it returns a nil pendingAnswer.
func (ps *pubStream) send(ctx context.Context, t felix.Topic, payloads [][]byte, o PublishOptions, id *idem, cb func(uint64, answer)) (*pendingAnswer, uint64, error) {
	acked := !o.NoAck || id != nil
	keyed := o.Key != nil
	_, enc := ps.caps.PublishFlags(acked, keyed, id != nil)
	if ps.c.cfg.ForceJSON && enc == felix.PublishBinary {
		if id != nil {
			if !ps.caps.CanFeature(felix.FeatureIdempotentProducer) {
				return nil, 0, notAdvertised("publish_idempotent (FEATURE_IDEMPOTENT_PRODUCER)")
			}
			enc = felix.PublishJSONIdempotent
		} else {
			enc = felix.PublishJSON
		}
	}
	if enc == felix.PublishUnavailable {
		return nil, 0, notAdvertised("idempotent publish (flag 0x0100 or FEATURE_IDEMPOTENT_PRODUCER)")
	}
	if o.src != nil && enc != felix.PublishBinary {
		payloads = o.src.collect()
	}
	b := felix.PublishBatch{TenantID: t.TenantID, Namespace: t.Namespace, Stream: t.Stream, Payloads: payloads,
		HasKey: keyed, Key: o.Key}
	if !acked {
		var err error
		if enc == felix.PublishBinary {
			err = writeCtx(ctx, func(ctx context.Context) error {
				return ps.cs.w.encode(ctx, func(dst []byte) ([]byte, error) { return appendBatch(dst, &b, o.src) })
			})
		} else {
			m := jsonPublish(t, payloads, o.Key, felix.AckNone, 0)
			err = writeCtx(ctx, func(ctx context.Context) error { return ps.cs.w.writeMessage(ctx, m) })
		}
		if errors.Is(err, errWriteInterrupted) {
			ps.fail(err) // the stream's send side was reset
		}
		if err == nil {
			ps.flushMu.Lock()
			ps.unflushed, ps.dirty = t, true
			ps.flushMu.Unlock()
			if ps.cs.hk != nil {
				ps.sent(0, records(payloads, o.src), false)
			}
		}
		return nil, 0, err
	}
	// Acked: take a window slot, register, write.
	select {
	case ps.window <- struct{}{}:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	case <-ps.done:
		return nil, 0, ps.stickyErr()
	}
	rid := ps.c.reqID.Add(1)
	pa := &pendingAnswer{cb: cb, rid: rid, slot: true, release: ps.window}
	if cb == nil {
		pa.ch = make(chan answer, 1)
	}
	if ps.cs.hk.wantsAckTime() {
		pa.sent, pa.records = time.Now(), records(payloads, o.src)
	}
	if err := ps.register(rid, pa); err != nil {
		<-ps.window
		return nil, 0, err
	}
	var werr error
	switch enc {
	case felix.PublishBinary:
		b.AckMode = o.Ack
		if b.AckMode == felix.AckNone {
			b.AckMode = felix.AckPerBatch
		}
		b.RequestID = rid
		if id != nil {
			b.Idempotent, b.ProducerID, b.Sequence = true, id.producer, id.seq
			b.AckMode = felix.AckPerBatch
		}
		werr = writeCtx(ctx, func(ctx context.Context) error {
			return ps.cs.w.encode(ctx, func(dst []byte) ([]byte, error) { return appendBatch(dst, &b, o.src) })
		})
	case felix.PublishJSONIdempotent:
		m := jsonPublishIdempotent(t, payloads, o.Key, rid, id.producer, id.seq)
		werr = writeCtx(ctx, func(ctx context.Context) error { return ps.cs.w.writeMessage(ctx, m) })
	default:
		ack := o.Ack
		if ack == felix.AckNone {
			ack = felix.AckPerBatch
		}
		m := jsonPublish(t, payloads, o.Key, ack, rid)
		werr = writeCtx(ctx, func(ctx context.Context) error { return ps.cs.w.writeMessage(ctx, m) })
	}
	if werr != nil {
		ps.unregister(rid)
		if errors.Is(werr, errWriteInterrupted) {
			ps.fail(werr) // the stream's send side was reset
		}
		return nil, 0, werr
	}
	if ps.cs.hk != nil {
		ps.sent(rid, records(payloads, o.src), true)
	}
	return pa, rid, nil
}

// request sends a JSON request carrying a fresh request_id (built by mk) on
// ps and waits for its answer, outside the publish window.
func (ps *pubStream) request(ctx context.Context, mk func(id uint64) felix.Message) (felix.Message, error) {
	rid := ps.c.reqID.Add(1)
	pa := &pendingAnswer{ch: make(chan answer, 1)}
	if err := ps.register(rid, pa); err != nil {
		return nil, err
	}
	m := mk(rid)
	if err := writeCtx(ctx, func(ctx context.Context) error { return ps.cs.w.writeMessage(ctx, m) }); err != nil {
		ps.unregister(rid)
		if errors.Is(err, errWriteInterrupted) {
			ps.fail(err)
		}
		return nil, err
	}
	select {
	case a := <-pa.ch:
		if a.err != nil {
			return nil, a.err
		}
		return a.msg, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (ps *pubStream) register(rid uint64, pa *pendingAnswer) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.err != nil {
		return ps.err
	}
	ps.pending[rid] = pa
	return nil
}

func (ps *pubStream) unregister(rid uint64) {
	ps.mu.Lock()
	pa := ps.pending[rid]
	delete(ps.pending, rid)
	ps.mu.Unlock()
	if pa != nil && pa.slot {
		<-pa.release
	}
}

func (ps *pubStream) stickyErr() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.err == nil {
		return ErrClosed
	}
	return ps.err
}

// deliver hands an answer to the request rid and releases its window slot.
// It reports false for an id that is not outstanding (requests abandoned by
// their caller stay registered until answered, so an unknown id is one the
// broker invented or answered twice).
func (ps *pubStream) deliver(rid uint64, a answer) bool {
	ps.mu.Lock()
	pa := ps.pending[rid]
	delete(ps.pending, rid)
	ps.mu.Unlock()
	if pa == nil {
		return false
	}
	if pa.slot {
		<-pa.release
		ps.acked(pa, a)
	}
	pa.send(a)
	return true
}

// fail ends ps: every outstanding request gets err, later ones the sticky
// error.
func (ps *pubStream) fail(err error) {
	ps.mu.Lock()
	if ps.err == nil {
		ps.err = err
	}
	pend := ps.pending
	ps.pending = make(map[uint64]*pendingAnswer)
	ps.mu.Unlock()
	for _, pa := range pend {
		if pa.slot {
			<-pa.release
			ps.acked(pa, answer{err: err})
		}
		pa.send(answer{err: err})
	}
	ps.cs.s.CancelWrite(0)
	ps.cs.s.CancelRead(0)
}

// readLoop reads the answers of ps until the broker ends the stream.
func (ps *pubStream) readLoop() {
	defer ps.c.wg.Done()
	defer close(ps.done)
	for {
		f, err := ps.cs.r.ReadFrame()
		ps.cs.seen(f, err)
		if err != nil {
			if err == io.EOF {
				ps.finish(ErrClosed)
				return
			}
			ps.fail(clientErr("read publish answer", err))
			return
		}
		if err := ps.handle(f); err != nil {
			ps.c.log.Debug("publish stream failed", "err", err)
			ps.fail(err)
			return
		}
	}
}

// finish marks ps ended after the broker's FIN: outstanding requests fail
// and the write side is finished so QUIC returns the stream credit.
func (ps *pubStream) finish(err error) {
	ps.mu.Lock()
	if ps.err == nil {
		ps.err = err
	}
	pend := ps.pending
	ps.pending = make(map[uint64]*pendingAnswer)
	ps.mu.Unlock()
	for _, pa := range pend {
		a := answer{err: protocolErr("publish stream ended before the answer")}
		if pa.slot {
			<-pa.release
			ps.acked(pa, a)
		}
		pa.send(a)
	}
	ps.cs.s.Close()
}

// handle dispatches one answer frame.
func (ps *pubStream) handle(f felix.Frame) error {
	if f.Flags != 0 {
		if f.Flags.Layout() != felix.LayoutPublishAck {
			return protocolErr("unexpected frame %s on a publish stream", f.Flags)
		}
		ack, err := felix.DecodePublishAck(f.Flags, f.Payload)
		if err != nil {
			return err
		}
		if !ps.deliver(ack.RequestID, answer{ack: ack, bin: true}) {
			return protocolErr("ack for unknown request %d", ack.RequestID)
		}
		return nil
	}
	m, err := felix.DecodeMessage(f.Payload)
	if err != nil {
		return err
	}
	rid, ok := felix.RequestIDOf(m)
	if !ok {
		// An answer without request_id (error, not_leader) ends the
		// stream: it fails every outstanding request.
		return answerError(m, 0)
	}
	if !ps.deliver(rid, answer{msg: m}) {
		return protocolErr("%s for unknown request %d", m.MessageType(), rid)
	}
	return nil
}

// publishResult converts the answer of an acked publish.
func publishResult(rid uint64, a answer) (felix.PublishResult, error) {
	if a.err != nil {
		return felix.PublishResult{}, a.err
	}
	if a.bin {
		if a.ack.Status != felix.AckOK {
			be := &felix.BrokerError{Type: "publish_ack", RequestID: rid, Message: a.ack.Message, Code: a.ack.Code, Reason: a.ack.Reason}
			if a.ack.Code != "" {
				be.Retry = a.ack.Retry
			}
			be.RetryAfter = msDuration(a.ack.RetryAfterMs)
			be.Owner, be.HasOwner = a.ack.Owner, a.ack.HasOwner
			return felix.PublishResult{}, be
		}
		return felix.PublishResult{Offset: a.ack.Offset, HasOffset: a.ack.HasOffset, Owner: a.ack.Owner, HasOwner: a.ack.HasOwner}, nil
	}
	return publishResultJSON(rid, a.msg)
}
