package conn

import (
	"sync/atomic"
)

// PayloadMode says how long the Payload and Publisher of a delivered Event
// stay valid, and so how the subscription's frame buffers are recycled.
type PayloadMode uint8

const (
	// PayloadsUntilNext (the default): an Event's Payload and Publisher
	// are valid until the next call to Next (the next iteration of All);
	// Event.Clone makes a copy to keep. Every frame is read into one
	// recycled buffer, so delivery allocates nothing per frame.
	PayloadsUntilNext PayloadMode = iota
	// PayloadsOwned reads every frame into a buffer of its own: events
	// may be kept as they are, at the cost of one allocation (and its
	// garbage) per frame.
	PayloadsOwned
	// PayloadsUntilRelease is for handing events to another goroutine in
	// delivery order (a merged channel, a worker): an Event stays valid
	// until Release is called on it or on an event delivered after it.
	// Frame buffers are recycled once every event read from them is
	// released; an event never released only costs the reuse of its
	// buffer (it is then garbage collected), never its bytes.
	PayloadsUntilRelease
)

// Clone returns e with a Payload and Publisher of its own, valid for as
// long as the copy is kept, whatever the subscription's PayloadMode. The
// copy needs no Release.
func (e Event) Clone() Event {
	p, pub := e.Payload, e.Publisher
	b := make([]byte, len(p)+len(pub))
	if p != nil {
		e.Payload = b[:len(p):len(p)]
		copy(e.Payload, p)
	}
	if pub != nil {
		e.Publisher = b[len(p):]
		copy(e.Publisher, pub)
	}
	e.rel, e.seq = nil, 0
	return e
}

// Release tells a subscription opened with PayloadsUntilRelease that e
// and every event it delivered before e are no longer used, so the frame
// buffers they alias may be read into again. It may be called from any
// goroutine, more than once; for an event of another mode (or a Clone)
// it does nothing.
func (e Event) Release() {
	if e.rel == nil {
		return
	}
	for {
		p := e.rel.passed.Load()
		if p >= e.seq || e.rel.passed.CompareAndSwap(p, e.seq) {
			return
		}
	}
}

// poisonBuffers makes subscriptions opened while it is set overwrite every
// frame buffer they stop vouching for with poisonByte, and never read into
// it again, so a payload used after its validity ends reads as poison (a
// test of the PayloadMode rules, not a mode for production: it allocates
// a buffer per frame). The felixpoison build tag sets it for a whole test
// binary; the tests of this package set it for one test.
var poisonBuffers atomic.Bool

func init() { poisonBuffers.Store(poisonDefault) }

// poisonByte is what a released buffer holds in poison mode.
const poisonByte = 0xDB

func poison(b []byte) {
	for i := range b {
		b[i] = poisonByte
	}
}

// recycler tracks the frame buffers of a PayloadsUntilRelease
// subscription: those read and not yet released by the consumer, and the
// spare ones free for reading.
type recycler struct {
	// passed is the sequence number of the last event released (Release).
	passed atomic.Uint64

	// Owned by the reader of the subscription.
	seq      uint64      // sequence number of the last event delivered
	inflight []heldFrame // frame buffers whose events are not all released, oldest first
	spare    [][]byte    // released buffers ready to be read into
}

// heldFrame is a frame buffer and the sequence number of its last event.
type heldFrame struct {
	b    []byte
	last uint64
}

// maxSpare bounds the released buffers a subscription keeps for reuse;
// beyond it they are left to the garbage collector.
const maxSpare = 4

// next returns a buffer to read the next frame into (nil when none is
// free), after taking back the frames the consumer has released.
func (r *recycler) next(poisoned bool) []byte {
	passed := r.passed.Load()
	n := 0
	for _, h := range r.inflight {
		if h.last > passed {
			break
		}
		n++
		if poisoned {
			poison(h.b)
			continue
		}
		if len(r.spare) < maxSpare {
			r.spare = append(r.spare, h.b)
		}
	}
	if n > 0 {
		k := copy(r.inflight, r.inflight[n:])
		clear(r.inflight[k:])
		r.inflight = r.inflight[:k]
	}
	if len(r.spare) == 0 {
		return nil
	}
	b := r.spare[len(r.spare)-1]
	r.spare[len(r.spare)-1] = nil
	r.spare = r.spare[:len(r.spare)-1]
	return b
}

// maxInflight bounds the frames a recycler waits on: when the consumer
// does not release (NextFrame, or events never released), the oldest are
// forgotten (never read into again) instead of accumulating.
const maxInflight = 64

// hold records b as the buffer of a frame whose events run up to the
// sequence number last.
func (r *recycler) hold(b []byte, last uint64) {
	if len(r.inflight) == maxInflight {
		k := copy(r.inflight, r.inflight[1:])
		r.inflight[k] = heldFrame{}
		r.inflight = r.inflight[:k]
	}
	r.inflight = append(r.inflight, heldFrame{b: b, last: last})
}
