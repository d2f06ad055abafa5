package vectors

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/flxproto/felix"
)

// The binary kinds of FORMAT.md: binary_publish_batch and
// binary_acked_publish_batch (both decode any legal publish flag word and
// print the acked members only when the frame has 0x0008),
// binary_publish_ack and binary_event_batch.
func init() {
	Register(Codec{Kind: "binary_publish_batch", Decode: decodePublishBatch, Encode: encodePublishBatch})
	Register(Codec{Kind: "binary_acked_publish_batch", Decode: decodePublishBatch, Encode: encodePublishBatch})
	Register(Codec{Kind: "binary_publish_ack", Decode: decodePublishAck, Encode: encodePublishAck})
	Register(Codec{Kind: "binary_event_batch", Decode: decodeEventBatch, Encode: encodeEventBatch})
}

// bytesMember names bytes NAME_utf8 when they are valid UTF-8, else NAME_hex.
func bytesMember(name string, b []byte) Member {
	if utf8.Valid(b) {
		return Member{Name: name + "_utf8", Value: string(b)}
	}
	return Member{Name: name + "_hex", Value: hex.EncodeToString(b)}
}

// listMember names a list of byte strings NAME_utf8 when every element is
// valid UTF-8, else NAME_hex.
func listMember(name string, list [][]byte) Member {
	all := true
	for _, p := range list {
		all = all && utf8.Valid(p)
	}
	out := make([]string, len(list))
	for i, p := range list {
		if all {
			out[i] = string(p)
		} else {
			out[i] = hex.EncodeToString(p)
		}
	}
	if all {
		return Member{Name: name + "_utf8", Value: out}
	}
	return Member{Name: name + "_hex", Value: out}
}

func decodePublishBatch(frame []byte, maxPayload uint32) ([]Member, []byte, error) {
	f, err := felix.DecodeFrame(frame, maxPayload)
	if err != nil {
		return nil, nil, err
	}
	b, err := felix.DecodePublishBatch(f.Flags, f.Payload)
	if err != nil {
		return nil, nil, err
	}
	var ms []Member
	if b.AckMode != felix.AckNone {
		ms = append(ms, Member{"request_id", b.RequestID}, Member{"ack_mode", b.AckMode.String()})
		if b.Idempotent {
			ms = append(ms, Member{"producer_id", b.ProducerID}, Member{"sequence", b.Sequence})
		}
	}
	if b.HasKey {
		ms = append(ms, bytesMember("key", b.Key))
	}
	ms = append(ms, Member{"tenant_id", b.TenantID}, Member{"namespace", b.Namespace}, Member{"stream", b.Stream},
		listMember("payloads", b.Payloads))
	re, err := felix.AppendPublishBatch(nil, &b)
	return ms, re, err
}

func encodePublishBatch(v map[string]json.RawMessage, flags felix.Flags) ([]byte, error) {
	m := members(v)
	var b felix.PublishBatch
	if id, ok := m.uint("request_id"); ok {
		b.RequestID = id
		s, _ := m.str("ack_mode")
		mode, ok := felix.ParseAckMode(s)
		if !ok || mode == felix.AckNone {
			m.errf("ack_mode %q has no binary form", s)
		}
		b.AckMode = mode
	}
	if pid, ok := m.uint("producer_id"); ok {
		b.Idempotent, b.ProducerID = true, pid
		b.Sequence, _ = m.uint("sequence")
	}
	b.Key, b.HasKey = m.bytes("key")
	b.TenantID, _ = m.str("tenant_id")
	b.Namespace, _ = m.str("namespace")
	b.Stream, _ = m.str("stream")
	b.Payloads, _ = m.list("payloads")
	if m.err != nil {
		return nil, m.err
	}
	return felix.AppendPublishBatch(nil, &b)
}

func decodePublishAck(frame []byte, maxPayload uint32) ([]Member, []byte, error) {
	f, err := felix.DecodeFrame(frame, maxPayload)
	if err != nil {
		return nil, nil, err
	}
	a, err := felix.DecodePublishAck(f.Flags, f.Payload)
	if err != nil {
		return nil, nil, err
	}
	ms := []Member{{"status", a.Status.String()}, {"request_id", a.RequestID}}
	if a.Status == felix.AckOK {
		ms = append(ms, Member{"message", nil})
	} else {
		ms = append(ms, Member{"message", a.Message})
	}
	if f.Flags.Has(felix.FlagBinaryPublishAckCode) {
		ms = append(ms, Member{"code", string(a.Code)}, Member{"retry", a.Retry.String()})
	}
	if a.HasDetail {
		ms = append(ms, Member{"reason", nullIfZero(a.Reason)}, Member{"retry_after_ms", nullIfZero(a.RetryAfterMs)})
	}
	if a.HasOwner {
		ms = append(ms, Member{"owner", ownerMember{NodeID: a.Owner.NodeID, Addr: nullIfZero(a.Owner.Addr), Generation: a.Owner.Generation}})
	}
	if a.HasOffset {
		ms = append(ms, Member{"offset", a.Offset})
	}
	re, err := felix.AppendPublishAck(nil, &a)
	return ms, re, err
}

func nullIfZero[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}

func encodePublishAck(v map[string]json.RawMessage, flags felix.Flags) ([]byte, error) {
	m := members(v)
	var a felix.PublishAck
	switch s, _ := m.str("status"); s {
	case "ok":
		a.Status = felix.AckOK
	case "error":
		a.Status = felix.AckError
	default:
		m.errf("status %q", s)
	}
	a.RequestID, _ = m.uint("request_id")
	a.Message, _ = m.str("message")
	if code, ok := m.str("code"); ok {
		a.Code = felix.ErrorCode(code)
		a.Retry = a.Code.DefaultRetry()
		if r, ok := m.str("retry"); ok {
			a.Retry = felix.ParseRetryClass(r)
		}
	}
	_, hasReason := v["reason"]
	_, hasWait := v["retry_after_ms"]
	if hasReason || hasWait {
		a.HasDetail = true
		a.Reason, _ = m.str("reason")
		a.RetryAfterMs, _ = m.uint("retry_after_ms")
	}
	if raw, ok := v["owner"]; ok {
		om := members(nil)
		if err := json.Unmarshal(raw, &om.v); err != nil || om.v == nil {
			return nil, fmt.Errorf("owner is not an object")
		}
		a.HasOwner = true
		a.Owner.NodeID, _ = om.str("node_id")
		a.Owner.Addr, _ = om.str("addr")
		a.Owner.Generation, _ = om.uint("generation")
		if om.err != nil {
			return nil, fmt.Errorf("owner: %w", om.err)
		}
	}
	a.Offset, a.HasOffset = m.uint("offset")
	if m.err != nil {
		return nil, m.err
	}
	return felix.AppendPublishAck(nil, &a)
}

func decodeEventBatch(frame []byte, maxPayload uint32) ([]Member, []byte, error) {
	f, err := felix.DecodeFrame(frame, maxPayload)
	if err != nil {
		return nil, nil, err
	}
	b, err := felix.DecodeEventBatch(f.Flags, f.Payload)
	if err != nil {
		return nil, nil, err
	}
	var ms []Member
	if b.Legacy {
		ms = append(ms, Member{"subscription_id", b.SubscriptionID})
	}
	if b.HasBaseOffset {
		ms = append(ms, Member{"base_offset", b.BaseOffset})
	}
	if f.Flags.Has(felix.FlagEventBatchSkipped) {
		ms = append(ms, Member{"skipped_before", b.SkippedBefore})
	}
	if b.HasPublisher {
		ms = append(ms, bytesMember("publisher", b.Publisher))
	}
	if b.HasTimestamps {
		ts := b.Timestamps
		if ts == nil {
			ts = []uint64{}
		}
		ms = append(ms, Member{"timestamps_micros", ts})
	}
	ms = append(ms, listMember("payloads", b.Payloads))
	re, err := felix.AppendEventBatch(nil, &b, felix.EventModifierMask)
	return ms, re, err
}

func encodeEventBatch(v map[string]json.RawMessage, flags felix.Flags) ([]byte, error) {
	m := members(v)
	var b felix.EventBatch
	b.SubscriptionID, b.Legacy = m.uint("subscription_id")
	if flags.Has(felix.FlagBinaryEventBatch) {
		b.Legacy = true
	}
	b.BaseOffset, b.HasBaseOffset = m.uint("base_offset")
	b.SkippedBefore, _ = m.uint("skipped_before")
	b.Publisher, b.HasPublisher = m.bytes("publisher")
	if raw, ok := v["timestamps_micros"]; ok {
		b.HasTimestamps = true
		if err := json.Unmarshal(raw, &b.Timestamps); err != nil {
			return nil, fmt.Errorf("timestamps_micros: %v", err)
		}
	}
	b.Payloads, _ = m.list("payloads")
	if m.err != nil {
		return nil, m.err
	}
	return felix.AppendEventBatch(nil, &b, felix.EventModifierMask)
}

// memberReader reads typed members of a vector object, keeping the first
// error.
type memberReader struct {
	v   map[string]json.RawMessage
	err error
}

func members(v map[string]json.RawMessage) *memberReader { return &memberReader{v: v} }

func (m *memberReader) errf(format string, args ...any) {
	if m.err == nil {
		m.err = fmt.Errorf(format, args...)
	}
}

// str reads a string member; null reads as absent.
func (m *memberReader) str(name string) (string, bool) {
	raw, ok := m.v[name]
	if !ok || string(raw) == "null" {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		m.errf("%s is not a string", name)
		return "", false
	}
	return s, true
}

// uint reads an unsigned integer member; null reads as absent.
func (m *memberReader) uint(name string) (uint64, bool) {
	raw, ok := m.v[name]
	if !ok || string(raw) == "null" {
		return 0, false
	}
	var n uint64
	if err := json.Unmarshal(raw, &n); err != nil {
		m.errf("%s is not an unsigned integer", name)
		return 0, false
	}
	return n, true
}

// bytes reads NAME_utf8 or NAME_hex. A present member yields non-nil bytes.
func (m *memberReader) bytes(name string) ([]byte, bool) {
	if s, ok := m.str(name + "_utf8"); ok {
		return append([]byte{}, s...), true
	}
	if s, ok := m.str(name + "_hex"); ok {
		b, err := hex.DecodeString(s)
		if err != nil {
			m.errf("%s_hex: %v", name, err)
		}
		return append([]byte{}, b...), true
	}
	return nil, false
}

// list reads NAME_utf8 or NAME_hex as an array of byte strings.
func (m *memberReader) list(name string) ([][]byte, bool) {
	var ss []string
	isHex := false
	if raw, ok := m.v[name+"_utf8"]; ok {
		if err := json.Unmarshal(raw, &ss); err != nil {
			m.errf("%s_utf8 is not an array of strings", name)
		}
	} else if raw, ok := m.v[name+"_hex"]; ok {
		isHex = true
		if err := json.Unmarshal(raw, &ss); err != nil {
			m.errf("%s_hex is not an array of strings", name)
		}
	} else {
		return nil, false
	}
	out := make([][]byte, len(ss))
	for i, s := range ss {
		if !isHex {
			out[i] = []byte(s)
			continue
		}
		b, err := hex.DecodeString(s)
		if err != nil {
			m.errf("%s_hex[%d]: %v", name, i, err)
		}
		out[i] = b
	}
	return out, true
}

// ownerMember is the `owner` member of a binary_publish_ack vector, with its
// members in the order FORMAT.md lists them.
type ownerMember struct {
	NodeID     string `json:"node_id"`
	Addr       any    `json:"addr"`
	Generation uint64 `json:"generation"`
}
