package felix

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strconv"
)

// Frame header constants.
const (
	// Magic is the first four header bytes, ASCII "FLX1".
	Magic uint32 = 0x464C5831
	// Version is the only protocol version; it is frozen at 1.
	Version uint16 = 1
	// HeaderLen is the size of a frame header in bytes.
	HeaderLen = 12
	// DefaultMaxFrameBytes is the default payload limit (16 MiB).
	DefaultMaxFrameBytes = 16 << 20
	// PreAuthMaxFrameBytes is the default payload limit on a stream that has
	// not yet authenticated (64 KiB).
	PreAuthMaxFrameBytes = 64 << 10
	// MaxPayloadLen is the largest payload the 32-bit length field can announce.
	MaxPayloadLen = math.MaxUint32
)

// Header is a decoded 12-byte frame header. Magic and version are implied:
// a Header only exists once they were checked.
type Header struct {
	// Flags selects the payload layout (0 = JSON control message).
	Flags Flags
	// Length is the number of payload bytes after the header.
	Length uint32
}

// AppendHeader appends the 12-byte header for h to dst.
func AppendHeader(dst []byte, h Header) []byte {
	return append(dst,
		0x46, 0x4C, 0x58, 0x31,
		0x00, 0x01,
		byte(h.Flags>>8), byte(h.Flags),
		byte(h.Length>>24), byte(h.Length>>16), byte(h.Length>>8), byte(h.Length))
}

// ParseHeader decodes a header from the first 12 bytes of b. It checks, in
// this order, that 12 bytes are present (ErrTruncated), the magic
// (ErrBadMagic), the version (ErrBadVersion) and that no flag bit outside
// KnownFlags is set (ErrUnknownFlags). Bytes after the header are not looked at.
func ParseHeader(b []byte) (Header, error) {
	if len(b) >= HeaderLen && binary.BigEndian.Uint32(b) == Magic && binary.BigEndian.Uint16(b[4:]) == Version {
		h := Header{Flags: Flags(binary.BigEndian.Uint16(b[6:])), Length: binary.BigEndian.Uint32(b[8:])}
		if h.Flags.Unknown() == 0 {
			return h, nil // the common case, small enough to inline
		}
	}
	h, err := ParseHeaderLenient(b)
	if err != nil {
		return h, err
	}
	if u := h.Flags.Unknown(); u != 0 {
		return h, &Error{Class: ErrUnknownFlags, Layout: "frame", Field: "flags", Offset: 6, Flags: u}
	}
	return h, nil
}

// ParseHeaderLenient is ParseHeader without the unknown-flag check. A broker
// uses it to skip a frame with unknown flags (answering an error) while
// staying on a frame boundary. Never mask an unknown bit off and decode the
// payload anyway: bits change the layout.
func ParseHeaderLenient(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, &Error{Class: ErrTruncated, Layout: "frame", Field: "header", Offset: len(b),
			Detail: "need " + strconv.Itoa(HeaderLen) + " bytes, have " + strconv.Itoa(len(b))}
	}
	if m := binary.BigEndian.Uint32(b); m != Magic {
		return Header{}, &Error{Class: ErrBadMagic, Layout: "frame", Field: "magic", Offset: 0,
			Detail: "got 0x" + strconv.FormatUint(uint64(m), 16)}
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != Version {
		return Header{}, &Error{Class: ErrBadVersion, Layout: "frame", Field: "version", Offset: 4,
			Detail: "unsupported version " + strconv.Itoa(int(v))}
	}
	return Header{Flags: Flags(binary.BigEndian.Uint16(b[6:])), Length: binary.BigEndian.Uint32(b[8:])}, nil
}

// BeginFrame appends a header with the given flags and a zero length to dst,
// reserving its place. Append the payload after it, then call FinishFrame
// with the length dst had before BeginFrame to back-patch the length:
//
//	start := len(buf)
//	buf = felix.BeginFrame(buf, flags)
//	buf = append(buf, payload...)
//	buf, err := felix.FinishFrame(buf, start)
func BeginFrame(dst []byte, flags Flags) []byte {
	return AppendHeader(dst, Header{Flags: flags})
}

// FinishFrame writes the payload length into the header that BeginFrame
// placed at b[start:]. It fails with ErrFrameTooLarge (and returns b[:start],
// dropping the partial frame) if the payload exceeds MaxPayloadLen.
func FinishFrame(b []byte, start int) ([]byte, error) {
	n := len(b) - start - HeaderLen
	if start < 0 || n < 0 {
		return b, &Error{Class: ErrTruncated, Layout: "frame", Field: "header", Offset: start, Detail: "FinishFrame without BeginFrame"}
	}
	if uint64(n) > MaxPayloadLen {
		e := FrameTooLarge(uint64(n), MaxPayloadLen)
		e.Offset += start
		return b[:start], e
	}
	binary.BigEndian.PutUint32(b[start+8:], uint32(n))
	return b, nil
}

// AppendFrame appends a whole frame (header and payload) to dst.
func AppendFrame(dst []byte, flags Flags, payload []byte) ([]byte, error) {
	if uint64(len(payload)) > MaxPayloadLen {
		e := FrameTooLarge(uint64(len(payload)), MaxPayloadLen)
		e.Offset += len(dst)
		return dst, e
	}
	dst = AppendHeader(dst, Header{Flags: flags, Length: uint32(len(payload))})
	return append(dst, payload...), nil
}

// FrameTooLarge returns the error every frame reader and writer of the
// module reports for a frame whose payload length is above limit (a
// reader's frame limit, or MaxPayloadLen): class ErrFrameTooLarge on the
// header's length field (Offset 8 from the frame's start), saying both
// numbers.
func FrameTooLarge(length uint64, limit uint32) *Error {
	return &Error{Class: ErrFrameTooLarge, Layout: "frame", Field: "length", Offset: 8,
		Detail: strconv.FormatUint(length, 10) + " > limit " + strconv.FormatUint(uint64(limit), 10)}
}

// Frame is a decoded frame. Payload aliases the buffer it was decoded from.
type Frame struct {
	Header
	// Payload is the frame's payload (len == Header.Length). Its capacity
	// is capped at its length, so appending to it never overwrites what
	// follows in the source buffer.
	Payload []byte
}

// ParseFrame decodes the first frame of b with the strict header checks of
// ParseHeader and returns it with the bytes that follow it (the next frame).
// A payload shorter than the header's length is ErrTruncated. maxPayload
// bounds Header.Length (ErrFrameTooLarge); 0 means DefaultMaxFrameBytes.
func ParseFrame(b []byte, maxPayload uint32) (f Frame, rest []byte, err error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Frame{}, b, err
	}
	if maxPayload == 0 {
		maxPayload = DefaultMaxFrameBytes
	}
	if h.Length > maxPayload {
		return Frame{}, b, FrameTooLarge(uint64(h.Length), maxPayload)
	}
	end := uint64(HeaderLen) + uint64(h.Length)
	if uint64(len(b)) < end {
		return Frame{}, b, &Error{Class: ErrTruncated, Layout: "frame", Field: "payload", Offset: len(b),
			Detail: "need " + strconv.FormatUint(end, 10) + " bytes, have " + strconv.Itoa(len(b))}
	}
	return Frame{Header: h, Payload: b[HeaderLen:end:end]}, b[end:], nil
}

// DecodeFrame decodes b as exactly one frame: like ParseFrame, but bytes
// after the announced payload are ErrTrailingBytes.
func DecodeFrame(b []byte, maxPayload uint32) (Frame, error) {
	f, rest, err := ParseFrame(b, maxPayload)
	if err == nil && len(rest) != 0 {
		return f, &Error{Class: ErrTrailingBytes, Layout: "frame", Field: "payload", Offset: len(b) - len(rest),
			Detail: strconv.Itoa(len(rest)) + " bytes after the frame"}
	}
	return f, err
}

// Reader reads frames from an io.Reader. It checks each header's length
// against its limit before reading or allocating anything for the
// payload, and its buffer grows with the bytes received, so a hostile
// length costs memory only as data arrives. By default it reuses one
// payload buffer, so steady-state reading allocates nothing
// (SetFreshPayloads gives each payload bytes of its own instead).
//
// A read error of the source does not lose the bytes already read: when
// the error was transient (a read deadline that interrupted a call), the
// next ReadFrame resumes the same frame, so the stream stays on a frame
// boundary. A Reader is not safe for concurrent use.
type Reader struct {
	r       io.Reader
	max     uint32
	lenient bool
	fresh   bool
	chunk   int // SetGrowChunk; 0: growChunk

	// Progress of the frame being read.
	hdr     [HeaderLen]byte
	hn      int // header bytes read
	h       Header
	haveHdr bool
	pn      int // payload bytes read
	buf     []byte
	// slab is the unused tail of the chunk that fresh payloads of small
	// frames are carved from (see carve).
	slab []byte
}

// NewReader returns a Reader on r with the DefaultMaxFrameBytes limit.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r, max: DefaultMaxFrameBytes}
}

// SetMaxPayload sets the payload limit (for example PreAuthMaxFrameBytes
// before a stream authenticates). 0 restores DefaultMaxFrameBytes.
func (r *Reader) SetMaxPayload(n uint32) {
	if n == 0 {
		n = DefaultMaxFrameBytes
	}
	if strconv.IntSize == 32 && n > math.MaxInt32 {
		n = math.MaxInt32 // a payload must fit in an int
	}
	r.max = n
}

// MaxPayload returns the current payload limit.
func (r *Reader) MaxPayload() uint32 { return r.max }

// SetLenientFlags makes ReadFrame accept frames with flag bits outside
// KnownFlags (magic and version are still checked), so that a receiver can
// skip such a frame, answer an error and stay on a frame boundary. The
// caller must then check Flags.CheckKnown itself before decoding the payload.
func (r *Reader) SetLenientFlags(on bool) { r.lenient = on }

// SetFreshPayloads chooses the buffer policy: with on, every payload
// ReadFrame returns has bytes of its own that no later call writes again,
// so values decoded from it may alias it and be kept (small payloads are
// carved from a shared chunk: one allocation per several frames); with
// off (the default) one buffer is reused and a payload is valid only
// until the next call.
func (r *Reader) SetFreshPayloads(on bool) {
	r.fresh = on
	if on && !r.haveHdr {
		r.buf = nil
	}
}

// SetGrowChunk bounds how far the payload buffer is allocated ahead of the
// bytes received: the first allocation for a payload is at most n bytes
// and each later one at most max(twice the bytes received, those bytes +
// n), either stretched to the whole payload when that is at most n/4
// more, so a header announcing a length its bytes do not back costs about n
// (a stalled or hostile peer before authentication, for example). A bound
// below the 64 KiB of the chunk fresh small payloads are carved from also
// gives each fresh payload an allocation of its own. 0 (or less) restores
// the default, 256 KiB. Allocating in smaller steps costs more copies for
// large frames.
func (r *Reader) SetGrowChunk(n int) { r.chunk = max(n, 0) }

// growStep is the bound SetGrowChunk set.
func (r *Reader) growStep() int {
	if r.chunk > 0 {
		return r.chunk
	}
	return growChunk
}

// Reset makes the Reader read from src, keeping its buffer and settings
// and dropping the progress of a frame read in part.
func (r *Reader) Reset(src io.Reader) {
	r.r = src
	r.hn, r.haveHdr, r.pn = 0, false, 0
}

// growChunk bounds how far the payload buffer grows ahead of the bytes
// actually received, so a hostile length costs memory only as data arrives.
const growChunk = 256 << 10

// slabSize and slabMax: with fresh payloads, the payload of a frame of at
// most slabMax bytes is carved from a shared slabSize chunk instead of
// getting an allocation of its own. Every byte of a chunk belongs to one
// frame only and is never written again once that frame is returned; a
// kept payload keeps its chunk (at most slabSize bytes) alive.
const (
	slabSize = 64 << 10
	slabMax  = 16 << 10
)

// ReadFrame reads the next frame. Unless SetFreshPayloads is on, the
// returned Payload aliases the Reader's buffer and is valid only until the
// next call; copy it to keep it.
//
// At a clean end of stream on a frame boundary it returns io.EOF. A stream
// that ends inside a header or payload returns an error that matches both
// ErrTruncated and io.ErrUnexpectedEOF. A bad header, or a length above
// the limit (FrameTooLarge), is reported before any payload byte is read;
// the stream is then no longer on a frame boundary and must be abandoned.
// Any other error is the source's: the bytes read so far are kept and the
// next call resumes the frame (after a read deadline, for example).
func (r *Reader) ReadFrame() (Frame, error) {
	for !r.haveHdr {
		n, err := r.r.Read(r.hdr[r.hn:])
		r.hn += n
		if r.hn == HeaderLen {
			if err := r.header(); err != nil {
				return Frame{Header: r.h}, err
			}
			break
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				hn := r.hn
				r.hn = 0
				if hn == 0 && err == io.EOF {
					return Frame{}, io.EOF
				}
				return Frame{}, &Error{Class: ErrTruncated, Layout: "frame", Field: "header", Offset: hn,
					Detail: "stream ended inside a header", Err: io.ErrUnexpectedEOF}
			}
			return Frame{}, err
		}
	}
	want := int(r.h.Length)
	for r.pn < want {
		if r.pn == len(r.buf) {
			r.grow(r.pn, want)
		}
		n, err := r.r.Read(r.buf[r.pn:min(len(r.buf), want)])
		r.pn += n
		if err != nil && r.pn < want {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				h, got := r.h, r.pn
				r.hn, r.haveHdr, r.pn = 0, false, 0
				return Frame{Header: h}, &Error{Class: ErrTruncated, Layout: "frame", Field: "payload", Offset: HeaderLen + got,
					Detail: "stream finished after " + strconv.Itoa(got) + " of " + strconv.Itoa(want) + " bytes", Err: io.ErrUnexpectedEOF}
			}
			return Frame{Header: r.h}, err
		}
	}
	f := Frame{Header: r.h, Payload: r.buf[:want:want]}
	r.hn, r.haveHdr, r.pn = 0, false, 0
	if r.fresh {
		r.buf = nil
	}
	return f, nil
}

// header checks the header just read and prepares the payload buffer. A
// refused header ends the frame (the next call reads a new header).
func (r *Reader) header() error {
	var err error
	if r.lenient {
		r.h, err = ParseHeaderLenient(r.hdr[:])
	} else {
		r.h, err = ParseHeader(r.hdr[:])
	}
	if err == nil && r.h.Length > r.max {
		err = FrameTooLarge(uint64(r.h.Length), r.max)
	}
	if err != nil {
		r.hn = 0
		return err
	}
	r.haveHdr, r.pn = true, 0
	switch want := int(r.h.Length); {
	case !r.fresh:
		r.buf = r.buf[:cap(r.buf)]
	case want <= slabMax && r.growStep() >= slabSize:
		r.buf = r.carve(want)
	default:
		r.buf = nil
	}
	return nil
}

// carve returns n fresh bytes (n <= slabMax), capacity capped at n.
func (r *Reader) carve(n int) []byte {
	if len(r.slab) < n {
		r.slab = make([]byte, slabSize)
	}
	b := r.slab[:n:n]
	r.slab = r.slab[n:]
	return b
}

// grow enlarges the buffer (keeping its first have bytes) towards want, to
// at most max(2*have, have+growStep()) (or want, when that is at most a
// quarter step more): memory follows the bytes received,
// not the announced length. A buffer already large enough is left alone.
func (r *Reader) grow(have, want int) {
	step := r.growStep()
	target := min(want, max(2*have, have+step))
	if want-target <= step/4 {
		// A payload just over a step (a 4 x 64 KiB batch and its
		// header) gets one allocation, not two and a copy; the bytes
		// ahead of those received stay within 5/4 of a step.
		target = want
	}
	if target <= len(r.buf) {
		return
	}
	if target <= cap(r.buf) {
		r.buf = r.buf[:target]
		return
	}
	nb := make([]byte, target)
	copy(nb, r.buf[:have])
	r.buf = nb
}

// SwapBuffer replaces the buffer later frames are read into (with fresh
// payloads off) by b, which may be nil, and returns the previous one at
// its full capacity: the payload of the frame ReadFrame returned last
// aliases it, and the Reader never writes it again, so the caller owns it
// (to recycle it once every value that aliases it is dropped). Between
// frames only: while a frame is read in part (ReadFrame was interrupted)
// it changes nothing and returns nil.
func (r *Reader) SwapBuffer(b []byte) []byte {
	if r.haveHdr || r.hn != 0 {
		return nil
	}
	old := r.buf[:cap(r.buf)]
	r.buf = b
	return old
}

// Writer writes frames to an io.Writer, each frame with a single Write call
// (so a frame is never interleaved with another writer's bytes on a stream
// that serialises Write calls). A Writer is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame writes a frame with the given flags and payload.
func (w *Writer) WriteFrame(flags Flags, payload []byte) error {
	b, err := AppendFrame(w.buf[:0], flags, payload)
	if err != nil {
		return err
	}
	w.buf = b
	_, err = w.w.Write(b)
	return err
}

// WriteEncoded writes frame, an already encoded whole frame such as one
// produced by an Append encoder, with a single Write.
func (w *Writer) WriteEncoded(frame []byte) error {
	_, err := w.w.Write(frame)
	return err
}

// Buffer returns the Writer's scratch buffer emptied, for encoding a frame
// in place without allocating; pass the result to WriteEncoded. The buffer is
// retained for the next call.
func (w *Writer) Buffer() []byte { return w.buf[:0] }

// Keep hands a (possibly grown) buffer back to the Writer for reuse.
func (w *Writer) Keep(b []byte) { w.buf = b[:0] }
