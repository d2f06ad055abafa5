package felix

import (
	"encoding/binary"
	"iter"
	"strconv"
)

// EventBatch is a binary event batch (docs/binary.md §7–§8) as an owned
// value: what a broker encodes with AppendEventBatch or shares with
// SharedEventBatch, and what DecodeEventBatch returns.
//
// The modifier sections present in the value are HasBaseOffset (0x0020),
// SkippedBefore (0x0800, only with 0x0020 and only when non-zero),
// HasPublisher (0x2000) and HasTimestamps (0x4000); an encoder writes those
// that are present and that the subscriber accepted.
type EventBatch struct {
	// Legacy selects the per-subscriber layout 0x0002, led by
	// SubscriptionID. Current brokers send the shared layout 0x0004
	// (Legacy false); 0x0002 is for tests and old peers.
	Legacy bool
	// SubscriptionID leads a legacy batch.
	SubscriptionID uint64
	// HasBaseOffset adds BaseOffset (0x0020).
	HasBaseOffset bool
	// BaseOffset is the log offset of payload 0; payload i is at
	// BaseOffset+i.
	BaseOffset uint64
	// SkippedBefore counts the offsets just below BaseOffset that hold no
	// deliverable event (0x0800). It is sent only with the base offset and
	// only when non-zero; a decoder reports 0 when the bit is absent.
	SkippedBefore uint64
	// HasPublisher adds Publisher (0x2000).
	HasPublisher bool
	// Publisher is the principal the records were published by (opaque
	// bytes, at most 255).
	Publisher []byte
	// HasTimestamps adds Timestamps (0x4000).
	HasTimestamps bool
	// Timestamps holds each record's append time in microseconds since the
	// Unix epoch, exactly one per payload.
	Timestamps []uint64
	// Payloads are the records (opaque bytes).
	Payloads [][]byte
}

const layoutEvent = "binary_event_batch"

// Flags returns the flag word of b with every modifier it carries, what
// AppendEventBatch(dst, b, EventModifierMask) writes.
func (b *EventBatch) Flags() Flags { return b.FlagsFor(EventModifierMask) }

// FlagsFor returns the flag word written for a subscriber that accepted the
// modifier bits in accepted (its auth.client_flags): the base bit plus each
// modifier that b carries and accepted contains. 0x0800 is kept only
// together with 0x0020, and only when SkippedBefore is non-zero.
func (b *EventBatch) FlagsFor(accepted Flags) Flags {
	f := FlagBinaryEventBatchShared
	if b.Legacy {
		f = FlagBinaryEventBatch
	}
	if b.HasBaseOffset && accepted.Has(FlagEventBatchOffsets) {
		f |= FlagEventBatchOffsets
		if b.SkippedBefore != 0 && accepted.Has(FlagEventBatchSkipped) {
			f |= FlagEventBatchSkipped
		}
	}
	if b.HasPublisher && accepted.Has(FlagEventBatchPublisher) {
		f |= FlagEventBatchPublisher
	}
	if b.HasTimestamps && accepted.Has(FlagEventBatchTimestamps) {
		f |= FlagEventBatchTimestamps
	}
	return f
}

// FrameLen returns the exact number of bytes AppendEventBatch(dst, b,
// accepted) appends.
func (b *EventBatch) FrameLen(accepted Flags) int {
	sum, _ := payloadsLen(b.Payloads)
	return b.frameLen(b.FlagsFor(accepted), sum)
}

// frameLen is FrameLen for the flag word f, given the total length of the
// payloads.
func (b *EventBatch) frameLen(f Flags, sum int) int {
	n := HeaderLen + 4 + 4*len(b.Payloads) + sum
	if b.Legacy {
		n += 8
	}
	if f.Has(FlagEventBatchOffsets) {
		n += 8
	}
	if f.Has(FlagEventBatchSkipped) {
		n += 8
	}
	if f.Has(FlagEventBatchPublisher) {
		n += 1 + len(b.Publisher)
	}
	if f.Has(FlagEventBatchTimestamps) {
		n += 8 * len(b.Payloads)
	}
	return n
}

// check validates b for encoding with the flag word f: the publisher and
// the timestamps are checked only when they are written.
func (b *EventBatch) check(f Flags) error {
	if b.SkippedBefore != 0 && !b.HasBaseOffset {
		return &Error{Class: ErrBadFlagCombination, Layout: layoutEvent, Field: "skipped_before", Offset: -1,
			Flags: FlagEventBatchSkipped, Detail: "skipped_before needs a base offset (0x0800 needs 0x0020)"}
	}
	if f.Has(FlagEventBatchPublisher) && len(b.Publisher) > 0xFF {
		return encErr(ErrFrameTooLarge, layoutEvent, "publisher", strconv.Itoa(len(b.Publisher))+" bytes > 255")
	}
	if f.Has(FlagEventBatchTimestamps) && len(b.Timestamps) != len(b.Payloads) {
		return encErr(ErrInvalidValue, layoutEvent, "timestamps_micros",
			strconv.Itoa(len(b.Timestamps))+" timestamps for "+strconv.Itoa(len(b.Payloads))+" payloads")
	}
	if uint64(len(b.Payloads)) > MaxPayloadLen {
		return encErr(ErrFrameTooLarge, layoutEvent, "count", "too many payloads")
	}
	return nil
}

// AppendEventBatch appends b as a whole frame to dst, with the flag word
// b.FlagsFor(accepted): pass the subscriber's negotiated flags, or
// EventModifierMask to write every section b carries. It allocates only
// when dst lacks room for b.FrameLen(accepted) bytes. On error dst is
// returned unchanged: SkippedBefore without HasBaseOffset is
// ErrBadFlagCombination, a written publisher over 255 bytes or a payload
// over 2^32-1 bytes ErrFrameTooLarge, and written timestamps whose count
// differs from the payload count ErrInvalidValue.
//
// To send one batch to many subscribers, use SharedEventBatch, which
// encodes each distinct modifier set once.
func AppendEventBatch(dst []byte, b *EventBatch, accepted Flags) ([]byte, error) {
	f := b.FlagsFor(accepted)
	if err := b.check(f); err != nil {
		return dst, err
	}
	sum, ok := payloadsLen(b.Payloads)
	if !ok {
		p := b.Payloads[bigPayload(b.Payloads)]
		return dst, encErr(ErrFrameTooLarge, layoutEvent, "payload", "payload of "+strconv.Itoa(len(p))+" bytes")
	}
	n := b.frameLen(f, sum)
	if err := checkFrameSize(layoutEvent, n); err != nil {
		return dst, err
	}
	dst = grow(dst, n)
	start := len(dst)
	dst = b.appendHead(dst, f, len(b.Payloads))
	o := len(dst)
	dst = dst[:start+n]
	if f.Has(FlagEventBatchTimestamps) {
		putTimedPayloads(dst[o:], b.Payloads, b.Timestamps)
	} else {
		putPayloads(dst[o:], b.Payloads)
	}
	return FinishFrame(dst, start)
}

// appendHead appends the frame header (its length left for the caller),
// the modifier sections of f and the record count.
func (b *EventBatch) appendHead(dst []byte, f Flags, count int) []byte {
	dst = BeginFrame(dst, f)
	if b.Legacy {
		dst = binary.BigEndian.AppendUint64(dst, b.SubscriptionID)
	}
	if f.Has(FlagEventBatchOffsets) {
		dst = binary.BigEndian.AppendUint64(dst, b.BaseOffset)
	}
	if f.Has(FlagEventBatchSkipped) {
		dst = binary.BigEndian.AppendUint64(dst, b.SkippedBefore)
	}
	if f.Has(FlagEventBatchPublisher) {
		dst = append(dst, byte(len(b.Publisher)))
		dst = append(dst, b.Publisher...)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(count))
}

// AppendEventBatchHead appends the head of an event frame whose records
// section, of count records and recordsLen bytes, the caller writes right
// after it as it already holds it: for each record its u64 timestamp (only
// when the flag word b.FlagsFor(accepted) has 0x4000), its u32 length and
// its bytes. The head is the frame header, whose length counts the
// records section, the modifier sections of b and the count. A sender that
// keeps records in that layout (a broker's log) so writes them without
// copying them into a frame buffer; the section is not read here, so the
// caller answers for count and recordsLen matching it (a peer refuses a
// frame whose section does not split exactly into count records).
//
// b.Payloads and b.Timestamps are ignored. The errors are AppendEventBatch's
// (a negative count or length is ErrInvalidValue); on error dst is returned
// unchanged.
func AppendEventBatchHead(dst []byte, b *EventBatch, accepted Flags, count, recordsLen int) ([]byte, error) {
	f := b.FlagsFor(accepted)
	if err := (&EventBatch{SkippedBefore: b.SkippedBefore, HasBaseOffset: b.HasBaseOffset, Publisher: b.Publisher}).check(f); err != nil {
		return dst, err
	}
	if count < 0 || recordsLen < 0 {
		return dst, encErr(ErrInvalidValue, layoutEvent, "count", strconv.Itoa(count)+" records of "+strconv.Itoa(recordsLen)+" bytes")
	}
	if uint64(count) > MaxPayloadLen {
		return dst, encErr(ErrFrameTooLarge, layoutEvent, "count", "too many payloads")
	}
	eb := EventBatch{Legacy: b.Legacy, Publisher: b.Publisher}
	n := eb.frameLen(f, 0) + recordsLen
	if err := checkFrameSize(layoutEvent, n); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = b.appendHead(dst, f, count)
	binary.BigEndian.PutUint32(dst[start+8:], uint32(n-HeaderLen))
	return dst, nil
}

// Event is one record of a decoded event batch.
type Event struct {
	// Offset is BaseOffset+i when the batch has base offsets (0x0020), else 0.
	Offset uint64
	// TimestampMicros is the append time when the batch has timestamps
	// (0x4000), else 0.
	TimestampMicros uint64
	// Payload aliases the parsed input, capacity capped.
	Payload []byte
}

// EventBatchView is a validated event batch whose byte fields alias the
// payload it was parsed from (capacity capped at their length). It is valid
// only as long as that payload is; use Batch for an owned copy.
//
// While validating, the parser records the end offsets of the first 64
// payloads in the view, so iterating over them reads no length field again
// (the walk has no serial length-to-next-entry dependency, and the range
// loop of a caller inlines into a plain loop); a view is therefore a few
// hundred bytes: keep it in a local variable or pass a pointer to it.
type EventBatchView struct {
	// Flags is the frame's flag word.
	Flags Flags
	// SubscriptionID leads a legacy (0x0002) batch; 0 for a shared one.
	SubscriptionID uint64
	// BaseOffset is set with 0x0020.
	BaseOffset uint64
	// SkippedBefore is set with 0x0800, else 0.
	SkippedBefore uint64
	// Publisher is set with 0x2000 (possibly empty), else nil.
	Publisher []byte

	step uint64     // 1 with base offsets (0x0020), else 0
	run  payloadRun // count × ([u64 ts], u32 len, bytes), validated
}

// Legacy reports whether the batch has the per-subscriber layout 0x0002.
func (v *EventBatchView) Legacy() bool { return v.Flags.Has(FlagBinaryEventBatch) }

// HasBaseOffset reports whether the batch carries base offsets (0x0020).
func (v *EventBatchView) HasBaseOffset() bool { return v.Flags.Has(FlagEventBatchOffsets) }

// HasPublisher reports whether the batch carries a publisher (0x2000).
func (v *EventBatchView) HasPublisher() bool { return v.Flags.Has(FlagEventBatchPublisher) }

// HasTimestamps reports whether every event carries a timestamp (0x4000).
func (v *EventBatchView) HasTimestamps() bool { return v.Flags.Has(FlagEventBatchTimestamps) }

// Len returns the number of events.
func (v *EventBatchView) Len() int { return v.run.count }

// Payloads iterates over the payloads in order, without checks or
// allocation (the frame was validated by ParseEventBatch). Each slice
// aliases the input with its capacity capped.
func (v *EventBatchView) Payloads() iter.Seq[[]byte] {
	r := &v.run
	return func(yield func([]byte) bool) {
		b, start, hdr := r.body, 0, r.hdr
		for _, e := range r.indexed() {
			end := int(e)
			if !yield(b[start+hdr : end : end]) {
				return
			}
			start = end
		}
		for range r.count - indexLen { // entries past the index
			end := start + hdr + be32(b, start+hdr-4)
			if !yield(b[start+hdr : end : end]) {
				return
			}
			start = end
		}
	}
}

// Events iterates over the events in order with their offsets and
// timestamps, without checks or allocation. Payloads alias the input with
// their capacity capped.
func (v *EventBatchView) Events() iter.Seq[Event] {
	r := &v.run
	return func(yield func(Event) bool) {
		b, start, hdr := r.body, 0, r.hdr
		off, step := v.BaseOffset, v.step
		// One loop per layout over the indexed entries, so that neither
		// tests for timestamps per event.
		if hdr == 12 {
			for _, e := range r.indexed() {
				end := int(e)
				if !yield(Event{off, be64(b, start), b[start+12 : end : end]}) {
					return
				}
				off += step
				start = end
			}
		} else {
			for _, e := range r.indexed() {
				end := int(e)
				if !yield(Event{off, 0, b[start+4 : end : end]}) {
					return
				}
				off += step
				start = end
			}
		}
		for range r.count - indexLen { // entries past the index
			end := start + hdr + be32(b, start+hdr-4)
			var ts uint64
			if hdr == 12 {
				ts = be64(b, start)
			}
			if !yield(Event{off, ts, b[start+hdr : end : end]}) {
				return
			}
			off += step
			start = end
		}
	}
}

// EventCursor hands out the events of an EventBatchView one call at a time,
// for a consumer that returns one event per call (conn's Subscription.Next)
// rather than ranging over Events: the same walk over the validated run
// (the recorded end offsets, then the length fields), without checks or
// allocation. The zero value has no events. A cursor reads the view it was
// made from, which must stay valid and unchanged while it is used.
type EventCursor struct {
	run       *payloadRun
	i, n      int    // the next event and the count
	start     int    // body offset of the next entry
	off, step uint64 // the next event's offset and the increment
}

// Cursor returns a cursor at the first event of v.
func (v *EventBatchView) Cursor() EventCursor {
	return EventCursor{run: &v.run, n: v.run.count, off: v.BaseOffset, step: v.step}
}

// Remaining returns how many events Next has still to return.
func (c *EventCursor) Remaining() int { return c.n - c.i }

// Next writes the next event into e (its payload aliases the view's input
// with its capacity capped) and returns true, or returns false after the
// last one, leaving e alone. e is written field by field rather than
// returned, so that a caller building a larger value from it copies no
// Event-sized temporary.
func (c *EventCursor) Next(e *Event) bool {
	if c.i >= c.n {
		return false
	}
	r := c.run
	b, start, hdr := r.body, c.start, r.hdr
	var end int
	if c.i < indexLen {
		end = int(r.ends[c.i])
	} else {
		end = start + hdr + be32(b, start+hdr-4)
	}
	e.TimestampMicros = 0
	if hdr == 12 {
		e.TimestampMicros = be64(b, start)
	}
	e.Offset, e.Payload = c.off, b[start+hdr:end:end]
	c.i++
	c.start = end
	c.off += c.step
	return true
}

// Batch returns an owned deep copy: the publisher and payloads share one
// new backing array, and timestamps are copied into a new slice.
func (v *EventBatchView) Batch() EventBatch {
	b := EventBatch{
		Legacy:         v.Legacy(),
		SubscriptionID: v.SubscriptionID,
		HasBaseOffset:  v.HasBaseOffset(),
		BaseOffset:     v.BaseOffset,
		SkippedBefore:  v.SkippedBefore,
		HasPublisher:   v.HasPublisher(),
		HasTimestamps:  v.HasTimestamps(),
		Payloads:       make([][]byte, 0, v.run.count),
	}
	per := 4
	if b.HasTimestamps {
		per = 12
		b.Timestamps = make([]uint64, 0, v.run.count)
	}
	arena := make([]byte, 0, len(v.Publisher)+len(v.run.body)-per*v.run.count)
	if b.HasPublisher {
		arena = append(arena, v.Publisher...)
		b.Publisher = capped(arena, 0, len(arena))
	}
	for e := range v.Events() {
		if b.HasTimestamps {
			b.Timestamps = append(b.Timestamps, e.TimestampMicros)
		}
		s := len(arena)
		arena = append(arena, e.Payload...)
		b.Payloads = append(b.Payloads, capped(arena, s, len(arena)))
	}
	return b
}

// ParseEventBatch validates an event batch payload, shared (0x0004) or
// legacy (0x0002), and returns a view over it. The flag word is checked
// with Flags.CheckLayout (exactly one base bit; 0x0800 only with 0x0020).
// Then, per docs/binary.md §7/§8: the fixed part, the publisher length and bytes and
// the count must be present (ErrTruncated); the count is bounded by the
// remaining bytes before any loop (each event needs 4 bytes, 12 with
// timestamps), so a count of 2^32-1 in a short payload costs nothing; every
// event's timestamp, length and bytes must be present. It allocates
// nothing unless it fails.
//
// Bytes after the last event are rejected with ErrTrailingBytes. Upstream
// ignores them; this package is deliberately stricter. Error offsets are
// relative to the payload. A 0x0800 section holding 0 decodes (upstream
// encoders omit it), and re-encodes without the section.
func ParseEventBatch(flags Flags, payload []byte) (v EventBatchView, err error) {
	// A small wrapper that inlines, so that parse fills the caller's view
	// in place instead of copying a few hundred bytes out.
	if err = v.parse(flags, payload); err != nil {
		v = EventBatchView{}
	}
	return v, err
}

// parse is ParseEventBatch into v. On error v holds partial values.
func (v *EventBatchView) parse(flags Flags, payload []byte) error {
	if err := flags.CheckLayout(LayoutEventBatch); err != nil {
		return err
	}
	v.Flags = flags
	if v.parseFast(flags, payload) {
		return nil
	}
	// Something is wrong: read again with the cursor, which checks the same
	// things in the same order and reports the first failure.
	return v.parseCursor(flags, payload)
}

// parseCursor is the reference reader behind parseFast: every read goes
// through the sticky-error cursor, so the first failure is reported with
// its class, field and offset. flags has passed CheckLayout.
func (v *EventBatchView) parseCursor(flags Flags, payload []byte) error {
	c := cursor{b: payload, layout: layoutEvent}
	v.Flags = flags
	if flags.Has(FlagBinaryEventBatch) {
		v.SubscriptionID = c.u64("subscription_id")
	}
	if flags.Has(FlagEventBatchOffsets) {
		v.BaseOffset = c.u64("base_offset")
		v.step = 1
	}
	if flags.Has(FlagEventBatchSkipped) {
		v.SkippedBefore = c.u64("skipped_before")
	}
	if flags.Has(FlagEventBatchPublisher) {
		v.Publisher = c.str8("publisher")
	}
	cOff := c.off
	count := c.u32("count")
	if c.err != nil {
		return c.err
	}
	prefix := 0
	if flags.Has(FlagEventBatchTimestamps) {
		prefix = 8
	}
	v.run.validate(&c, count, cOff, prefix+4)
	c.end()
	if c.err != nil {
		return c.err
	}
	return nil
}

// parseFast is the straight-line path of parse for a well-formed batch,
// with no error bookkeeping: it reads the sections of docs/binary.md §7/§8 present in
// flags, bounding each against the bytes that remain, and accepts only a
// payload run that ends exactly at the end of b. On anything else it
// returns false and parse falls back to the cursor, which reports the
// error.
func (v *EventBatchView) parseFast(flags Flags, b []byte) bool {
	off := 0
	if flags&FlagBinaryEventBatch != 0 {
		if len(b) < 8 {
			return false
		}
		v.SubscriptionID = binary.BigEndian.Uint64(b)
		off = 8
	}
	if flags&FlagEventBatchOffsets != 0 {
		if len(b)-off < 8 {
			return false
		}
		v.BaseOffset, v.step = binary.BigEndian.Uint64(b[off:]), 1
		off += 8
	}
	if flags&FlagEventBatchSkipped != 0 {
		if len(b)-off < 8 {
			return false
		}
		v.SkippedBefore = binary.BigEndian.Uint64(b[off:])
		off += 8
	}
	if flags&FlagEventBatchPublisher != 0 {
		if len(b)-off < 1 {
			return false
		}
		end := off + 1 + int(b[off])
		if end > len(b) {
			return false
		}
		v.Publisher = b[off+1 : end : end]
		off = end
	}
	if len(b)-off < 4 {
		return false
	}
	hdr := 4
	if flags&FlagEventBatchTimestamps != 0 {
		hdr = 12
	}
	return v.run.scanExact(b[off+4:], binary.BigEndian.Uint32(b[off:]), hdr)
}

// DecodeEventBatch is ParseEventBatch followed by an owned copy
// (EventBatchView.Batch): the result does not alias payload.
func DecodeEventBatch(flags Flags, payload []byte) (EventBatch, error) {
	v, err := ParseEventBatch(flags, payload)
	if err != nil {
		return EventBatch{}, err
	}
	return v.Batch(), nil
}

// SharedEventBatch encodes one shared event batch (0x0004) for many
// subscribers. A broker builds it once per published batch and asks it, for
// each subscriber, for the frame matching that subscriber's negotiated flags
// (auth.client_flags): the batch is encoded at most once per distinct set of
// modifier bits actually written (at most 12 sets), and every subscriber of
// a set gets the same bytes. The cost of a batch is thus independent of the
// fanout: N subscribers cost N cache look-ups plus one encoding per distinct
// set.
//
//	s := felix.NewSharedEventBatch(&batch)
//	for _, sub := range subs {
//		frame, err := s.Frame(sub.ClientFlags)
//		... sub.enqueue(frame) // the same bytes for every subscriber of a set
//	}
//
// The returned frames are read-only and shared (capacity capped, so an
// append copies); they stay valid until Reset. The batch must not change
// while the SharedEventBatch is in use. A SharedEventBatch is not safe for
// concurrent use.
type SharedEventBatch struct {
	b      *EventBatch
	frames [16][]byte
	errs   [16]error
	built  uint16 // sets encoded (successfully or not)
	ok     uint16 // sets encoded successfully
	n      int
}

// NewSharedEventBatch returns a SharedEventBatch for b. b must be a shared
// batch (Legacy false): legacy batches are per subscriber.
func NewSharedEventBatch(b *EventBatch) *SharedEventBatch {
	s := new(SharedEventBatch)
	s.Reset(b)
	return s
}

// Reset points s at a new batch, forgetting the previous encodings but
// keeping their buffers for reuse, so a broker that recycles one
// SharedEventBatch encodes without allocating once the buffers are large
// enough. Call it only when no subscriber still holds a frame from the
// previous batch (otherwise use a new SharedEventBatch).
func (s *SharedEventBatch) Reset(b *EventBatch) {
	s.b = b
	s.built, s.ok = 0, 0
	s.n = 0
	clear(s.errs[:])
}

// Encodings returns how many distinct encodings s has built so far.
func (s *SharedEventBatch) Encodings() int { return s.n }

// sharedKey packs the four modifier bits of an event batch flag word into 0..15.
func sharedKey(f Flags) int {
	return int(f>>5&1 | f>>10&2 | f>>11&4 | f>>11&8)
}

// Frame returns the whole frame for a subscriber that accepted the modifier
// bits in accepted, encoding it on first use of its modifier set.
func (s *SharedEventBatch) Frame(accepted Flags) ([]byte, error) {
	if b := s.b; b != nil {
		k := sharedKey(b.FlagsFor(accepted))
		if s.ok&(1<<k) != 0 {
			fr := s.frames[k]
			return fr[:len(fr):len(fr)], nil
		}
	}
	return s.build(accepted)
}

// build is Frame's slow path: the first request for a modifier set, or an
// error.
func (s *SharedEventBatch) build(accepted Flags) ([]byte, error) {
	if s.b == nil || s.b.Legacy {
		return nil, encErr(ErrInvalidValue, layoutEvent, "flags", "a shared batch needs a non-legacy EventBatch")
	}
	k := sharedKey(s.b.FlagsFor(accepted))
	if s.built&(1<<k) == 0 {
		fr, err := AppendEventBatch(s.frames[k][:0], s.b, accepted)
		s.frames[k], s.errs[k] = fr, err
		s.built |= 1 << k
		if err == nil {
			s.ok |= 1 << k
			s.n++
		}
	}
	if s.errs[k] != nil {
		return nil, s.errs[k]
	}
	fr := s.frames[k]
	return fr[:len(fr):len(fr)], nil
}
