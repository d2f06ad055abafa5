package felix

import (
	"strconv"
	"strings"
)

// Flags is the 16-bit flag word of a frame header. Zero means the payload is
// one JSON control message; any other value selects a binary layout. Four bits
// select a base layout (FlagBinaryPublishBatch, FlagBinaryEventBatch,
// FlagBinaryEventBatchShared, FlagBinaryPublishAck); the rest are modifiers
// that only make sense on top of a particular base.
//
// Flag bits are a separate number space from feature bits (Features): never
// combine the two.
type Flags uint16

// The fifteen defined flag bits. Bit 15 (0x8000) is reserved and must never
// be set.
const (
	// FlagBinaryPublishBatch (base, client→broker) selects the binary publish batch.
	FlagBinaryPublishBatch Flags = 0x0001
	// FlagBinaryEventBatch (base, broker→client) selects the legacy
	// per-subscriber event batch, which leads with a u64 subscription id.
	// Decode-only legacy: brokers emit FlagBinaryEventBatchShared.
	FlagBinaryEventBatch Flags = 0x0002
	// FlagBinaryEventBatchShared (base, broker→client) selects the shared
	// event batch (no subscription id).
	FlagBinaryEventBatchShared Flags = 0x0004
	// FlagBinaryPublishAcked (modifier of 0x0001) adds the u64 request_id and
	// u8 ack_mode prefix; an acknowledgement is owed.
	FlagBinaryPublishAcked Flags = 0x0008
	// FlagBinaryPublishAck (base, broker→client) selects the binary publish
	// acknowledgement, sent only in answer to a FlagBinaryPublishAcked frame.
	FlagBinaryPublishAck Flags = 0x0010
	// FlagEventBatchOffsets (modifier of 0x0002/0x0004) adds a u64
	// base_offset before the count.
	FlagEventBatchOffsets Flags = 0x0020
	// FlagBinaryPublishKeyed (modifier of 0x0001) adds a u16-length routing
	// key prefix.
	FlagBinaryPublishKeyed Flags = 0x0040
	// FlagBinaryPublishAckOwner (modifier of 0x0010) adds the owning
	// broker's node id, address and generation (the batch was forwarded).
	FlagBinaryPublishAckOwner Flags = 0x0080
	// FlagBinaryPublishIdempotent (modifier of 0x0008) adds u64 producer_id
	// and u64 sequence after the acked prefix.
	FlagBinaryPublishIdempotent Flags = 0x0100
	// FlagBinaryPublishAckCode (modifier of 0x0010) adds a u16 error code
	// and u8 retry class to a failed ack.
	FlagBinaryPublishAckCode Flags = 0x0200
	// FlagBinaryPublishAckDetail (modifier of 0x0200) adds a reason string
	// and u64 suggested wait after the code.
	FlagBinaryPublishAckDetail Flags = 0x0400
	// FlagEventBatchSkipped (modifier of 0x0020) adds a u64 skipped_before
	// after base_offset.
	FlagEventBatchSkipped Flags = 0x0800
	// FlagBinaryPublishAckOffset (modifier of 0x0010) adds the trailing u64
	// offset of the batch's first record to a successful ack. Offering it
	// also adds "offset" to JSON publish_ok.
	FlagBinaryPublishAckOffset Flags = 0x1000
	// FlagEventBatchPublisher (modifier of 0x0002/0x0004) adds a u8-length
	// publisher principal before the count.
	FlagEventBatchPublisher Flags = 0x2000
	// FlagEventBatchTimestamps (modifier of 0x0002/0x0004) adds a u64
	// append time (µs since the Unix epoch) before every event.
	FlagEventBatchTimestamps Flags = 0x4000
)

const (
	// KnownFlags is the set of every defined flag bit (bits 0..14). A bit
	// outside it is refused with ErrUnknownFlags.
	KnownFlags Flags = 0x7FFF
	// OriginalV1Flags is the flag set of the original protocol, frozen
	// forever: what a peer that sent no flag advertisement supports.
	OriginalV1Flags Flags = FlagBinaryPublishBatch | FlagBinaryEventBatch | FlagBinaryEventBatchShared

	// PublishFlagsMask is every bit that may appear on a publish batch frame.
	PublishFlagsMask = FlagBinaryPublishBatch | FlagBinaryPublishAcked | FlagBinaryPublishKeyed | FlagBinaryPublishIdempotent
	// AckFlagsMask is every bit that may appear on a publish ack frame.
	AckFlagsMask = FlagBinaryPublishAck | FlagBinaryPublishAckOwner | FlagBinaryPublishAckCode | FlagBinaryPublishAckDetail | FlagBinaryPublishAckOffset
	// EventModifierMask is every modifier bit that may appear on an event batch frame.
	EventModifierMask = FlagEventBatchOffsets | FlagEventBatchSkipped | FlagEventBatchPublisher | FlagEventBatchTimestamps
	// ClientModifierFlags are the broker→client modifier bits a client may
	// offer in auth.client_flags (what the broker may then set on its frames).
	ClientModifierFlags = EventModifierMask | FlagBinaryPublishAckOwner | FlagBinaryPublishAckCode | FlagBinaryPublishAckDetail | FlagBinaryPublishAckOffset
)

var flagNames = [16]string{
	"BINARY_PUBLISH_BATCH",
	"BINARY_EVENT_BATCH",
	"BINARY_EVENT_BATCH_SHARED",
	"BINARY_PUBLISH_ACKED",
	"BINARY_PUBLISH_ACK",
	"EVENT_BATCH_OFFSETS",
	"BINARY_PUBLISH_KEYED",
	"BINARY_PUBLISH_ACK_OWNER",
	"BINARY_PUBLISH_IDEMPOTENT",
	"BINARY_PUBLISH_ACK_CODE",
	"BINARY_PUBLISH_ACK_DETAIL",
	"EVENT_BATCH_SKIPPED",
	"BINARY_PUBLISH_ACK_OFFSET",
	"EVENT_BATCH_PUBLISHER",
	"EVENT_BATCH_TIMESTAMPS",
	"",
}

// Has reports whether every bit of x is set in f.
func (f Flags) Has(x Flags) bool { return f&x == x }

// Any reports whether at least one bit of x is set in f.
func (f Flags) Any(x Flags) bool { return f&x != 0 }

// Unknown returns the bits of f outside KnownFlags.
func (f Flags) Unknown() Flags { return f &^ KnownFlags }

// String renders f as "0x0049(BINARY_PUBLISH_BATCH|BINARY_PUBLISH_ACKED|BINARY_PUBLISH_KEYED)".
// Zero renders as "0x0000(JSON)" and an undefined bit as "0x8000".
func (f Flags) String() string {
	var b strings.Builder
	b.WriteString("0x")
	h := strconv.FormatUint(uint64(f), 16)
	b.WriteString(strings.Repeat("0", 4-len(h)))
	b.WriteString(h)
	if f == 0 {
		b.WriteString("(JSON)")
		return b.String()
	}
	b.WriteByte('(')
	first := true
	for i := 0; i < 16; i++ {
		bit := Flags(1) << i
		if f&bit == 0 {
			continue
		}
		if !first {
			b.WriteByte('|')
		}
		first = false
		if name := flagNames[i]; name != "" {
			b.WriteString(name)
		} else {
			b.WriteString("0x")
			b.WriteString(strconv.FormatUint(uint64(bit), 16))
		}
	}
	b.WriteByte(')')
	return b.String()
}

// SetString renders f as a set of bits, such as a client_flags offer or
// the modifier bits a client accepts: like String, except that zero (the
// empty set) renders as "0x0000(none)" rather than as the JSON frame
// layout. String stays the rendering of a frame's flag word (felix decode
// and the vectors use it).
func (f Flags) SetString() string {
	if f == 0 {
		return "0x0000(none)"
	}
	return f.String()
}

// Layout identifies the payload layout a flag word selects.
type Layout uint8

// Payload layouts.
const (
	// LayoutJSON is a JSON control message (flags 0).
	LayoutJSON Layout = iota
	// LayoutPublishBatch is a plain or keyed publish batch (0x0001, 0x0041).
	LayoutPublishBatch
	// LayoutAckedPublishBatch is an acked publish batch (flags with 0x0008).
	LayoutAckedPublishBatch
	// LayoutPublishAck is a binary publish acknowledgement (0x0010).
	LayoutPublishAck
	// LayoutEventBatch is an event batch, shared (0x0004) or legacy (0x0002).
	LayoutEventBatch
	// LayoutUnknown is a non-zero flag word with no base layout bit.
	LayoutUnknown
)

var layoutNames = [...]string{
	LayoutJSON:              "json_message",
	LayoutPublishBatch:      "binary_publish_batch",
	LayoutAckedPublishBatch: "binary_acked_publish_batch",
	LayoutPublishAck:        "binary_publish_ack",
	LayoutEventBatch:        "binary_event_batch",
	LayoutUnknown:           "unknown",
}

// String returns the layout's name as used by vectors/FORMAT.md.
func (l Layout) String() string {
	if int(l) < len(layoutNames) {
		return layoutNames[l]
	}
	return "layout(" + strconv.Itoa(int(l)) + ")"
}

// Layout returns the payload layout selected by f, dispatching the way a
// receiver does: 0 is JSON; 0x0001 is a publish batch (acked when 0x0008 is
// set); 0x0010 is an ack; 0x0004 or 0x0002 is an event batch. Whether the
// combination is legal for that layout is answered by CheckLayout.
func (f Flags) Layout() Layout {
	switch {
	case f == 0:
		return LayoutJSON
	case f.Has(FlagBinaryPublishBatch):
		if f.Has(FlagBinaryPublishAcked) {
			return LayoutAckedPublishBatch
		}
		return LayoutPublishBatch
	case f.Has(FlagBinaryPublishAck):
		return LayoutPublishAck
	case f.Any(FlagBinaryEventBatch | FlagBinaryEventBatchShared):
		return LayoutEventBatch
	default:
		return LayoutUnknown
	}
}

// CheckKnown returns an ErrUnknownFlags error when f has a bit outside
// KnownFlags.
func (f Flags) CheckKnown() error {
	if u := f.Unknown(); u != 0 {
		return &Error{Class: ErrUnknownFlags, Layout: "frame", Field: "flags", Offset: 6, Flags: u}
	}
	return nil
}

// CheckLayout validates f as the flag word of a frame decoded with layout l.
// It returns ErrUnknownFlags for bits outside KnownFlags, and
// ErrBadFlagCombination for known bits the layout refuses:
//
//   - JSON: flags must be 0.
//   - Publish batch: exactly one of 0x0001 0x0009 0x0041 0x0049 0x0109 0x0149
//     (0x0100 needs 0x0008; no event or ack bits). LayoutPublishBatch refuses
//     0x0008 and LayoutAckedPublishBatch requires it.
//   - Publish ack: 0x0010 plus any of 0x0080 0x0200 0x0400 0x1000. 0x0400
//     without 0x0200 is accepted, as upstream's decoder parses it.
//   - Event batch: exactly one of 0x0002, 0x0004, plus any of 0x0020 0x0800
//     0x2000 0x4000, where 0x0800 needs 0x0020.
//
// Upstream receivers ignore bits that belong to a different layout; this
// package refuses them so that a frame has exactly one meaning.
func (f Flags) CheckLayout(l Layout) error {
	if err := f.CheckKnown(); err != nil {
		return err
	}
	bad := func(bits Flags, detail string) error {
		return &Error{Class: ErrBadFlagCombination, Layout: l.String(), Field: "flags", Offset: 6, Flags: bits, Detail: detail}
	}
	switch l {
	case LayoutJSON:
		if f != 0 {
			return bad(f, "a JSON control message has flags 0")
		}
	case LayoutPublishBatch, LayoutAckedPublishBatch:
		if !f.Has(FlagBinaryPublishBatch) {
			return bad(f, "publish batch needs 0x0001")
		}
		if x := f &^ PublishFlagsMask; x != 0 {
			return bad(x, "bits not valid on a publish batch")
		}
		if f.Has(FlagBinaryPublishIdempotent) && !f.Has(FlagBinaryPublishAcked) {
			return bad(FlagBinaryPublishIdempotent, "an idempotent publish must be acked (0x0100 needs 0x0008)")
		}
		if l == LayoutPublishBatch && f.Has(FlagBinaryPublishAcked) {
			return bad(FlagBinaryPublishAcked, "acked publish batch decoded as plain")
		}
		if l == LayoutAckedPublishBatch && !f.Has(FlagBinaryPublishAcked) {
			return bad(f, "acked publish batch needs 0x0008")
		}
	case LayoutPublishAck:
		if !f.Has(FlagBinaryPublishAck) {
			return bad(f, "publish ack needs 0x0010")
		}
		if x := f &^ AckFlagsMask; x != 0 {
			return bad(x, "bits not valid on a publish ack")
		}
	case LayoutEventBatch:
		base := f & (FlagBinaryEventBatch | FlagBinaryEventBatchShared)
		if base != FlagBinaryEventBatch && base != FlagBinaryEventBatchShared {
			return bad(f, "event batch needs exactly one of 0x0002, 0x0004")
		}
		if x := f &^ (base | EventModifierMask); x != 0 {
			return bad(x, "bits not valid on an event batch")
		}
		if f.Has(FlagEventBatchSkipped) && !f.Has(FlagEventBatchOffsets) {
			return bad(FlagEventBatchSkipped, "0x0800 needs 0x0020")
		}
	default:
		return bad(f, "no base layout bit")
	}
	return nil
}
