package conn

import (
	"context"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"
)

// Router bounds (the upstream client's defaults).
const (
	// maxPendingEventStreams bounds event streams whose hello arrived but
	// whose subscription was not claimed yet.
	maxPendingEventStreams = 16384
	// helloTimeout bounds how long a new uni stream may take to deliver its
	// event_stream_hello.
	helloTimeout = 10 * time.Second
)

// eventStream is a broker-opened uni stream whose hello was read.
type eventStream struct {
	s  *quic.ReceiveStream
	r  *felix.Reader
	id uint64
}

// eventRouter accepts every uni stream the broker opens, reads its first
// frame, drops the stream if that is not an event_stream_hello, and matches
// it by subscription_id with the subscription that claims it. Either may
// come first.
type eventRouter struct {
	c       *Client
	mu      sync.Mutex
	streams map[uint64]*eventStream
	waiters map[uint64]chan *eventStream
	wg      sync.WaitGroup
}

func newEventRouter(c *Client) *eventRouter {
	return &eventRouter{c: c, streams: make(map[uint64]*eventStream), waiters: make(map[uint64]chan *eventStream)}
}

// run accepts uni streams until the connection closes.
func (er *eventRouter) run() {
	defer er.c.wg.Done()
	ctx := er.c.qc.Context()
	for {
		rs, err := er.c.qc.AcceptUniStream(ctx)
		if err != nil {
			break
		}
		er.wg.Add(1)
		go er.hello(rs)
	}
	er.wg.Wait()
	er.mu.Lock()
	for id, es := range er.streams {
		es.s.CancelRead(0)
		delete(er.streams, id)
	}
	er.mu.Unlock()
}

// hello reads the first frame of rs and files the stream.
func (er *eventRouter) hello(rs *quic.ReceiveStream) {
	defer er.wg.Done()
	r := felix.NewReader(rs)
	r.SetMaxPayload(felix.PreAuthMaxFrameBytes)
	rs.SetReadDeadline(time.Now().Add(helloTimeout))
	f, err := r.ReadFrame()
	rs.SetReadDeadline(time.Time{})
	if err != nil || f.Flags != 0 {
		rs.CancelRead(0)
		return
	}
	if er.c.cfg.Hooks != nil {
		er.c.cfg.Hooks.frameRead(SideClient, int64(rs.StreamID()), er.c.qc.RemoteAddr(), f)
	}
	m, err := felix.DecodeMessage(f.Payload)
	h, ok := m.(*felix.EventStreamHello)
	if err != nil || !ok {
		er.c.log.Debug("dropping uni stream without hello")
		rs.CancelRead(0)
		return
	}
	r.SetMaxPayload(er.c.cfg.MaxFrameBytes)
	es := &eventStream{s: rs, r: r, id: h.SubscriptionID}
	er.mu.Lock()
	defer er.mu.Unlock()
	if ch, ok := er.waiters[es.id]; ok {
		delete(er.waiters, es.id)
		ch <- es
		return
	}
	if _, dup := er.streams[es.id]; dup || len(er.streams) >= maxPendingEventStreams {
		rs.CancelRead(0)
		return
	}
	er.streams[es.id] = es
}

// claim returns the event stream with the given subscription id, waiting
// for it to arrive.
func (er *eventRouter) claim(ctx context.Context, id uint64) (*eventStream, error) {
	er.mu.Lock()
	if es, ok := er.streams[id]; ok {
		delete(er.streams, id)
		er.mu.Unlock()
		return es, nil
	}
	if len(er.waiters) >= maxPendingEventStreams {
		er.mu.Unlock()
		return nil, protocolErr("too many subscriptions waiting for their event stream")
	}
	ch := make(chan *eventStream, 1)
	er.waiters[id] = ch
	er.mu.Unlock()
	select {
	case es := <-ch:
		return es, nil
	case <-ctx.Done():
		er.cancelWait(id, ch)
		return nil, ctx.Err()
	case <-er.c.qc.Context().Done():
		er.cancelWait(id, ch)
		return nil, clientErr("wait for event stream", context.Cause(er.c.qc.Context()))
	case <-er.c.ctx.Done():
		er.cancelWait(id, ch)
		return nil, ErrClosed
	}
}

func (er *eventRouter) cancelWait(id uint64, ch chan *eventStream) {
	er.mu.Lock()
	if er.waiters[id] == ch {
		delete(er.waiters, id)
	}
	er.mu.Unlock()
	select {
	case es := <-ch:
		es.s.CancelRead(0)
	default:
	}
}
