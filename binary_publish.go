package felix

import (
	"encoding/binary"
	"iter"
	"strconv"
	"unicode/utf8"
)

// PublishBatch is a binary publish batch (docs/binary.md §1–§5) as an owned
// value: what a client encodes with AppendPublishBatch, and what
// DecodePublishBatch returns. The flag word follows from the value (see
// Flags): the six legal words are 0x0001, 0x0009, 0x0041, 0x0049, 0x0109 and
// 0x0149.
type PublishBatch struct {
	// AckMode selects the acked prefix (0x0008): AckPerMessage or
	// AckPerBatch. AckNone, the zero value, is the plain unacknowledged
	// form; binary has no encoding of ack mode "none".
	AckMode AckMode
	// RequestID is the request id of an acked batch (0x0008).
	RequestID uint64
	// Idempotent adds the producer id and sequence (0x0100). It needs an
	// acked batch (AckMode not AckNone), and the encoder always writes the
	// ack mode byte as AckPerBatch (2), as upstream encoders do (spec
	// docs/binary.md §4): a decoded idempotent frame that carried 1 re-encodes
	// with 2. A broker answers it in JSON rather than with a binary ack.
	Idempotent bool
	// ProducerID is the idempotent producer's id (with Idempotent).
	ProducerID uint64
	// Sequence is the idempotent producer's sequence (with Idempotent).
	Sequence uint64
	// HasKey adds the routing-key prefix (0x0040). An empty key is a real
	// key, distinct from no key.
	HasKey bool
	// Key is the routing key shared by every record (opaque bytes, at most
	// 65,535), meaningful only with HasKey.
	Key []byte
	// TenantID, Namespace and Stream name the target stream (UTF-8, at
	// most 65,535 bytes each).
	TenantID, Namespace, Stream string
	// Payloads are the records (opaque bytes).
	Payloads [][]byte
}

const (
	layoutPublish      = "binary_publish_batch"
	layoutAckedPublish = "binary_acked_publish_batch"
)

// Flags returns the flag word AppendPublishBatch writes for b.
func (b *PublishBatch) Flags() Flags {
	f := FlagBinaryPublishBatch
	if b.AckMode != AckNone {
		f |= FlagBinaryPublishAcked
	}
	if b.Idempotent {
		f |= FlagBinaryPublishIdempotent
	}
	if b.HasKey {
		f |= FlagBinaryPublishKeyed
	}
	return f
}

// FrameLen returns the exact number of bytes AppendPublishBatch appends for
// b: the 12-byte header plus the payload.
func (b *PublishBatch) FrameLen() int {
	sum, _ := payloadsLen(b.Payloads)
	return b.frameLen(sum)
}

// frameLen is FrameLen given the total length of the payloads.
func (b *PublishBatch) frameLen(sum int) int {
	n := HeaderLen + 6 + len(b.TenantID) + len(b.Namespace) + len(b.Stream) + 4 + 4*len(b.Payloads) + sum
	if b.AckMode != AckNone {
		n += 9
	}
	if b.Idempotent {
		n += 16
	}
	if b.HasKey {
		n += 2 + len(b.Key)
	}
	return n
}

func (b *PublishBatch) layout() string {
	if b.AckMode != AckNone {
		return layoutAckedPublish
	}
	return layoutPublish
}

// check validates b for encoding.
func (b *PublishBatch) check() error {
	l := b.layout()
	if b.AckMode > AckPerBatch {
		return encErr(ErrInvalidValue, l, "ack_mode", "ack mode "+strconv.Itoa(int(b.AckMode)))
	}
	if b.Idempotent && b.AckMode == AckNone {
		return &Error{Class: ErrBadFlagCombination, Layout: l, Field: "flags", Offset: -1, Flags: FlagBinaryPublishIdempotent,
			Detail: "an idempotent publish must be acked"}
	}
	if b.HasKey && len(b.Key) > 0xFFFF {
		return encErr(ErrFrameTooLarge, l, "key", strconv.Itoa(len(b.Key))+" bytes > 65535")
	}
	if err := checkStr16(l, "tenant_id", b.TenantID, true); err != nil {
		return err
	}
	if err := checkStr16(l, "namespace", b.Namespace, true); err != nil {
		return err
	}
	if err := checkStr16(l, "stream", b.Stream, true); err != nil {
		return err
	}
	if uint64(len(b.Payloads)) > MaxPayloadLen {
		return encErr(ErrFrameTooLarge, l, "count", "too many payloads")
	}
	return nil
}

// AppendPublishBatch appends b as a whole frame (header and payload) to dst
// in the fixed section order of docs/binary.md §5. It allocates only when dst lacks
// the room for b.FrameLen() bytes (then it grows dst once). On error dst is
// returned unchanged: a string or key over 65,535 bytes or a payload over
// 2^32-1 bytes is ErrFrameTooLarge, non-UTF-8 tenant/namespace/stream is
// ErrInvalidUTF8, an ack mode above AckPerBatch is ErrInvalidValue and
// Idempotent without an ack mode is ErrBadFlagCombination.
func AppendPublishBatch(dst []byte, b *PublishBatch) ([]byte, error) {
	sum, ok := payloadsLen(b.Payloads)
	if !ok {
		if err := b.check(); err != nil {
			return dst, err
		}
		p := b.Payloads[bigPayload(b.Payloads)]
		return dst, encErr(ErrFrameTooLarge, b.layout(), "payload", "payload of "+strconv.Itoa(len(p))+" bytes")
	}
	out, start, end, err := beginPublish(dst, b, len(b.Payloads), sum)
	if err != nil {
		return dst, err
	}
	o := len(out)
	out = out[:end]
	putPayloads(out[o:], b.Payloads)
	return FinishFrame(out, start)
}

// beginPublish validates b for count payloads of sum bytes (b.Payloads is
// not looked at) and appends the header and every section before the
// payloads to dst, grown to the exact frame length: the caller writes the
// payloads into out[len(out):end] and finishes the frame at start.
func beginPublish(dst []byte, b *PublishBatch, count, sum int) (out []byte, start, end int, err error) {
	if err := b.check(); err != nil {
		return dst, 0, 0, err
	}
	if uint64(count) > MaxPayloadLen {
		return dst, 0, 0, encErr(ErrFrameTooLarge, b.layout(), "count", "too many payloads")
	}
	n := b.frameLen(sum) + 4*(count-len(b.Payloads))
	if err := checkFrameSize(b.layout(), n); err != nil {
		return dst, 0, 0, err
	}
	dst = grow(dst, n)
	start = len(dst)
	dst = BeginFrame(dst, b.Flags())
	if b.AckMode != AckNone {
		dst = binary.BigEndian.AppendUint64(dst, b.RequestID)
		mode := b.AckMode
		if b.Idempotent {
			mode = AckPerBatch
		}
		dst = append(dst, byte(mode))
		if b.Idempotent {
			dst = binary.BigEndian.AppendUint64(dst, b.ProducerID)
			dst = binary.BigEndian.AppendUint64(dst, b.Sequence)
		}
	}
	if b.HasKey {
		dst = appendBytes16(dst, b.Key)
	}
	dst = appendStr16(dst, b.TenantID)
	dst = appendStr16(dst, b.Namespace)
	dst = appendStr16(dst, b.Stream)
	dst = binary.BigEndian.AppendUint32(dst, uint32(count))
	return dst, start, start + n, nil
}

// PublishBatchView is a validated publish batch whose byte fields alias the
// payload it was parsed from (capacity capped at their length, so appending
// to one never overwrites the input). It is valid only as long as that
// payload is: a Reader's payload, for example, is reused by the next
// ReadFrame. Use Batch for an owned copy.
//
// While validating, the parser records the end offsets of the first 64
// payloads in the view, so iterating over them reads no length field again
// (the walk has no serial length-to-next-entry dependency, and the range
// loop of a caller inlines into a plain loop); a view is therefore a few
// hundred bytes: keep it in a local variable or pass a pointer to it.
type PublishBatchView struct {
	// Flags is the frame's flag word.
	Flags Flags
	// AckMode is the ack mode of an acked batch, AckNone otherwise.
	AckMode AckMode
	// RequestID is the request id of an acked batch.
	RequestID uint64
	// ProducerID and Sequence are set on an idempotent batch.
	ProducerID, Sequence uint64
	// Key is the routing key when Flags has 0x0040 (possibly empty), else nil.
	Key []byte
	// TenantID, Namespace and Stream are validated UTF-8.
	TenantID, Namespace, Stream []byte

	run payloadRun // count × (u32 len, bytes), validated
}

// Acked reports whether the batch carries the acked prefix (0x0008).
func (v *PublishBatchView) Acked() bool { return v.Flags.Has(FlagBinaryPublishAcked) }

// Idempotent reports whether the batch carries a producer id and sequence (0x0100).
func (v *PublishBatchView) Idempotent() bool { return v.Flags.Has(FlagBinaryPublishIdempotent) }

// HasKey reports whether the batch carries a routing key (0x0040).
func (v *PublishBatchView) HasKey() bool { return v.Flags.Has(FlagBinaryPublishKeyed) }

// Len returns the number of payloads.
func (v *PublishBatchView) Len() int { return v.run.count }

// Payloads iterates over the payloads in order. Each slice aliases the
// parsed input with its capacity capped. The walk does no checking and no
// allocation: the whole frame was validated by ParsePublishBatch.
func (v *PublishBatchView) Payloads() iter.Seq[[]byte] {
	r := &v.run
	return func(yield func([]byte) bool) {
		b, start := r.body, 0
		for _, e := range r.indexed() {
			end := int(e)
			if !yield(b[start+4 : end : end]) {
				return
			}
			start = end
		}
		for range r.count - indexLen { // entries past the index
			end := start + 4 + be32(b, start)
			if !yield(b[start+4 : end : end]) {
				return
			}
			start = end
		}
	}
}

// Batch returns an owned deep copy of the batch: strings are copied and the
// key and payloads share one new backing array.
func (v *PublishBatchView) Batch() PublishBatch {
	b := PublishBatch{
		AckMode:    v.AckMode,
		RequestID:  v.RequestID,
		Idempotent: v.Idempotent(),
		ProducerID: v.ProducerID,
		Sequence:   v.Sequence,
		HasKey:     v.HasKey(),
		TenantID:   string(v.TenantID),
		Namespace:  string(v.Namespace),
		Stream:     string(v.Stream),
		Payloads:   make([][]byte, 0, v.run.count),
	}
	arena := make([]byte, 0, len(v.Key)+len(v.run.body)-4*v.run.count)
	if b.HasKey {
		arena = append(arena, v.Key...)
		b.Key = capped(arena, 0, len(arena))
	}
	for p := range v.Payloads() {
		s := len(arena)
		arena = append(arena, p...)
		b.Payloads = append(b.Payloads, capped(arena, s, len(arena)))
	}
	return b
}

// AckedPrefix is the prefix of an acked publish batch, readable without
// decoding the body (see PeekAckedPrefix).
type AckedPrefix struct {
	// RequestID is the id the answer must carry.
	RequestID uint64
	// AckMode is AckPerMessage or AckPerBatch.
	AckMode AckMode
	// Idempotent reports whether the frame has 0x0100 (answered in JSON).
	Idempotent bool
	// HasProducer reports whether ProducerID and Sequence could be read
	// (Idempotent and the 16 bytes present).
	HasProducer bool
	// ProducerID and Sequence of an idempotent frame, when HasProducer.
	ProducerID, Sequence uint64
}

// PeekAckedPrefix reads only the acked prefix of an acked publish batch
// payload: request_id and ack_mode, plus producer id and sequence when the
// frame is idempotent and they are present. It does not look at the body, so
// a broker can answer a malformed body with an error ack (or JSON
// publish_error for an idempotent frame) carrying the request id. An error
// means the prefix itself is unusable (flags not of an acked publish batch,
// fewer than 9 bytes, or an ack mode other than 1 and 2): docs/binary.md §2 treats
// that as a protocol violation that ends the stream.
func PeekAckedPrefix(flags Flags, payload []byte) (AckedPrefix, error) {
	if err := flags.CheckLayout(LayoutAckedPublishBatch); err != nil {
		return AckedPrefix{}, err
	}
	c := cursor{b: payload, layout: layoutAckedPublish}
	var p AckedPrefix
	p.RequestID, p.AckMode = readAckedPrefix(&c)
	if c.err != nil {
		return AckedPrefix{}, c.err
	}
	if flags.Has(FlagBinaryPublishIdempotent) {
		p.Idempotent = true
		if c.rest() >= 16 {
			p.HasProducer = true
			p.ProducerID = c.u64("producer_id")
			p.Sequence = c.u64("sequence")
		}
	}
	return p, nil
}

func readAckedPrefix(c *cursor) (uint64, AckMode) {
	id := c.u64("request_id")
	off := c.off
	m := c.u8("ack_mode")
	if c.err == nil && m != byte(AckPerMessage) && m != byte(AckPerBatch) {
		c.fail(ErrInvalidValue, "ack_mode", off, "ack mode byte "+strconv.Itoa(int(m))+" (want 1 or 2)")
	}
	return id, AckMode(m)
}

// ParsePublishBatch validates a publish batch payload (any of the six legal
// flag words; plain and acked alike) and returns a view over it. It checks
// the flag word with Flags.CheckLayout, then reads the sections in the order
// of docs/binary.md §5, bounds every length and the count against the remaining bytes
// before looping (a count of 2^32-1 in a short payload fails at once),
// checks that tenant, namespace and stream are UTF-8, and walks every
// payload length once. It allocates nothing unless it fails. The Payloads
// iterator then walks the validated batch without any further checks.
//
// Trailing bytes after the last payload are rejected with ErrTrailingBytes.
// Upstream ignores them; this package is deliberately stricter. Error
// offsets are relative to the payload.
func ParsePublishBatch(flags Flags, payload []byte) (v PublishBatchView, err error) {
	// A small wrapper that inlines, so that parse fills the caller's view
	// in place instead of copying a few hundred bytes out.
	if err = v.parse(flags, payload); err != nil {
		v = PublishBatchView{}
	}
	return v, err
}

// parse is ParsePublishBatch into v. On error v holds partial values.
func (v *PublishBatchView) parse(flags Flags, payload []byte) error {
	l := LayoutPublishBatch
	if flags.Has(FlagBinaryPublishAcked) {
		l = LayoutAckedPublishBatch
	}
	if err := flags.CheckLayout(l); err != nil {
		return err
	}
	v.Flags = flags
	if v.parseFast(flags, payload) {
		return nil
	}
	// Something is wrong: read again with the cursor, which checks the same
	// things in the same order and reports the first failure with its
	// field and offset.
	return v.parseCursor(l, flags, payload)
}

// parseCursor is the reference reader behind parseFast: every read goes
// through the sticky-error cursor, so the first failure is reported with
// its class, field and offset. flags has passed CheckLayout for l.
func (v *PublishBatchView) parseCursor(l Layout, flags Flags, payload []byte) error {
	c := cursor{b: payload, layout: l.String()}
	v.Flags = flags
	if l == LayoutAckedPublishBatch {
		v.RequestID, v.AckMode = readAckedPrefix(&c)
		if flags.Has(FlagBinaryPublishIdempotent) {
			v.ProducerID = c.u64("producer_id")
			v.Sequence = c.u64("sequence")
		}
	}
	if flags.Has(FlagBinaryPublishKeyed) {
		v.Key = c.str16("key")
	}
	tOff := c.off + 2
	v.TenantID = c.str16("tenant_id")
	nOff := c.off + 2
	v.Namespace = c.str16("namespace")
	sOff := c.off + 2
	v.Stream = c.str16("stream")
	cOff := c.off
	count := c.u32("count")
	c.text(v.TenantID, "tenant_id", tOff)
	c.text(v.Namespace, "namespace", nOff)
	c.text(v.Stream, "stream", sOff)
	if c.err != nil {
		return c.err
	}
	v.run.validate(&c, count, cOff, 4)
	c.end()
	if c.err != nil {
		return c.err
	}
	return nil
}

// parseFast is the straight-line path of parse for a well-formed batch,
// with no error bookkeeping: it reads the sections of docs/binary.md §5 in order,
// bounding each length against the bytes that remain, checks the ack mode
// and that tenant, namespace and stream are UTF-8 (at once when the
// section is all ASCII), and accepts only a payload run that ends exactly
// at the end of b. On anything else it returns false and parse falls back
// to the cursor, which reports the error.
func (v *PublishBatchView) parseFast(flags Flags, b []byte) bool {
	off := 0
	if flags&FlagBinaryPublishAcked != 0 {
		if len(b) < 9 || (b[8] != byte(AckPerMessage) && b[8] != byte(AckPerBatch)) {
			return false
		}
		v.RequestID, v.AckMode = binary.BigEndian.Uint64(b), AckMode(b[8])
		off = 9
		if flags&FlagBinaryPublishIdempotent != 0 {
			if len(b) < 25 {
				return false
			}
			v.ProducerID, v.Sequence = binary.BigEndian.Uint64(b[9:]), binary.BigEndian.Uint64(b[17:])
			off = 25
		}
	}
	var ok bool
	if flags&FlagBinaryPublishKeyed != 0 {
		if v.Key, off, ok = str16At(b, off); !ok {
			return false
		}
	}
	text := off
	if v.TenantID, off, ok = str16At(b, off); !ok {
		return false
	}
	if v.Namespace, off, ok = str16At(b, off); !ok {
		return false
	}
	if v.Stream, off, ok = str16At(b, off); !ok {
		return false
	}
	if len(b)-off < 4 {
		return false
	}
	// b[text:off] is the three strings with their length fields: when it
	// is all ASCII, so is each string.
	if !asciiOnly(b[text:off]) && !(utf8.Valid(v.TenantID) && utf8.Valid(v.Namespace) && utf8.Valid(v.Stream)) {
		return false
	}
	return v.run.scanExact(b[off+4:], binary.BigEndian.Uint32(b[off:]), 4)
}

// DecodePublishBatch is ParsePublishBatch followed by an owned copy
// (PublishBatchView.Batch): the result does not alias payload.
func DecodePublishBatch(flags Flags, payload []byte) (PublishBatch, error) {
	v, err := ParsePublishBatch(flags, payload)
	if err != nil {
		return PublishBatch{}, err
	}
	return v.Batch(), nil
}
