package conn

import (
	"context"
	"sync"

	"github.com/flxproto/felix"
)

// This file bounds the request bytes one connection holds in memory: the
// payload of every frame being read, from its header until the stream's
// next ReadRequest (the Payload of a Request is valid until then), counts
// against the connection's MaxConnInFlightBytes. A stream whose next frame
// does not fit waits before reading its payload, so the client is slowed by
// QUIC flow control instead of growing the server's memory.

// retainedReadBuffer is the largest read buffer a stream keeps between
// frames; a stream that read a larger frame drops its buffer.
const retainedReadBuffer = 16 << 10

// byteBudget is a FIFO weighted semaphore over bytes.
type byteBudget struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

func newByteBudget(size int64) *byteBudget { return &byteBudget{size: size} }

// acquire takes n bytes (at most the budget's size), waiting in arrival
// order while they are not free; it returns the amount taken, or ctx's
// error when ctx ends first (nothing taken).
func (b *byteBudget) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(n, b.size)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	select {
	case <-w.ready: // granted meanwhile: give it back
		b.mu.Unlock()
		b.release(n)
		return 0, ctx.Err()
	default:
	}
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	b.grantLocked() // a smaller waiter behind it may fit now
	b.mu.Unlock()
	return 0, ctx.Err()
}

// tryAcquire takes n bytes (at most the budget's size) when they are free
// and nobody waits, without waiting.
func (b *byteBudget) tryAcquire(n int64) (int64, bool) {
	n = min(n, b.size)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.used += n
		return n, true
	}
	return 0, false
}

func (b *byteBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.grantLocked()
	b.mu.Unlock()
}

func (b *byteBudget) grantLocked() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		if b.used+w.n > b.size {
			return
		}
		b.used += w.n
		close(w.ready)
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
	}
}

// waiting returns the number of waiting acquirers.
func (b *byteBudget) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// inUse returns the bytes taken.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// reserveNext reserves the payload of the stream's next frame once its
// header has arrived (before the payload is read). A header that does not
// parse or is over the limit reserves nothing: ReadFrame reports it.
func (s *Stream) reserveNext(ctx context.Context) error {
	if _, err := s.recv.Peek(s.peek[:]); err != nil {
		return nil // ReadFrame meets the same end or error
	}
	h, err := felix.ParseHeaderLenient(s.peek[:])
	if err != nil || h.Length > s.r.MaxPayload() || h.Length == 0 {
		return nil
	}
	n, err := s.c.budget.acquire(ctx, int64(h.Length))
	if err != nil {
		return err
	}
	s.resMu.Lock()
	if s.ended { // Close or Abort ran meanwhile: nobody will release it
		s.resMu.Unlock()
		s.c.budget.release(n)
		return nil
	}
	s.reserved = n
	s.resMu.Unlock()
	return nil
}

// dropReservation returns the last frame's reservation to the budget; end
// marks the stream ended so that no later reservation is kept.
func (s *Stream) dropReservation(end bool) int64 {
	s.resMu.Lock()
	n := s.reserved
	s.reserved = 0
	s.ended = s.ended || end
	s.resMu.Unlock()
	s.c.budget.release(n)
	return n
}

// releaseFrame (reader goroutine only) returns the previous frame's
// reservation and drops a read buffer that grew beyond retainedReadBuffer.
func (s *Stream) releaseFrame() {
	if n := s.dropReservation(false); n > retainedReadBuffer {
		s.r = requestReader(s.recv, s.r.MaxPayload())
	}
}
