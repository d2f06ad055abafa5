package felix

import (
	"encoding/binary"
	"iter"
	"strconv"
)

// This file encodes publish batches whose payloads are not a [][]byte: a
// sequence (AppendPublishBatchSeq), or the payload section of a parsed
// batch being forwarded (AppendPublishBatchView), so a proxy can re-address
// a decoded batch without materialising its payloads.

// AppendPublishBatchSeq is AppendPublishBatch with the payloads given by
// payloads instead of b.Payloads, which must be empty. payloads is iterated
// twice, once to size the frame and once to write it, and must yield the
// same payloads both times (a PublishBatchView's or EventBatchView's
// Payloads does); a second pass that differs is refused with
// ErrInvalidValue. Besides growing dst when it lacks the room for the
// frame, it makes a constant three small allocations (the loop state an
// opaque sequence is handed), whatever the number of payloads.
// Errors are AppendPublishBatch's; dst is returned unchanged on error.
func AppendPublishBatchSeq(dst []byte, b *PublishBatch, payloads iter.Seq[[]byte]) ([]byte, error) {
	if len(b.Payloads) != 0 {
		return dst, encErr(ErrInvalidValue, b.layout(), "payloads", "Payloads set together with a sequence")
	}
	// One state value shared by both passes: the loop bodies handed to an
	// opaque sequence escape, so what they capture is allocated; keeping it
	// to one pointer keeps the cost a small constant, whatever the count.
	st := &seqWriter{big: -1}
	payloads(st.measure)
	if st.big >= 0 {
		return dst, encErr(ErrFrameTooLarge, b.layout(), "payload", "payload of "+strconv.Itoa(st.big)+" bytes")
	}
	out, start, end, err := beginPublish(dst, b, st.count, st.sum)
	if err != nil {
		return dst, err
	}
	st.out, st.o = out[:end], len(out)
	payloads(st.write)
	if st.bad || st.n != st.count || st.o != end {
		return dst, encErr(ErrInvalidValue, b.layout(), "payloads", "the sequence changed between its two passes")
	}
	return FinishFrame(st.out, start)
}

// seqWriter is the state of AppendPublishBatchSeq's two passes.
type seqWriter struct {
	count, sum int
	big        int // length of a payload over the u32 limit, else -1
	out        []byte
	o, n       int
	bad        bool
}

func (w *seqWriter) measure(p []byte) bool {
	if uint64(len(p)) > MaxPayloadLen {
		w.big = len(p)
		return false
	}
	w.count++
	w.sum += len(p)
	return true
}

func (w *seqWriter) write(p []byte) bool {
	if w.n == w.count || w.o+4+len(p) > len(w.out) {
		w.bad = true
		return false
	}
	binary.BigEndian.PutUint32(w.out[w.o:], uint32(len(p)))
	w.o += 4 + copy(w.out[w.o+4:], p)
	w.n++
	return true
}

// AppendPublishBatchView is AppendPublishBatch with the payloads of v (a
// parsed batch, for example one a proxy received) instead of b.Payloads,
// which must be empty: b supplies the addressing, ack and key sections, v
// only its payloads, whose section is copied as one block (the wire layout
// of the payloads is the same). It allocates only when dst lacks the room
// for the frame. Errors are AppendPublishBatch's; dst is returned
// unchanged on error.
func AppendPublishBatchView(dst []byte, b *PublishBatch, v *PublishBatchView) ([]byte, error) {
	if len(b.Payloads) != 0 {
		return dst, encErr(ErrInvalidValue, b.layout(), "payloads", "Payloads set together with a view")
	}
	body := v.run.body
	out, start, end, err := beginPublish(dst, b, v.run.count, len(body)-4*v.run.count)
	if err != nil {
		return dst, err
	}
	o := len(out)
	out = out[:end]
	copy(out[o:], body)
	return FinishFrame(out, start)
}
