package felix

import (
	"encoding/binary"
	"strconv"
	"unicode/utf8"
)

// cursor is a sticky-error reader over one binary payload, in the manner of
// franz-go's kbin.Reader: every read checks the remaining bytes, and the
// first failure is recorded (class, field and offset) while later reads
// return zero values, so a decoder reads a whole section and checks c.err
// once instead of after every field.
//
// Slices returned by the cursor alias the input with their capacity capped
// at their length.
type cursor struct {
	b      []byte
	off    int
	layout string
	err    *Error
}

// rest returns the number of unread bytes.
func (c *cursor) rest() int { return len(c.b) - c.off }

// fail records err as the first failure (later failures are ignored).
func (c *cursor) fail(class error, field string, off int, detail string) {
	if c.err == nil {
		c.err = &Error{Class: class, Layout: c.layout, Field: field, Offset: off, Detail: detail}
	}
}

// need reports whether n more bytes are available, recording ErrTruncated
// for field when they are not.
func (c *cursor) need(n int, field string) bool {
	if c.err != nil {
		return false
	}
	if n < 0 || c.rest() < n {
		c.fail(ErrTruncated, field, c.off, "need "+strconv.Itoa(n)+" bytes, have "+strconv.Itoa(c.rest()))
		return false
	}
	return true
}

func (c *cursor) u8(field string) byte {
	if !c.need(1, field) {
		return 0
	}
	v := c.b[c.off]
	c.off++
	return v
}

func (c *cursor) u16(field string) uint16 {
	if !c.need(2, field) {
		return 0
	}
	v := binary.BigEndian.Uint16(c.b[c.off:])
	c.off += 2
	return v
}

func (c *cursor) u32(field string) uint32 {
	if !c.need(4, field) {
		return 0
	}
	v := binary.BigEndian.Uint32(c.b[c.off:])
	c.off += 4
	return v
}

func (c *cursor) u64(field string) uint64 {
	if !c.need(8, field) {
		return 0
	}
	v := binary.BigEndian.Uint64(c.b[c.off:])
	c.off += 8
	return v
}

// bytes reads n bytes. n comes from a length field and is bounded against
// the remaining bytes before anything is sliced.
func (c *cursor) bytes(n int, field string) []byte {
	if !c.need(n, field) {
		return nil
	}
	end := c.off + n
	v := c.b[c.off:end:end]
	c.off = end
	return v
}

// str16 reads a u16 length and that many bytes.
func (c *cursor) str16(field string) []byte {
	n := c.u16(field)
	return c.bytes(int(n), field)
}

// str8 reads a u8 length and that many bytes.
func (c *cursor) str8(field string) []byte {
	n := c.u8(field)
	return c.bytes(int(n), field)
}

// text records ErrInvalidUTF8 for field (which started at off) unless b is
// valid UTF-8.
func (c *cursor) text(b []byte, field string, off int) {
	if c.err == nil && !utf8.Valid(b) {
		c.fail(ErrInvalidUTF8, field, off, "not valid UTF-8")
	}
}

// end records ErrTrailingBytes when unread bytes remain. Upstream decoders
// ignore them; this package rejects them on purpose.
func (c *cursor) end() {
	if c.err == nil && c.rest() != 0 {
		c.fail(ErrTrailingBytes, "payload", c.off, strconv.Itoa(c.rest())+" bytes after the layout")
	}
}

// capped returns b[lo:hi] with its capacity capped at its length.
func capped(b []byte, lo, hi int) []byte { return b[lo:hi:hi] }

// encErr builds an encoder error (Offset -1: not about input bytes).
func encErr(class error, layout, field, detail string) *Error {
	return &Error{Class: class, Layout: layout, Field: field, Offset: -1, Detail: detail}
}

// checkStr16 validates a str16 field before encoding: at most 65,535 bytes
// (ErrFrameTooLarge) and, when text is set, valid UTF-8 (ErrInvalidUTF8).
func checkStr16(layout, field string, s string, text bool) error {
	if len(s) > 0xFFFF {
		return encErr(ErrFrameTooLarge, layout, field, strconv.Itoa(len(s))+" bytes > 65535")
	}
	if text && !utf8.ValidString(s) {
		return encErr(ErrInvalidUTF8, layout, field, "not valid UTF-8")
	}
	return nil
}

// appendStr16 appends a u16 length and s. The caller has checked the length.
func appendStr16(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

// appendBytes16 appends a u16 length and b. The caller has checked the length.
func appendBytes16(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(b)))
	return append(dst, b...)
}

// appendBytes32 appends a u32 length and b. The caller has checked the length.
func appendBytes32(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// payloadsLen returns the total length of ps and whether every payload fits
// a u32 length field. It is the one pass over the payloads an encoder makes
// before writing them (the frame length and the per-payload check at once).
func payloadsLen(ps [][]byte) (sum int, ok bool) {
	var or uint64
	for _, p := range ps {
		sum += len(p)
		or |= uint64(len(p))
	}
	return sum, or <= MaxPayloadLen
}

// bigPayload returns the index of the first payload of ps over the u32
// length field, for the error of an encoder whose payloadsLen failed.
func bigPayload(ps [][]byte) int {
	for i, p := range ps {
		if uint64(len(p)) > MaxPayloadLen {
			return i
		}
	}
	return 0
}

// putPayloads writes every payload of ps as (u32 length, bytes) at the start
// of out, which the caller sized exactly, and returns the bytes written.
// Runs of payloads of up to 256 bytes go to putRun (one assembly call for
// the run on amd64 with AVX); the others, and every payload elsewhere, are
// written here into the sized slice (a store and a memmove each, no
// capacity checks).
func putPayloads(out []byte, ps [][]byte) int {
	o := 0
	for i := 0; i < len(ps); i++ {
		w, k := putRun(out[o:], ps[i:], nil)
		o += w
		if i += k; i == len(ps) {
			break
		}
		p := ps[i]
		e := out[o : o+4+len(p)]
		binary.BigEndian.PutUint32(e, uint32(len(p)))
		copy(e[4:], p)
		o += 4 + len(p)
	}
	return o
}

// putTimedPayloads is putPayloads with an 8-byte timestamp before each
// entry: ts[i] leads payload i (len(ts) == len(ps), checked by the caller).
func putTimedPayloads(out []byte, ps [][]byte, ts []uint64) int {
	o := 0
	ts = ts[:len(ps)]
	for i := 0; i < len(ps); i++ {
		w, k := putRun(out[o:], ps[i:], ts[i:])
		o += w
		if i += k; i == len(ps) {
			break
		}
		p := ps[i]
		e := out[o : o+12+len(p)]
		binary.BigEndian.PutUint64(e, ts[i])
		binary.BigEndian.PutUint32(e[8:], uint32(len(p)))
		copy(e[12:], p)
		o += 12 + len(p)
	}
	return o
}

// grow makes room for n more bytes in dst with at most one allocation.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	nb := make([]byte, len(dst), len(dst)+n)
	copy(nb, dst)
	return nb
}

// checkFrameSize refuses a frame whose payload (frameLen minus the header)
// exceeds the 32-bit length field.
func checkFrameSize(layout string, frameLen int) error {
	if uint64(frameLen-HeaderLen) > MaxPayloadLen {
		return encErr(ErrFrameTooLarge, layout, "length", "payload of "+strconv.Itoa(frameLen-HeaderLen)+" bytes")
	}
	return nil
}

// indexLen is how many entry end offsets a payloadRun records while it
// validates, so that iterating over those entries reads no length field
// again and is free of the serial length-to-next-entry dependency.
const indexLen = 64

// payloadRun is the validated payload section of a batch: count entries of
// ([prefix bytes], u32 len, len bytes). It is validated once (scanExact on
// the fast path, validate on the cursor path) and then walked without
// checks by the views' iterators: through ends for the first indexLen
// entries, then by reading each length field again.
type payloadRun struct {
	body  []byte
	count int
	hdr   int // bytes before each payload: prefix + 4
	// ends[i] is the end offset in body of entry i, for i < min(count, indexLen).
	ends [indexLen]uint32
}

// scan walks cnt entries of hdr-4 prefix bytes, a u32 length and that many
// bytes from the start of b, checking each length against the bytes that
// remain, and records the end offsets of the first indexLen entries in
// ends. It returns the offset after the last entry and i == cnt, or, at the
// first entry that does not fit, its index i and start p. b must be at most
// MaxPayloadLen bytes long (offsets are recorded as uint32).
//
// This loop is the serial part of a decode: where entry i+1 starts depends
// on entry i's length. It is written so that the dependency chain is a
// load, a byte swap and an add (lens is b shifted by the prefix, so the
// load's address is just p), with the checks branching off it.
func scan(b []byte, cnt, hdr int, ends *[indexLen]uint32) (p, i int) {
	n := len(b)
	if n < hdr {
		return 0, 0 // not even one entry (the caller checks cnt)
	}
	lens := b[hdr-4:] // lens[p:p+4] is the length field of the entry at p
	k := min(cnt, indexLen)
	for ; i < k; i++ {
		if n-p < hdr {
			return p, i
		}
		q := p + hdr
		e := q + be32(lens, p)
		if e > n {
			return p, i
		}
		ends[i] = uint32(e)
		p = e
	}
	for ; i < cnt; i++ {
		if n-p < hdr {
			return p, i
		}
		q := p + hdr
		e := q + be32(lens, p)
		if e > n {
			return p, i
		}
		p = e
	}
	return p, i
}

// fits bounds count entries of hdr bytes each (plus their payloads)
// against the n bytes that remain: count < 2^32 and hdr <= 12, so the
// product cannot overflow. A hostile count thus fails before any loop.
func fits(count uint32, hdr, n int) bool { return uint64(count)*uint64(hdr) <= uint64(n) }

// scanExact is the fast path of a batch decode: it reports whether b is
// exactly count well-formed entries (no trailing bytes) and, if so, records
// them in r. On false the caller's cursor-based path finds and reports the
// error.
func (r *payloadRun) scanExact(b []byte, count uint32, hdr int) bool {
	if !fits(count, hdr, len(b)) || uint64(len(b)) > MaxPayloadLen {
		return false
	}
	cnt := int(count)
	p, i := scan(b, cnt, hdr, &r.ends)
	if i != cnt || p != len(b) {
		return false
	}
	r.body, r.count, r.hdr = b[:len(b):len(b)], cnt, hdr
	return true
}

// validate checks count entries of hdr-4 prefix bytes, a u32 length and
// that many bytes from the cursor's position and records them, reporting
// the first failure on c. The count is first bounded by the remaining bytes
// (each entry needs hdr bytes), so a hostile count costs nothing; then every
// length is checked against the bytes that remain (scan).
func (r *payloadRun) validate(c *cursor, count uint32, countOff, hdr int) {
	b := c.b[c.off:]
	n := len(b)
	if !fits(count, hdr, n) {
		c.fail(ErrTruncated, "count", countOff, "count "+strconv.FormatUint(uint64(count), 10)+" exceeds the "+
			strconv.Itoa(n)+" remaining bytes")
		return
	}
	if uint64(n) > MaxPayloadLen {
		// Only a caller that parses a slice of its own can get here (a
		// frame's payload is shorter); the index holds 32-bit offsets.
		c.fail(ErrFrameTooLarge, "payload", c.off, strconv.Itoa(n)+" bytes")
		return
	}
	cnt := int(count)
	p, i := scan(b, cnt, hdr, &r.ends)
	if i < cnt {
		if n-p < hdr {
			c.fail(ErrTruncated, "payload", c.off+p, "entry "+strconv.Itoa(i)+" needs "+strconv.Itoa(hdr)+" bytes")
		} else {
			c.fail(ErrTruncated, "payload", c.off+p+hdr, "payload "+strconv.Itoa(i)+" of "+
				strconv.Itoa(be32(b, p+hdr-4))+" bytes, "+strconv.Itoa(n-p-hdr)+" remain")
		}
		return
	}
	r.body, r.count, r.hdr = b[:p:p], cnt, hdr
	c.off += p
}

// str16At reads the u16 length at b[off:] and that many bytes (capacity
// capped), returning the offset after them; ok is false when either does
// not fit. off must be at most len(b).
func str16At(b []byte, off int) (s []byte, next int, ok bool) {
	if len(b)-off < 2 {
		return nil, off, false
	}
	end := off + 2 + int(binary.BigEndian.Uint16(b[off:]))
	if end > len(b) {
		return nil, off, false
	}
	return b[off+2 : end : end], end, true
}

// asciiOnly reports whether every byte of b is below 0x80 (and so b is
// valid UTF-8), eight bytes at a time.
func asciiOnly(b []byte) bool {
	var acc uint64
	for len(b) >= 8 {
		acc |= binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	for _, x := range b {
		acc |= uint64(x)
	}
	return acc&0x8080808080808080 == 0
}

// indexed returns the recorded end offsets: one for each of the first
// min(count, indexLen) entries.
func (r *payloadRun) indexed() []uint32 { return r.ends[:min(r.count, indexLen)] }

// be32 reads the big-endian u32 at b[i:]. Slicing a fixed-size window
// costs one bounds check and keeps the load's address a plain base+index
// (no clamping of the pointer), which matters on the serial
// length-to-next-entry dependency of a batch walk.
func be32(b []byte, i int) int { return int(binary.BigEndian.Uint32(b[i : i+4])) }

// be64 reads the big-endian u64 at b[i:] (see be32).
func be64(b []byte, i int) uint64 { return binary.BigEndian.Uint64(b[i : i+8]) }
