package felix

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// This file is the small JSON runtime under the generated message code
// (messages_gen.go): serde_json-compatible appenders that write straight
// into a caller's buffer, and a sticky-error reader that walks the members of
// an object without building maps.

const jsonLayout = "json_message"

// maxJSONDepth bounds the nesting of arrays and objects (the top-level
// object included): like serde_json, whose recursion limit of 128 refuses
// the 128th level, at most 127 levels are accepted. It also keeps the
// recursive skip from exhausting the stack.
const maxJSONDepth = 128

// ---------------------------------------------------------------------------
// Appenders

// jsonNoEscape[c] is true for the ASCII bytes a string copies verbatim.
var jsonNoEscape = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string escaped the way serde_json
// does: only '"', '\\' and the C0 controls are escaped (\b \f \n \r \t, else
// \u00xx with lowercase hex); '/', '<', '>', '&', U+007F, U+2028, U+2029 and
// all other non-ASCII text are written as raw UTF-8. Invalid UTF-8 (which
// decoding never produces) is replaced by U+FFFD so the output stays valid.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if jsonNoEscape[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\ufffd"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendJSONBytes appends b as a JSON string holding padded standard base64.
func appendJSONBytes(dst []byte, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

func appendJSONUint(dst []byte, v uint64) []byte { return strconv.AppendUint(dst, v, 10) }

func appendJSONInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }

func appendJSONBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

func appendJSONBytesList(dst []byte, l [][]byte) []byte {
	dst = append(dst, '[')
	for i, b := range l {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONBytes(dst, b)
	}
	return append(dst, ']')
}

func appendJSONStringList(dst []byte, l []string) []byte {
	dst = append(dst, '[')
	for i, s := range l {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, s)
	}
	return append(dst, ']')
}

func appendJSONUintList[T uint16 | uint32 | uint64](dst []byte, l []T) []byte {
	dst = append(dst, '[')
	for i, v := range l {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(v), 10)
	}
	return append(dst, ']')
}

// appendMemberSep writes the ',' before a member of an object whose first
// member may have been omitted: none is needed right after the '{'.
func appendMemberSep(dst []byte) []byte {
	if len(dst) > 0 && dst[len(dst)-1] != '{' {
		dst = append(dst, ',')
	}
	return dst
}

// ---------------------------------------------------------------------------
// Reader

// jsonDecoder reads one JSON payload. The first failure is kept in err and
// turns every later call into a no-op returning zero values, so decoders
// read as straight-line code and check the error once.
type jsonDecoder struct {
	buf     []byte
	pos     int
	depth   int
	err     *Error
	scratch []byte
	// typeSeen records that the top-level "type" member was consumed.
	typeSeen bool
	// escaped reports that the last string read by rawString held an
	// escape, so its bytes live in scratch rather than in buf.
	escaped bool
	// arena is the chunk the decoded strings and byte values are carved
	// from (see alloc).
	arena []byte
	// appendTo makes alloc append every value to arena, the caller's
	// buffer, however large (ParseCacheEvent).
	appendTo bool
}

// arenaMax is the largest value alloc carves from the arena; larger ones
// get an allocation of their own, so a big payload is never kept alive by
// (or keeps alive) the small members around it.
const arenaMax = 256

// arenaChunk bounds the size of one arena chunk.
const arenaChunk = 1024

// alloc returns n new bytes for a decoded string or byte value. Values up
// to arenaMax bytes share one allocation: a chunk sized for what the rest
// of the input typically decodes to (3/4 of it: base64 turns 4 characters
// into 3 bytes, unescaping only shrinks text, and member names and
// punctuation decode to nothing), capped at arenaChunk, so a typical message's strings and payload cost one
// allocation together instead of one each. The slice's capacity is capped
// at n: appending to one value never overwrites another. The chunk is only
// written through the slices handed out, each exactly once, before the
// value is returned, which is what makes the strings carved from it (see
// str) immutable. In appendTo mode the values are appended to the caller's
// buffer instead, and those strings must not outlive the call.
func (d *jsonDecoder) alloc(n int) []byte {
	if d.appendTo {
		d.arena = slices.Grow(d.arena, n)
	} else if n > arenaMax {
		return make([]byte, n)
	}
	if cap(d.arena)-len(d.arena) < n {
		size := min((len(d.buf)-d.pos)*3/4+n, arenaChunk)
		d.arena = make([]byte, 0, max(size, n))
	}
	o := len(d.arena)
	d.arena = d.arena[:o+n]
	return d.arena[o : o+n : o+n]
}

func (d *jsonDecoder) fail(field, detail string) {
	if d.err == nil {
		d.err = &Error{Class: ErrInvalidJSON, Layout: jsonLayout, Field: field, Offset: d.pos, Detail: detail}
	}
}

func (d *jsonDecoder) failAt(class error, field string, off int, detail string) {
	if d.err == nil {
		d.err = &Error{Class: class, Layout: jsonLayout, Field: field, Offset: off, Detail: detail}
	}
}

// ws skips JSON whitespace and returns the next byte (0 at the end).
func (d *jsonDecoder) ws() byte {
	for d.pos < len(d.buf) {
		switch c := d.buf[d.pos]; c {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return c
		}
	}
	return 0
}

// null consumes a JSON null and reports whether there was one.
func (d *jsonDecoder) null() bool {
	if d.err != nil {
		return false
	}
	if d.ws() == 'n' && d.literal("null") {
		return true
	}
	return false
}

func (d *jsonDecoder) literal(lit string) bool {
	if len(d.buf)-d.pos >= len(lit) && string(d.buf[d.pos:d.pos+len(lit)]) == lit {
		d.pos += len(lit)
		return true
	}
	return false
}

// kindName names the JSON type starting with c, for error details.
func kindName(c byte) string {
	switch {
	case c == '"':
		return "string"
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == 't' || c == 'f':
		return "boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "number"
	case c == 0:
		return "end of input"
	}
	return "invalid JSON"
}

func (d *jsonDecoder) wrongType(field, want string) {
	c := d.ws()
	d.fail(field, "expected "+want+", found "+kindName(c))
}

// beginObject consumes the '{' of an object value.
func (d *jsonDecoder) beginObject(field string) bool {
	if d.err != nil {
		return false
	}
	if d.ws() != '{' {
		d.wrongType(field, "object")
		return false
	}
	d.depth++
	if d.depth >= maxJSONDepth {
		d.fail(field, "nesting too deep")
		return false
	}
	d.pos++
	return true
}

// member advances to the i-th member of the current object and returns its
// key (valid until the next read). It returns false, having consumed the
// '}', when the object ends, or on error.
func (d *jsonDecoder) member(i int, field string) ([]byte, bool) {
	if d.err != nil {
		return nil, false
	}
	c := d.ws()
	if c == '}' {
		d.pos++
		d.depth--
		return nil, false
	}
	if i > 0 {
		if c != ',' {
			d.fail(field, "expected ',' or '}' in object")
			return nil, false
		}
		d.pos++
		c = d.ws()
	}
	if c != '"' {
		d.fail(field, "expected a member name")
		return nil, false
	}
	key, ok := d.rawString(field)
	if !ok {
		return nil, false
	}
	if d.ws() != ':' {
		d.fail(field, "expected ':' after a member name")
		return nil, false
	}
	d.pos++
	return key, true
}

// beginArray consumes the '[' of an array value.
func (d *jsonDecoder) beginArray(field string) bool {
	if d.err != nil {
		return false
	}
	if d.ws() != '[' {
		d.wrongType(field, "array")
		return false
	}
	d.depth++
	if d.depth >= maxJSONDepth {
		d.fail(field, "nesting too deep")
		return false
	}
	d.pos++
	return true
}

// elem advances to the i-th element of the current array; it returns false,
// having consumed the ']', when the array ends, or on error.
func (d *jsonDecoder) elem(i int, field string) bool {
	if d.err != nil {
		return false
	}
	c := d.ws()
	if c == ']' {
		d.pos++
		d.depth--
		return false
	}
	if i > 0 {
		if c != ',' {
			d.fail(field, "expected ',' or ']' in array")
			return false
		}
		d.pos++
		if d.ws() == ']' {
			d.fail(field, "trailing comma in array")
			return false
		}
	}
	return true
}

// dup records member bit in *seen and fails if it was already there.
func (d *jsonDecoder) dup(seen *uint64, bit uint, field string) {
	if *seen&(1<<bit) != 0 {
		d.fail(field, "duplicate member")
		return
	}
	*seen |= 1 << bit
}

// missing fails naming the first required member absent from seen.
func (d *jsonDecoder) missing(seen, required uint64, names []string) {
	if d.err != nil || seen&required == required {
		return
	}
	for i, n := range names {
		if required&(1<<uint(i)) != 0 && seen&(1<<uint(i)) == 0 {
			d.fail(n, "missing required member")
			return
		}
	}
}

// rawString reads a JSON string (the cursor is on its opening quote) and
// returns its unescaped bytes: a slice of the input when the string holds
// no escape, else of the decoder's scratch buffer. Raw control characters,
// bad escapes, lone surrogates and invalid UTF-8 are refused.
func (d *jsonDecoder) rawString(field string) ([]byte, bool) {
	if d.err != nil {
		return nil, false
	}
	if d.pos >= len(d.buf) || d.buf[d.pos] != '"' {
		d.wrongType(field, "string")
		return nil, false
	}
	d.pos++
	start := d.pos
	b := d.buf
	i := start
	// Eight bytes at a time while none of them is special: a quote, a
	// backslash, a control character or a non-ASCII byte.
	for len(b)-i >= 8 {
		if x := binary.LittleEndian.Uint64(b[i:]); swarSpecial(x) {
			break
		}
		i += 8
	}
	for i < len(b) {
		c := b[i]
		if jsonNoEscape[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			d.pos = i + 1
			d.escaped = false
			return b[start:i], true
		case c == '\\':
			d.scratch = append(d.scratch[:0], b[start:i]...)
			d.pos = i
			return d.escapedString(field)
		case c < 0x20:
			d.pos = i
			d.fail(field, "control character in string")
			return nil, false
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				d.failAt(ErrInvalidUTF8, field, i, "invalid UTF-8 in string")
				return nil, false
			}
			i += size
		}
	}
	d.pos = len(b)
	d.fail(field, "unterminated string")
	return nil, false
}

// swarSpecial reports whether any of the eight bytes packed in x is '"',
// '\\', below 0x20 or at least 0x80. The per-byte tests are the classic
// "has a byte below n" one, (x - n*0x01..)&0x80..: without a borrow a byte's
// top bit comes out set only if it was below n or had its top bit set
// already (flagged anyway), and a borrow starts only at a byte below n, so
// the OR of all four terms is non-zero exactly when one byte is special.
func swarSpecial(x uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	q := x ^ ('"' * lo)
	bs := x ^ ('\\' * lo)
	return ((x-0x20*lo)|(q-lo)|(bs-lo)|x)&hi != 0
}

// escapedString continues rawString from the first backslash, building the
// unescaped text in d.scratch.
func (d *jsonDecoder) escapedString(field string) ([]byte, bool) {
	b := d.buf
	i := d.pos
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			d.pos = i + 1
			d.escaped = true
			return d.scratch, true
		case c == '\\':
			if i+1 >= len(b) {
				d.pos = len(b)
				d.fail(field, "unterminated string")
				return nil, false
			}
			e := b[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				d.scratch = append(d.scratch, e)
			case 'b':
				d.scratch = append(d.scratch, '\b')
			case 'f':
				d.scratch = append(d.scratch, '\f')
			case 'n':
				d.scratch = append(d.scratch, '\n')
			case 'r':
				d.scratch = append(d.scratch, '\r')
			case 't':
				d.scratch = append(d.scratch, '\t')
			case 'u':
				r, ok := hex4(b, i)
				if !ok {
					d.pos = i
					d.fail(field, "invalid \\u escape")
					return nil, false
				}
				i += 4
				if r >= 0xD800 && r < 0xDC00 {
					// A high surrogate must be followed by an escaped low one.
					var lo rune
					if i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
						lo, ok = hex4(b, i+2)
					} else {
						ok = false
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						d.pos = i
						d.fail(field, "lone leading surrogate in \\u escape")
						return nil, false
					}
					i += 6
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				} else if r >= 0xDC00 && r <= 0xDFFF {
					d.pos = i
					d.fail(field, "lone trailing surrogate in \\u escape")
					return nil, false
				}
				d.scratch = utf8.AppendRune(d.scratch, r)
			default:
				d.pos = i - 1
				d.fail(field, "invalid escape")
				return nil, false
			}
		case c < 0x20:
			d.pos = i
			d.fail(field, "control character in string")
			return nil, false
		case c < utf8.RuneSelf:
			d.scratch = append(d.scratch, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				d.failAt(ErrInvalidUTF8, field, i, "invalid UTF-8 in string")
				return nil, false
			}
			d.scratch = append(d.scratch, b[i:i+size]...)
			i += size
		}
	}
	d.pos = len(b)
	d.fail(field, "unterminated string")
	return nil, false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// str reads a string value.
func (d *jsonDecoder) str(field string) string {
	if d.err != nil {
		return ""
	}
	if d.ws() != '"' {
		d.wrongType(field, "string")
		return ""
	}
	s, ok := d.rawString(field)
	if !ok || len(s) == 0 {
		return ""
	}
	b := d.alloc(len(s))
	copy(b, s)
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// bytes reads a string holding padded standard base64 and decodes it
// strictly (canonical padding, zero trailing bits, no whitespace).
func (d *jsonDecoder) bytes(field string) []byte {
	if d.err != nil {
		return nil
	}
	if d.ws() != '"' {
		d.wrongType(field, "base64 string")
		return nil
	}
	at := d.pos
	// Fast path: decode straight from the input up to the next quote. No
	// character outside the base64 alphabet can pass the decoder, so a
	// success means the text was a plain JSON string (no escape, control
	// or non-ASCII byte) holding strict base64: what the path below
	// accepts. Anything else takes that path, which words the error.
	if q := bytes.IndexByte(d.buf[at+1:], '"'); q > 0 && q%4 == 0 {
		t := d.buf[at+1 : at+1+q]
		if out := d.alloc(base64DecodedLen(t)); decodeBase64Strict(out, t) {
			d.pos, d.escaped = at+2+q, false
			return out
		}
	}
	s, ok := d.rawString(field)
	if !ok {
		return nil
	}
	if len(s)%4 != 0 {
		d.failAt(ErrInvalidJSON, field, at, "invalid base64: length not a multiple of 4")
		return nil
	}
	if len(s) == 0 {
		return []byte{}
	}
	if out := d.alloc(base64DecodedLen(s)); decodeBase64Strict(out, s) {
		return out
	}
	// Not strict base64: the standard decoder words the error.
	for _, c := range s {
		if c == '\r' || c == '\n' {
			d.failAt(ErrInvalidJSON, field, at, "invalid base64: whitespace")
			return nil
		}
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Strict().Decode(out, s)
	if err != nil {
		d.failAt(ErrInvalidJSON, field, at, "invalid base64: "+err.Error())
		return nil
	}
	return out[:n]
}

// number reads the integer token at the cursor: its sign and magnitude.
// Fractions, exponents, leading zeros, "-0" (a float for serde_json) and
// magnitudes above 2^64-1 are refused.
func (d *jsonDecoder) number(field string) (neg bool, mag uint64, ok bool) {
	if d.err != nil {
		return false, 0, false
	}
	c := d.ws()
	if c != '-' && (c < '0' || c > '9') {
		d.wrongType(field, "integer")
		return false, 0, false
	}
	b := d.buf
	i := d.pos
	if c == '-' {
		neg = true
		i++
	}
	digits := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		dgt := uint64(b[i] - '0')
		if mag > (math.MaxUint64-dgt)/10 {
			d.fail(field, "integer out of range")
			return false, 0, false
		}
		mag = mag*10 + dgt
		i++
	}
	if i == digits {
		d.fail(field, "invalid number")
		return false, 0, false
	}
	if b[digits] == '0' && i-digits > 1 {
		d.fail(field, "leading zero in number")
		return false, 0, false
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		d.fail(field, "expected an integer, found a fraction or exponent")
		return false, 0, false
	}
	if neg && mag == 0 {
		d.fail(field, "-0 is not an integer")
		return false, 0, false
	}
	d.pos = i
	return neg, mag, true
}

// uint reads an unsigned integer no larger than max.
func (d *jsonDecoder) uint(field string, max uint64) uint64 {
	d.ws()
	at := d.pos
	neg, v, ok := d.number(field)
	if !ok {
		return 0
	}
	if neg {
		d.failAt(ErrInvalidJSON, field, at, "negative value for an unsigned integer")
		return 0
	}
	if v > max {
		d.failAt(ErrInvalidJSON, field, at, "integer out of range")
		return 0
	}
	return v
}

func (d *jsonDecoder) u16(field string) uint16 { return uint16(d.uint(field, math.MaxUint16)) }
func (d *jsonDecoder) u32(field string) uint32 { return uint32(d.uint(field, math.MaxUint32)) }
func (d *jsonDecoder) u64(field string) uint64 { return d.uint(field, math.MaxUint64) }

// i64 reads a signed 64-bit integer.
func (d *jsonDecoder) i64(field string) int64 {
	d.ws()
	at := d.pos
	neg, v, ok := d.number(field)
	if !ok {
		return 0
	}
	if neg {
		if v > 1<<63 {
			d.failAt(ErrInvalidJSON, field, at, "integer out of range")
			return 0
		}
		return int64(-v)
	}
	if v > math.MaxInt64 {
		d.failAt(ErrInvalidJSON, field, at, "integer out of range")
		return 0
	}
	return int64(v)
}

// boolean reads true or false.
func (d *jsonDecoder) boolean(field string) bool {
	if d.err != nil {
		return false
	}
	switch d.ws() {
	case 't':
		if d.literal("true") {
			return true
		}
	case 'f':
		if d.literal("false") {
			return false
		}
	}
	d.wrongType(field, "boolean")
	return false
}

// The list readers are written out once per element type on purpose: a
// generic reader taking the element reader as a func value makes the
// decoder escape to the heap, one more allocation per decoded message
// (TestMessageDecodeAllocs catches it).

// bytesList collects up to 16 elements in a stack array and returns them
// in one exactly sized slice: one allocation for the list of a typical
// batch instead of one per doubling.
func (d *jsonDecoder) bytesList(field string) [][]byte {
	var tmp [16][]byte
	l := tmp[:0]
	if !d.beginArray(field) {
		return nil
	}
	for i := 0; d.elem(i, field); i++ {
		l = append(l, d.bytes(field))
	}
	if len(l) == 0 {
		return nil
	}
	out := make([][]byte, len(l))
	copy(out, l)
	return out
}

func (d *jsonDecoder) stringList(field string) []string {
	var l []string
	if !d.beginArray(field) {
		return nil
	}
	for i := 0; d.elem(i, field); i++ {
		l = append(l, d.str(field))
	}
	return l
}

func (d *jsonDecoder) u16List(field string) []uint16 {
	var l []uint16
	if !d.beginArray(field) {
		return nil
	}
	for i := 0; d.elem(i, field); i++ {
		l = append(l, d.u16(field))
	}
	return l
}

func (d *jsonDecoder) u64List(field string) []uint64 {
	var l []uint64
	if !d.beginArray(field) {
		return nil
	}
	for i := 0; d.elem(i, field); i++ {
		l = append(l, d.u64(field))
	}
	return l
}

// skip validates and skips any JSON value (an ignored member's value).
func (d *jsonDecoder) skip(field string) {
	if d.err != nil {
		return
	}
	switch c := d.ws(); {
	case c == '"':
		d.rawString(field)
	case c == '{':
		if !d.beginObject(field) {
			return
		}
		for i := 0; ; i++ {
			if _, ok := d.member(i, field); !ok {
				return
			}
			d.skip(field)
		}
	case c == '[':
		if !d.beginArray(field) {
			return
		}
		for i := 0; d.elem(i, field); i++ {
			d.skip(field)
		}
	case c == 't':
		if !d.literal("true") {
			d.fail(field, "invalid literal")
		}
	case c == 'f':
		if !d.literal("false") {
			d.fail(field, "invalid literal")
		}
	case c == 'n':
		if !d.literal("null") {
			d.fail(field, "invalid literal")
		}
	case c == '-' || (c >= '0' && c <= '9'):
		d.skipNumber(field)
	default:
		d.fail(field, "expected a JSON value, found "+kindName(c))
	}
}

// skipNumber validates a JSON number of any form. Its magnitude is not
// limited: upstream keeps arbitrary-precision numbers, so 1e400 in an
// ignored member is accepted.
func (d *jsonDecoder) skipNumber(field string) {
	b := d.buf
	i := d.pos
	if b[i] == '-' {
		i++
	}
	digits := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == digits || (b[digits] == '0' && i-digits > 1) {
		d.pos = digits
		d.fail(field, "invalid number")
		return
	}
	if i < len(b) && b[i] == '.' {
		i++
		f := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == f {
			d.pos = i
			d.fail(field, "invalid number")
			return
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		e := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == e {
			d.pos = i
			d.fail(field, "invalid number")
			return
		}
	}
	d.pos = i
}

// end checks that only whitespace follows the top-level value.
func (d *jsonDecoder) end() {
	if d.err != nil {
		return
	}
	if d.ws(); d.pos < len(d.buf) {
		d.fail("", "trailing characters after the JSON object")
	}
}
