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
// ([prefix bytes], u32 len, len bytes). It is validated once (validate) and
// then walked without checks (payloads, events).
type payloadRun struct {
	body  []byte
	count int
	hdr   int // bytes before each payload: prefix + 4
	// ends[i] is the end offset in body of entry i, for i < min(count, indexLen).
	ends [indexLen]uint32
}

// validate checks count entries from the cursor's position and records
// them. The count is first bounded by the remaining bytes (each entry needs
// prefix+4), so a hostile count costs nothing; then every length is
// checked against the bytes that remain.
//
// The loop is the serial part of a decode (where entry i+1 starts depends
// on entry i's length), so it is kept to a load, a byte swap and an add on
// that chain; the checks branch off it.
func (r *payloadRun) validate(c *cursor, count uint32, countOff, prefix int) {
	b := c.b[c.off:]
	hdr := prefix + 4
	n := len(b)
	// count < 2^32 and hdr <= 12, so the product cannot overflow.
	if uint64(count)*uint64(hdr) > uint64(n) {
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
	k := min(cnt, indexLen)
	lens := b[prefix:] // lens[p:p+4] is the length field of the entry at p
	p, i := 0, 0
	for ; i < k; i++ {
		if n-p < hdr {
			break
		}
		q := p + hdr
		e := q + be32(lens, p)
		if e > n {
			break
		}
		r.ends[i] = uint32(e)
		p = e
	}
	if i == k {
		for ; i < cnt; i++ {
			if n-p < hdr {
				break
			}
			q := p + hdr
			e := q + be32(lens, p)
			if e > n {
				break
			}
			p = e
		}
	}
	if i < cnt {
		if n-p < hdr {
			c.fail(ErrTruncated, "payload", c.off+p, "entry "+strconv.Itoa(i)+" needs "+strconv.Itoa(hdr)+" bytes")
		} else {
			c.fail(ErrTruncated, "payload", c.off+p+hdr, "payload "+strconv.Itoa(i)+" of "+
				strconv.Itoa(be32(b, p+prefix))+" bytes, "+strconv.Itoa(n-p-hdr)+" remain")
		}
		return
	}
	r.body, r.count, r.hdr = b[:p:p], cnt, hdr
	c.off += p
}

// end returns the end offset in body of entry i, which starts at start:
// from the index for the first indexLen entries, else from its length
// field. Small enough to inline into the iterators.
func (r *payloadRun) end(i, start, hdr int) int {
	if i < indexLen {
		return int(r.ends[i])
	}
	return start + hdr + be32(r.body, start+hdr-4)
}

// be32 reads the big-endian u32 at b[i:] by index rather than by
// re-slicing, which keeps slice-pointer arithmetic off the serial
// length-to-next-entry dependency of a batch walk.
func be32(b []byte, i int) int {
	_ = b[i+3]
	return int(uint32(b[i])<<24 | uint32(b[i+1])<<16 | uint32(b[i+2])<<8 | uint32(b[i+3]))
}
