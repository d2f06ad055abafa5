package conn

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"
)

// cacheRequest sends m over the cache stream pool (with a request id of
// the stream it goes on) and waits for its answer. felix.ErrNotAdvertised when
// the stream's broker did not advertise what m needs.
func (c *Client) cacheRequest(ctx context.Context, m felix.Message) (felix.Message, error) {
	for attempt := 0; ; attempt++ {
		cs, err := c.cacheStream(ctx)
		if err != nil {
			return nil, err
		}
		if what := cs.caps.Unadvertised(m); what != "" {
			return nil, notAdvertised(what)
		}
		ans, err := cs.request(ctx, func(id uint64) felix.Message { felix.SetRequestID(m, id); return m })
		if err == errStreamRetired {
			// Not written, or written behind a refusal after which the
			// broker ended the stream unread: never applied, so sent
			// again on a fresh stream.
			if attempt >= maxCacheRetries {
				return nil, protocolErr("cache stream ended before the answer (%d streams in a row)", attempt+1)
			}
			continue
		}
		return ans, err
	}
}

// maxCacheRetries bounds how many times one cache request is sent again
// on a fresh stream because the stream it went on ended behind another
// request's refusal.
const maxCacheRetries = 64

// errStreamRetired: request picked a cache stream that was retired (an
// error without request_id came, after which the broker ends the stream)
// and wrote nothing on it, or wrote on it behind the refused request and
// the broker ended the stream without reading it.
var errStreamRetired = errors.New("conn: cache stream retired")

// cacheStream picks a pooled cache stream round-robin, opening or replacing
// it as needed.
func (c *Client) cacheStream(ctx context.Context) (*cacheStream, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	i := int(c.cacheNext.Add(1)) % c.cfg.CacheStreams
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	if i < len(c.caches) && !c.caches[i].dead() {
		return c.caches[i], nil
	}
	cs, err := c.openStream(ctx)
	if err != nil {
		return nil, err
	}
	s := &cacheStream{c: c, cs: cs, caps: cs.caps, pending: make(map[uint64]chan answer), done: make(chan struct{})}
	c.wg.Add(1)
	go s.readLoop()
	if i < len(c.caches) {
		c.caches[i] = s
	} else {
		c.caches = append(c.caches, s)
	}
	return s, nil
}

// cacheStream is a pooled stream carrying cache and counter requests;
// answers are matched by request_id, and an error without request_id is
// attributed to the oldest outstanding request (brokers answer a stream's
// requests in order).
type cacheStream struct {
	c    *Client
	cs   *clientStream
	caps felix.Capabilities

	mu       sync.Mutex
	pending  map[uint64]chan answer
	order    []uint64
	err      error
	retired  bool // an error without request_id came: the broker ends the stream
	finished bool // retired, and our side FINished once nothing was pending
	done     chan struct{}
}

// dead reports a stream that takes no new request: failed, or retired
// because the broker answered an error without request_id, after which it
// ends the stream (docs/transport.md §2) and stops reading it, so a
// request written there would meet STOP_SENDING instead of an answer.
func (s *cacheStream) dead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil || s.retired
}

func (s *cacheStream) request(ctx context.Context, mk func(id uint64) felix.Message) (felix.Message, error) {
	rid := s.c.reqID.Add(1)
	ch := make(chan answer, 1)
	// The request is registered and written under the stream's write lock,
	// so that the order of s.order is the order on the wire: an error
	// without request_id is attributed to the oldest request, which must
	// be the one the broker read first.
	w := s.cs.w
	if err := w.lock(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		w.unlock()
		return nil, s.err
	}
	if s.retired {
		// The broker may end the stream at any moment: a request written
		// now might never be read.
		s.mu.Unlock()
		w.unlock()
		return nil, errStreamRetired
	}
	s.pending[rid] = ch
	s.order = append(s.order, rid)
	s.mu.Unlock()
	m := mk(rid)
	err := writeCtx(ctx, func(ctx context.Context) error {
		b, err := felix.AppendMessageFrame(w.buf[:0], m)
		if err != nil {
			return err
		}
		w.buf = keepSmall(b)
		return w.put(ctx, b)
	})
	w.unlock()
	if err != nil {
		var se *quic.StreamError
		if !errors.As(err, &se) || !se.Remote || errors.Is(err, errWriteInterrupted) {
			s.take(rid)
			if errors.Is(err, errWriteInterrupted) {
				s.fail(err)
			}
			return nil, err
		}
		// The broker stopped reading the stream (STOP_SENDING), as it
		// does after refusing a request with an error without
		// request_id: the answer still comes on the read side (this
		// request's refusal, when it is the oldest), or the stream's end,
		// after which a request behind the refusal is sent again.
	}
	select {
	case a := <-ch:
		if a.err != nil {
			return nil, a.err
		}
		return a.msg, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// take removes and returns the waiter of rid (nil when unknown).
func (s *cacheStream) take(rid uint64) chan answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.pending[rid]
	delete(s.pending, rid)
	for i, id := range s.order {
		if id == rid {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	return ch
}

// isRetired reports whether an error without request_id retired s.
func (s *cacheStream) isRetired() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retired
}

// oldest returns the oldest outstanding request id.
func (s *cacheStream) oldest() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.order) == 0 {
		return 0, false
	}
	return s.order[0], true
}

// fail ends the stream in both directions after an error.
func (s *cacheStream) fail(err error) {
	s.drop(err)
	s.cs.abort()
}

// drop fails every outstanding request with err and marks the stream dead.
func (s *cacheStream) drop(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	pend := s.pending
	s.pending = make(map[uint64]chan answer)
	s.order = nil
	s.mu.Unlock()
	for _, ch := range pend {
		ch <- answer{err: err}
	}
}

func (s *cacheStream) readLoop() {
	defer s.c.wg.Done()
	defer close(s.done)
	for {
		f, err := s.cs.r.ReadFrame()
		s.cs.seen(f, err)
		if err != nil {
			if err == io.EOF {
				// The broker finished the stream (after our FIN, or after
				// an answer that ends it): finish ours too. Requests still
				// waiting on a retired stream were written behind the
				// refused one and never read (the broker answers in order
				// and ends the stream after such a refusal): they are sent
				// again on a fresh stream.
				why := protocolErr("cache stream ended before the answer")
				if s.isRetired() {
					why = errStreamRetired
				}
				s.drop(why)
				s.cs.s.Close()
				return
			}
			s.fail(clientErr("read cache answer", err))
			return
		}
		if f.Flags != 0 {
			s.fail(protocolErr("binary frame %s on a cache stream", f.Flags))
			return
		}
		m, err := felix.DecodeMessage(f.Payload)
		if err != nil {
			s.fail(err)
			return
		}
		rid, ok := felix.RequestIDOf(m)
		if !ok {
			// error without request_id: the oldest request's answer.
			rid, ok = s.oldest()
			if !ok {
				s.fail(answerError(m, 0))
				return
			}
			// Retire the stream before the caller learns its answer, so
			// that its next request opens a fresh stream.
			s.mu.Lock()
			s.retired = true
			s.mu.Unlock()
			if ch := s.take(rid); ch != nil {
				ch <- answer{err: answerError(m, rid)}
			}
			s.finishIfIdle()
			continue
		}
		ch := s.take(rid)
		if ch == nil {
			s.fail(protocolErr("%s for unknown request %d", m.MessageType(), rid))
			return
		}
		ch <- answer{msg: m}
		s.finishIfIdle()
	}
}

// finishIfIdle ends our side of a retired stream once no request waits on
// it (a broker that kept it open then finishes it, and readLoop ends on
// its EOF).
func (s *cacheStream) finishIfIdle() {
	s.mu.Lock()
	fin := s.retired && !s.finished && len(s.pending) == 0
	if fin {
		s.finished = true
	}
	s.mu.Unlock()
	if fin {
		s.cs.s.Close()
	}
}
