package felix

import (
	"encoding/binary"
	"strconv"
)

// AckStatus is the status byte of a binary publish ack.
type AckStatus uint8

// Ack statuses.
const (
	AckOK    AckStatus = 0 // the batch was accepted
	AckError AckStatus = 1 // the batch failed; Message says why
)

// String returns "ok", "error", or "ack_status(n)".
func (s AckStatus) String() string {
	switch s {
	case AckOK:
		return "ok"
	case AckError:
		return "error"
	}
	return "ack_status(" + strconv.Itoa(int(s)) + ")"
}

// AckOwner names the broker that owns the shard a batch was forwarded to
// (flag 0x0080).
type AckOwner struct {
	// NodeID is the owner's node id (UTF-8).
	NodeID string
	// Addr is the owner's client-facing "host:port" (UTF-8). Empty means
	// the address is not published (it is sent as length 0).
	Addr string
	// Generation is the ownership epoch the hint is valid for.
	Generation uint64
}

// PublishAck is a binary publish acknowledgement (flags 0x0010, spec
// docs/binary.md §6), sent by a broker in answer to an acked binary publish. The
// flag word follows from the value (see Flags), applying upstream's encoder
// rules: the code (0x0200) is sent only on a failure that has a Code, the
// detail (0x0400) only together with the code, the owner (0x0080) whenever
// HasOwner is set, and the offset (0x1000) only on a success. An ack with
// none of them is byte-identical to the original v1 ack. Use Restrict to
// drop the sections a client did not offer.
type PublishAck struct {
	// Status is AckOK or AckError.
	Status AckStatus
	// RequestID echoes the publish's request id.
	RequestID uint64
	// Message explains a failure (UTF-8). It is not sent on a success and
	// decodes as "" there.
	Message string
	// Code is the error code of a failure; "" means none. Numbers outside
	// the table decode as "code_<n>" and encode back to n.
	Code ErrorCode
	// Retry is sent with Code. Zero means the code's default class
	// (Code.DefaultRetry, docs/errors.md §Retry classes), as on the JSON
	// path; any other value outside 1..5 is sent as RetryFatal, and an
	// unknown byte decodes as RetryFatal.
	Retry RetryClass
	// HasDetail adds Reason and RetryAfterMs (sent only with Code).
	HasDetail bool
	// Reason is the detail reason (UTF-8); "" means no reason.
	Reason string
	// RetryAfterMs is the suggested wait in milliseconds; 0 means none.
	RetryAfterMs uint64
	// HasOwner adds Owner: the batch was forwarded to another broker.
	HasOwner bool
	// Owner names the shard owner, with HasOwner.
	Owner AckOwner
	// HasOffset adds Offset (sent only on a success).
	HasOffset bool
	// Offset is the log offset of the batch's first record; record i is
	// at Offset+i.
	Offset uint64
}

const layoutAck = "binary_publish_ack"

// RetryClass returns the retry class AppendPublishAck writes for a: Retry,
// or the code's default when Retry is zero (a value outside 1..5 writes
// RetryFatal). It is meaningful only for a failure with a Code.
func (a PublishAck) RetryClass() RetryClass {
	switch {
	case a.Retry == 0:
		return a.Code.DefaultRetry()
	case a.Retry > RetryFatal:
		return RetryFatal
	}
	return a.Retry
}

func (a PublishAck) sendCode() bool   { return a.Status == AckError && a.Code != "" }
func (a PublishAck) sendDetail() bool { return a.sendCode() && a.HasDetail }
func (a PublishAck) sendOffset() bool { return a.Status == AckOK && a.HasOffset }

// Flags returns the flag word AppendPublishAck writes for a.
func (a PublishAck) Flags() Flags {
	f := FlagBinaryPublishAck
	if a.sendCode() {
		f |= FlagBinaryPublishAckCode
	}
	if a.sendDetail() {
		f |= FlagBinaryPublishAckDetail
	}
	if a.HasOwner {
		f |= FlagBinaryPublishAckOwner
	}
	if a.sendOffset() {
		f |= FlagBinaryPublishAckOffset
	}
	return f
}

// Restrict returns a copy of a without the optional sections whose flag bit
// is not in accepted (the client's auth.client_flags), so the broker never
// sets a bit the client did not offer.
func (a PublishAck) Restrict(accepted Flags) PublishAck {
	if !accepted.Has(FlagBinaryPublishAckCode) {
		a.Code, a.Retry = "", 0
	}
	if !accepted.Has(FlagBinaryPublishAckDetail) {
		a.HasDetail, a.Reason, a.RetryAfterMs = false, "", 0
	}
	if !accepted.Has(FlagBinaryPublishAckOwner) {
		a.HasOwner, a.Owner = false, AckOwner{}
	}
	if !accepted.Has(FlagBinaryPublishAckOffset) {
		a.HasOffset, a.Offset = false, 0
	}
	return a
}

// FrameLen returns the exact number of bytes AppendPublishAck appends for a.
func (a PublishAck) FrameLen() int {
	n := HeaderLen + 11
	if a.Status == AckError {
		n += len(a.Message)
	}
	if a.sendCode() {
		n += 3
	}
	if a.sendDetail() {
		n += 10 + len(a.Reason)
	}
	if a.HasOwner {
		n += 12 + len(a.Owner.NodeID) + len(a.Owner.Addr)
	}
	if a.sendOffset() {
		n += 8
	}
	return n
}

func (a PublishAck) check() error {
	if a.Status > AckError {
		return encErr(ErrInvalidValue, layoutAck, "status", "status "+strconv.Itoa(int(a.Status)))
	}
	if a.Status == AckError {
		if err := checkStr16(layoutAck, "message", a.Message, true); err != nil {
			return err
		}
	}
	if a.sendDetail() {
		if err := checkStr16(layoutAck, "reason", a.Reason, true); err != nil {
			return err
		}
	}
	if a.HasOwner {
		if err := checkStr16(layoutAck, "node_id", a.Owner.NodeID, true); err != nil {
			return err
		}
		if err := checkStr16(layoutAck, "addr", a.Owner.Addr, true); err != nil {
			return err
		}
	}
	return nil
}

// AppendPublishAck appends a as a whole frame to dst, with the flag word
// a.Flags(). It allocates only when dst lacks room for a.FrameLen() bytes.
// On error dst is returned unchanged: a status other than AckOK/AckError is
// ErrInvalidValue, a text field over 65,535 bytes ErrFrameTooLarge, and a
// non-UTF-8 text field ErrInvalidUTF8. On a success the message is not sent
// (length 0).
func AppendPublishAck(dst []byte, a *PublishAck) ([]byte, error) {
	if err := a.check(); err != nil {
		return dst, err
	}
	dst = grow(dst, a.FrameLen())
	start := len(dst)
	dst = BeginFrame(dst, a.Flags())
	dst = append(dst, byte(a.Status))
	dst = binary.BigEndian.AppendUint64(dst, a.RequestID)
	if a.Status == AckError {
		dst = appendStr16(dst, a.Message)
	} else {
		dst = append(dst, 0, 0)
	}
	if a.sendCode() {
		r := a.RetryClass()
		dst = binary.BigEndian.AppendUint16(dst, a.Code.Number())
		dst = append(dst, byte(r))
		if a.HasDetail {
			dst = appendStr16(dst, a.Reason)
			dst = binary.BigEndian.AppendUint64(dst, a.RetryAfterMs)
		}
	}
	if a.HasOwner {
		dst = appendStr16(dst, a.Owner.NodeID)
		dst = appendStr16(dst, a.Owner.Addr)
		dst = binary.BigEndian.AppendUint64(dst, a.Owner.Generation)
	}
	if a.sendOffset() {
		dst = binary.BigEndian.AppendUint64(dst, a.Offset)
	}
	return FinishFrame(dst, start)
}

// DecodePublishAck decodes a publish ack payload. flags must be 0x0010 plus
// any of 0x0080, 0x0200, 0x0400, 0x1000 (checked with Flags.CheckLayout);
// 0x0400 without 0x0200 is parsed, as upstream's decoder does. Rules, in
// upstream's order: 11 bytes and then the message must be present
// (ErrTruncated); the status must be 0 or 1 (ErrInvalidValue); a failure's
// message must be UTF-8 (a success's message bytes are skipped unread, as
// upstream does); each flagged section is read whenever its bit is set,
// whatever the status, and a truncated section is an error, never a partial
// result; reason, node_id and addr must be UTF-8. An unknown code number n
// decodes as "code_<n>" and an unknown retry byte as RetryFatal.
//
// Bytes after the last section are rejected with ErrTrailingBytes. Upstream
// ignores them; this package is deliberately stricter. Error offsets are
// relative to the payload.
//
// Frames that upstream encoders never produce (a code, detail or offset on
// the wrong status, a detail without a code, a message on a success, an
// unknown retry byte) decode, but re-encode to their canonical form.
func DecodePublishAck(flags Flags, payload []byte) (PublishAck, error) {
	if err := flags.CheckLayout(LayoutPublishAck); err != nil {
		return PublishAck{}, err
	}
	c := cursor{b: payload, layout: layoutAck}
	var a PublishAck
	st := c.u8("status")
	a.RequestID = c.u64("request_id")
	mOff := c.off + 2
	msg := c.str16("message")
	if c.err == nil && st > byte(AckError) {
		c.fail(ErrInvalidValue, "status", 0, "ack status byte "+strconv.Itoa(int(st)))
	}
	a.Status = AckStatus(st)
	if a.Status == AckError {
		c.text(msg, "message", mOff)
		a.Message = string(msg)
	}
	if flags.Has(FlagBinaryPublishAckCode) {
		a.Code = ErrorCodeFromNumber(c.u16("code"))
		a.Retry = RetryClassFromByte(c.u8("retry_class"))
	}
	if flags.Has(FlagBinaryPublishAckDetail) {
		a.HasDetail = true
		rOff := c.off + 2
		r := c.str16("reason")
		a.RetryAfterMs = c.u64("retry_after_ms")
		c.text(r, "reason", rOff)
		a.Reason = string(r)
	}
	if flags.Has(FlagBinaryPublishAckOwner) {
		a.HasOwner = true
		nOff := c.off + 2
		node := c.str16("node_id")
		aOff := c.off + 2
		addr := c.str16("addr")
		a.Owner.Generation = c.u64("generation")
		// Bounds of the whole section first, then UTF-8 (docs/binary.md §6 order).
		c.text(node, "node_id", nOff)
		c.text(addr, "addr", aOff)
		a.Owner.NodeID, a.Owner.Addr = string(node), string(addr)
	}
	if flags.Has(FlagBinaryPublishAckOffset) {
		a.HasOffset = true
		a.Offset = c.u64("offset")
	}
	c.end()
	if c.err != nil {
		return PublishAck{}, c.err
	}
	return a, nil
}
