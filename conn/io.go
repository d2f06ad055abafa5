package conn

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/flxproto/felix"
)

// writeDeadliner and readDeadliner are the deadline halves of QUIC streams.
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }
type readDeadliner interface{ SetReadDeadline(time.Time) error }

// ctxGuard makes a blocking stream call honour ctx by moving the stream's
// deadline to now when ctx is cancelled. done must be called when the call
// returned; it reports whether the call was interrupted by ctx (the stream
// may then be in the middle of a frame and must be abandoned). With a ctx
// that can never be cancelled it costs nothing.
func ctxGuard(ctx context.Context, set func(time.Time) error) (done func() bool) {
	if ctx.Done() == nil {
		return noGuard
	}
	var mu sync.Mutex
	finished, fired := false, false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			fired = true
			set(time.Now())
		}
	})
	return func() bool {
		stop()
		mu.Lock()
		finished = true
		f := fired
		mu.Unlock()
		if f {
			set(time.Time{})
		}
		return f
	}
}

// noGuard is the done function of a call that ctx cannot interrupt.
func noGuard() bool { return false }

// readFrameCtx reads one frame from r, whose stream is d, honouring ctx.
// When ctx interrupts the read it returns ctx's error and interrupted true:
// the stream is then no longer on a frame boundary.
func readFrameCtx(ctx context.Context, r *felix.Reader, d readDeadliner) (f felix.Frame, interrupted bool, err error) {
	if err := ctx.Err(); err != nil {
		return felix.Frame{}, false, err
	}
	done := ctxGuard(ctx, d.SetReadDeadline)
	f, err = r.ReadFrame()
	if done() && err != nil {
		return felix.Frame{}, true, ctx.Err()
	}
	return f, false, err
}

// frameReader reads frames from a stream whose reads may be interrupted by
// a deadline (ctxGuard): the bytes already read are kept, so the next call
// resumes the same frame and the stream stays on a frame boundary. Unless
// reuse is set, each payload gets a fresh buffer, so decoded values may
// alias it and outlive the next frame. Headers are
// checked strictly (unknown flag bits are refused) and the length against
// max before any payload byte is read; the buffer grows with the bytes
// received, so a hostile length costs nothing up front.
type frameReader struct {
	src io.Reader
	max uint32
	// reuse keeps one payload buffer across frames (the previous frame's
	// payload is overwritten by the next one).
	reuse bool

	hdr     [felix.HeaderLen]byte
	hn      int
	h       felix.Header
	haveHdr bool
	buf     []byte
	pn      int
	// slab is the unused tail of the chunk that fresh payload buffers of
	// small frames are carved from (see carve).
	slab []byte
}

// slabSize and slabMax: without reuse, the payload of a frame of at most
// slabMax bytes is carved from a shared slabSize chunk instead of getting
// an allocation of its own (one allocation per several frames). Every
// byte of a chunk belongs to one frame only and is never written again
// once that frame is returned, so the frame's values may still be kept;
// a kept value keeps its chunk (at most slabSize bytes) alive.
const (
	slabSize = 64 << 10
	slabMax  = 16 << 10
)

// carve returns n fresh bytes (n <= slabMax), capacity capped at n.
func (r *frameReader) carve(n int) []byte {
	if len(r.slab) < n {
		r.slab = make([]byte, slabSize)
	}
	b := r.slab[:n:n]
	r.slab = r.slab[n:]
	return b
}

// next returns the next whole frame, io.EOF at a clean end on a frame
// boundary, or the read error (after which, if it was a timeout, calling
// next again resumes).
func (r *frameReader) next() (felix.Frame, error) {
	for !r.haveHdr {
		n, err := r.src.Read(r.hdr[r.hn:])
		r.hn += n
		if r.hn == felix.HeaderLen {
			h, perr := felix.ParseHeader(r.hdr[:])
			if perr != nil {
				return felix.Frame{}, perr
			}
			if h.Length > r.max {
				return felix.Frame{}, felix.FrameTooLarge(uint64(h.Length), r.max)
			}
			r.h, r.haveHdr = h, true
			if first := min(int(h.Length), frameChunk); r.reuse && cap(r.buf) >= first {
				r.buf = r.buf[:cap(r.buf)]
			} else if !r.reuse && first <= slabMax {
				r.buf = r.carve(first)
			} else {
				r.buf = make([]byte, first)
			}
			r.pn = 0
			break
		}
		if err != nil {
			if err == io.EOF {
				if r.hn == 0 {
					return felix.Frame{}, io.EOF
				}
				return felix.Frame{}, truncated("header", r.hn)
			}
			return felix.Frame{}, err
		}
	}
	want := int(r.h.Length)
	for r.pn < want {
		if r.pn == len(r.buf) {
			// Grow with the bytes received: at most 4x what arrived, and
			// straight to the frame's length when that is within it (a
			// frame of a few hundred KiB regrows once).
			nb := make([]byte, min(want, 4*len(r.buf)))
			copy(nb, r.buf[:r.pn])
			r.buf = nb
		}
		n, err := r.src.Read(r.buf[r.pn:min(len(r.buf), want)])
		r.pn += n
		if err != nil && r.pn < want {
			if err == io.EOF {
				return felix.Frame{}, truncated("payload", felix.HeaderLen+r.pn)
			}
			return felix.Frame{}, err
		}
	}
	f := felix.Frame{Header: r.h, Payload: r.buf[:want:want]}
	r.haveHdr, r.hn, r.pn = false, 0, 0
	if !r.reuse {
		r.buf = nil
	}
	return f, nil
}

// frameChunk is the first allocation for a payload; larger payloads grow
// as their bytes arrive. It holds a whole frame of one 64 KiB record
// (the frame is a few bytes over 64 KiB), which a 64 KiB first chunk
// made regrow (and copy 64 KiB) on every frame.
const frameChunk = 128 << 10

func truncated(field string, off int) error {
	return &felix.Error{Class: felix.ErrTruncated, Layout: "frame", Field: field, Offset: off,
		Detail: "stream ended inside a frame", Err: io.ErrUnexpectedEOF}
}
