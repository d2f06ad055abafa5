package vectors

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/flxproto/felix"
)

// The project's own binary vectors live in vectors/binary. They are written
// by binaryVectors below: the worked examples of docs/binary.md with their
// hex copied from its text and their decoded members written by hand,
// every legal modifier combination (encoded by the codec and pinned), and
// invalid vectors for every rejection rule. TestBinaryVectorFiles checks the
// files match; run it with -update-binary-vectors to rewrite them.
var updateBinaryVectors = flag.Bool("update-binary-vectors", false, "rewrite vectors/binary from the generator")

const binaryVectorDir = "binary"

// kv is one ordered JSON member.
type kv struct {
	k string
	v any
}

// binVec is one generated vector.
type binVec struct {
	name      string
	kind      string // a binary kind, or "invalid"
	frame     []byte
	members   []kv   // decoded members (valid kinds)
	canonical []byte // canonical_frame_hex, when the frame is not canonical
	layout    string // invalid
	class     string // invalid
	note      string
}

func hx(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func frameOf(t testing.TB, flags felix.Flags, payload []byte) []byte {
	t.Helper()
	b, err := felix.AppendFrame(nil, flags, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func flagsOf(frame []byte) felix.Flags { return felix.Flags(frame[6])<<8 | felix.Flags(frame[7]) }

// render returns the JSON and hex file contents of v.
func (v binVec) render(t testing.TB) (js, hx []byte) {
	t.Helper()
	var ms []kv
	ms = append(ms, kv{"name", v.name}, kv{"kind", v.kind})
	if v.kind == "invalid" {
		ms = append(ms, kv{"layout", v.layout}, kv{"error", v.class})
	}
	if len(v.frame) >= 8 {
		ms = append(ms, kv{"flags", uint64(flagsOf(v.frame))})
	}
	ms = append(ms, v.members...)
	if len(v.frame) >= felix.HeaderLen {
		ms = append(ms, kv{"payload_hex", hex.EncodeToString(v.frame[felix.HeaderLen:])})
	}
	ms = append(ms, kv{"frame_hex", hex.EncodeToString(v.frame)})
	if v.canonical != nil {
		ms = append(ms, kv{"canonical_frame_hex", hex.EncodeToString(v.canonical)})
	}
	if v.note != "" {
		ms = append(ms, kv{"note", v.note})
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, m := range ms {
		val, err := json.MarshalIndent(m.v, "  ", "  ")
		if err != nil {
			t.Fatal(err)
		}
		key, _ := json.Marshal(m.k)
		b.WriteString("  ")
		b.Write(key)
		b.WriteString(": ")
		b.Write(val)
		if i < len(ms)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return b.Bytes(), []byte(hex.EncodeToString(v.frame) + "\n")
}

// fromCodec builds a valid vector whose members are the codec's decode of
// frame (used for combinations pinned from the encoder).
func fromCodec(t testing.TB, name, kind string, frame []byte, note string) binVec {
	t.Helper()
	c, ok := Lookup(kind)
	if !ok {
		t.Fatalf("no codec %s", kind)
	}
	ms, re, err := c.Decode(frame, 0)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	v := binVec{name: name, kind: kind, frame: frame, note: note}
	for _, m := range ms {
		v.members = append(v.members, kv{m.Name, m.Value})
	}
	if !bytes.Equal(re, frame) {
		v.canonical = re
	}
	return v
}

func invalid(name, layout, class string, frame []byte, note string) binVec {
	return binVec{name: name, kind: "invalid", layout: layout, class: class, frame: frame, note: note}
}

// field is one field of a payload layout, for cutting it at each section.
type field struct {
	name string
	size int
}

// truncations returns one invalid vector per field: the payload cut inside
// (or, for a 1-byte field, just before) that field, with a header that
// announces the cut length, so only the layout is short.
func truncations(t testing.TB, prefix, layout string, frame []byte, fields []field) []binVec {
	t.Helper()
	payload := frame[felix.HeaderLen:]
	total := 0
	for _, f := range fields {
		total += f.size
	}
	if total != len(payload) {
		t.Fatalf("%s: fields cover %d bytes, payload has %d", prefix, total, len(payload))
	}
	var out []binVec
	off := 0
	for _, f := range fields {
		cut := off + f.size/2
		out = append(out, invalid(prefix+"_"+f.name, layout, "truncated", frameOf(t, flagsOf(frame), payload[:cut]),
			"the docs/binary.md example cut inside "+f.name))
		off += f.size
	}
	return out
}

// withPayload returns frame with its payload replaced (length re-announced).
func withPayload(t testing.TB, frame []byte, payload []byte) []byte {
	return frameOf(t, flagsOf(frame), payload)
}

func withFlags(t testing.TB, frame []byte, flags felix.Flags) []byte {
	return frameOf(t, flags, frame[felix.HeaderLen:])
}

func appendByte(t testing.TB, frame []byte, b ...byte) []byte {
	return withPayload(t, frame, append(append([]byte{}, frame[felix.HeaderLen:]...), b...))
}

// Spec examples (hex from docs/binary.md).
const (
	specPublishPlain    = "464c583100010001000000190002743100026e730001730000000200000002686900000000"
	specPublishAcked    = "464c583100010009000000220000000000000005010002743100026e730001730000000200000002686900000000"
	specPublishKeyed    = "464c5831000100410000001c00016b0002743100026e730001730000000200000002686900000000"
	specPublishIdem     = "464c58310001010900000032000000000000000502010203040506070800000000000000030002743100026e730001730000000200000002686900000000"
	specPublishAckKey   = "464c5831000100490000002500000000000000050200016b0002743100026e730001730000000200000002686900000000"
	specPublishIdemKey  = "464c583100010149000000350000000000000005020102030405060708000000000000000300016b0002743100026e730001730000000200000002686900000000"
	specAckOK           = "464c5831000100100000000b0000000000000000050000"
	specAckError        = "464c5831000100100000000d01000000000000000500026e6f"
	specAckCode         = "464c5831000102100000001001000000000000000500026e6f000501"
	specAckDetail       = "464c5831000106100000002001000000000000000500026e6f00050100066d6f76696e6700000000000000fa"
	specAckOwner        = "464c5831000100900000001900000000000000000500000002623200000000000000000007"
	specAckOffset       = "464c583100011010000000130000000000000000050000000000000000002a"
	specAckOwnerOffset  = "464c583100011090000000240000000000000000050000000262320003683a310000000000000007000000000000002a"
	specAckAll          = "464c5831000106900000003101000000000000000500026e6f00050100066d6f76696e6700000000000000fa000262320003683a310000000000000007"
	specLegacyPlain     = "464c583100010002000000170000000000000009000000020000000161000000026263"
	specLegacyOffset    = "464c5831000100220000001f00000000000000090000000000000064000000020000000161000000026263"
	specLegacyAll       = "464c5831000168220000003a00000000000000090000000000000064000000000000000102616c0000000200060a24181e4000000000016100060a24181e4001000000026263"
	specSharedPlain     = "464c5831000100040000000f000000020000000161000000026263"
	specSharedEmpty     = "464c5831000100040000000400000000"
	specSharedOffset    = "464c583100010024000000170000000000000064000000020000000161000000026263"
	specSharedSkipped   = "464c5831000108240000001f00000000000000640000000000000001000000020000000161000000026263"
	specSharedPublisher = "464c5831000120040000001202616c000000020000000161000000026263"
	specSharedTimes     = "464c5831000140040000001f0000000200060a24181e4000000000016100060a24181e4001000000026263"
	specSharedAll       = "464c583100016824000000320000000000000064000000000000000102616c0000000200060a24181e4000000000016100060a24181e4001000000026263"
)

func specVectors(t testing.TB) []binVec {
	body := []kv{{"tenant_id", "t1"}, {"namespace", "ns"}, {"stream", "s"}, {"payloads_utf8", []string{"hi", ""}}}
	ev := []kv{{"payloads_utf8", []string{"a", "bc"}}}
	ts := kv{"timestamps_micros", []uint64{1700000000000000, 1700000000000001}}
	cat := func(parts ...[]kv) []kv {
		var out []kv
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	pub := func(name, kind, h string, ms []kv) binVec {
		return binVec{name: name, kind: kind, frame: hx(t, h), members: ms, note: "worked example of docs/binary.md (hex from its text)"}
	}
	const (
		pk = "binary_publish_batch"
		ak = "binary_acked_publish_batch"
		ck = "binary_publish_ack"
		ek = "binary_event_batch"
	)
	owner := map[string]any{"node_id": "b2", "addr": "h:1", "generation": uint64(7)}
	return []binVec{
		pub("spec_publish_plain", pk, specPublishPlain, body),
		pub("spec_publish_acked", ak, specPublishAcked, cat([]kv{{"request_id", uint64(5)}, {"ack_mode", "per_message"}}, body)),
		pub("spec_publish_keyed", pk, specPublishKeyed, cat([]kv{{"key_utf8", "k"}}, body)),
		pub("spec_publish_idempotent", ak, specPublishIdem, cat([]kv{{"request_id", uint64(5)}, {"ack_mode", "per_batch"},
			{"producer_id", uint64(0x0102030405060708)}, {"sequence", uint64(3)}}, body)),
		pub("spec_publish_acked_keyed", ak, specPublishAckKey, cat([]kv{{"request_id", uint64(5)}, {"ack_mode", "per_batch"}, {"key_utf8", "k"}}, body)),
		pub("spec_publish_idempotent_keyed", ak, specPublishIdemKey, cat([]kv{{"request_id", uint64(5)}, {"ack_mode", "per_batch"},
			{"producer_id", uint64(0x0102030405060708)}, {"sequence", uint64(3)}, {"key_utf8", "k"}}, body)),

		pub("spec_ack_ok", ck, specAckOK, []kv{{"status", "ok"}, {"request_id", uint64(5)}, {"message", nil}}),
		pub("spec_ack_error", ck, specAckError, []kv{{"status", "error"}, {"request_id", uint64(5)}, {"message", "no"}}),
		pub("spec_ack_error_code", ck, specAckCode, []kv{{"status", "error"}, {"request_id", uint64(5)}, {"message", "no"},
			{"code", "shard_unavailable"}, {"retry", "retry"}}),
		pub("spec_ack_error_code_detail", ck, specAckDetail, []kv{{"status", "error"}, {"request_id", uint64(5)}, {"message", "no"},
			{"code", "shard_unavailable"}, {"retry", "retry"}, {"reason", "moving"}, {"retry_after_ms", uint64(250)}}),
		pub("spec_ack_ok_owner_no_addr", ck, specAckOwner, []kv{{"status", "ok"}, {"request_id", uint64(5)}, {"message", nil},
			{"owner", map[string]any{"node_id": "b2", "addr": nil, "generation": uint64(7)}}}),
		pub("spec_ack_ok_offset", ck, specAckOffset, []kv{{"status", "ok"}, {"request_id", uint64(5)}, {"message", nil}, {"offset", uint64(42)}}),
		pub("spec_ack_ok_owner_offset", ck, specAckOwnerOffset, []kv{{"status", "ok"}, {"request_id", uint64(5)}, {"message", nil},
			{"owner", owner}, {"offset", uint64(42)}}),
		pub("spec_ack_error_code_detail_owner", ck, specAckAll, []kv{{"status", "error"}, {"request_id", uint64(5)}, {"message", "no"},
			{"code", "shard_unavailable"}, {"retry", "retry"}, {"reason", "moving"}, {"retry_after_ms", uint64(250)}, {"owner", owner}}),

		pub("spec_event_legacy_plain", ek, specLegacyPlain, cat([]kv{{"subscription_id", uint64(9)}}, ev)),
		pub("spec_event_legacy_base_offset", ek, specLegacyOffset, cat([]kv{{"subscription_id", uint64(9)}, {"base_offset", uint64(100)}}, ev)),
		pub("spec_event_legacy_all", ek, specLegacyAll, cat([]kv{{"subscription_id", uint64(9)}, {"base_offset", uint64(100)},
			{"skipped_before", uint64(1)}, {"publisher_utf8", "al"}, ts}, ev)),
		pub("spec_event_shared_plain", ek, specSharedPlain, ev),
		pub("spec_event_shared_empty", ek, specSharedEmpty, []kv{{"payloads_utf8", []string{}}}),
		pub("spec_event_shared_base_offset", ek, specSharedOffset, cat([]kv{{"base_offset", uint64(100)}}, ev)),
		pub("spec_event_shared_skipped", ek, specSharedSkipped, cat([]kv{{"base_offset", uint64(100)}, {"skipped_before", uint64(1)}}, ev)),
		pub("spec_event_shared_publisher", ek, specSharedPublisher, cat([]kv{{"publisher_utf8", "al"}}, ev)),
		pub("spec_event_shared_timestamps", ek, specSharedTimes, cat([]kv{ts}, ev)),
		pub("spec_event_shared_all", ek, specSharedAll, cat([]kv{{"base_offset", uint64(100)}, {"skipped_before", uint64(1)},
			{"publisher_utf8", "al"}, ts}, ev)),
	}
}

// comboVectors pins every legal modifier combination, encoded by the codec.
func comboVectors(t testing.TB) []binVec {
	var out []binVec
	enc := func(f func() ([]byte, error)) []byte {
		b, err := f()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Publish: the six flag words with binary key and payloads, empty key, empty batch.
	for _, w := range []felix.Flags{0x0001, 0x0009, 0x0041, 0x0049, 0x0109, 0x0149} {
		b := felix.PublishBatch{TenantID: "tenant-é", Namespace: "default", Stream: "orders",
			Payloads: [][]byte{{0x00, 0xff, 0x10}, []byte("second")}}
		if w.Has(felix.FlagBinaryPublishAcked) {
			b.AckMode, b.RequestID = felix.AckPerMessage, 0xFFFFFFFFFFFFFFFF
		}
		if w.Has(felix.FlagBinaryPublishIdempotent) {
			b.AckMode, b.Idempotent, b.ProducerID, b.Sequence = felix.AckPerBatch, true, 1<<63, 0
		}
		if w.Has(felix.FlagBinaryPublishKeyed) {
			b.HasKey, b.Key = true, []byte{0xde, 0xad}
		}
		kind := "binary_publish_batch"
		if b.AckMode != felix.AckNone {
			kind = "binary_acked_publish_batch"
		}
		out = append(out, fromCodec(t, "publish_"+hex.EncodeToString([]byte{byte(w >> 8), byte(w)})+"_binary", kind,
			enc(func() ([]byte, error) { return felix.AppendPublishBatch(nil, &b) }), "binary key (key_hex) and payloads (payloads_hex)"))
	}
	emptyKey := felix.PublishBatch{HasKey: true, Key: []byte{}, TenantID: "t", Namespace: "n", Stream: "s", Payloads: [][]byte{[]byte("x")}}
	out = append(out, fromCodec(t, "publish_0041_empty_key", "binary_publish_batch",
		enc(func() ([]byte, error) { return felix.AppendPublishBatch(nil, &emptyKey) }), "an empty key is a key (flag 0x0040, length 0)"))
	empty := felix.PublishBatch{AckMode: felix.AckPerBatch, RequestID: 1}
	out = append(out, fromCodec(t, "publish_0009_empty_batch_empty_names", "binary_acked_publish_batch",
		enc(func() ([]byte, error) { return felix.AppendPublishBatch(nil, &empty) }), "count 0 and empty tenant/namespace/stream are accepted by the codec"))
	// An idempotent frame carrying ack_mode 1 decodes, and re-encodes with 2:
	// see vectors/binary_xcheck/pub_0109_per_message_reencodes_per_batch.

	// Ack: every canonical combination of the optional sections.
	for _, failed := range []bool{false, true} {
		for _, owner := range []bool{false, true} {
			for level := range 3 {
				a := felix.PublishAck{RequestID: 77}
				if failed {
					a.Status, a.Message = felix.AckError, "stream not found"
					if level >= 1 {
						a.Code, a.Retry = felix.CodeNotFound, felix.RetryAfter
					}
					if level == 2 {
						a.HasDetail, a.Reason, a.RetryAfterMs = true, "", 0
					}
				} else {
					if level == 2 {
						continue
					}
					a.HasOffset, a.Offset = level == 1, 1<<40
				}
				if owner {
					a.HasOwner, a.Owner = true, felix.AckOwner{NodeID: "node-1", Addr: "[::1]:7000", Generation: 12}
				}
				w := a.Flags()
				out = append(out, fromCodec(t, "ack_"+hex.EncodeToString([]byte{byte(w >> 8), byte(w)})+"_"+a.Status.String(), "binary_publish_ack",
					enc(func() ([]byte, error) { return felix.AppendPublishAck(nil, &a) }), ""))
			}
		}
	}
	// Event: both bases with every legal modifier combination.
	for _, legacy := range []bool{true, false} {
		for _, off := range []felix.Flags{0, 0x0020, 0x0820} {
			for _, pub := range []bool{false, true} {
				for _, ts := range []bool{false, true} {
					b := felix.EventBatch{Legacy: legacy, Payloads: [][]byte{[]byte("x"), {}, {0xc3, 0x28}}}
					if legacy {
						b.SubscriptionID = 1<<64 - 1
					}
					if off != 0 {
						b.HasBaseOffset, b.BaseOffset = true, 1000
						if off.Has(felix.FlagEventBatchSkipped) {
							b.SkippedBefore = 2
						}
					}
					if pub {
						b.HasPublisher, b.Publisher = true, []byte("svc:orders")
					}
					if ts {
						b.HasTimestamps, b.Timestamps = true, []uint64{1, 0, 1<<64 - 1}
					}
					w := b.Flags()
					out = append(out, fromCodec(t, "event_"+hex.EncodeToString([]byte{byte(w >> 8), byte(w)}), "binary_event_batch",
						enc(func() ([]byte, error) { return felix.AppendEventBatch(nil, &b, felix.EventModifierMask) }), ""))
				}
			}
		}
	}
	binPub := felix.EventBatch{HasPublisher: true, Publisher: []byte{0xff, 0x00}, Payloads: [][]byte{[]byte("ok")}}
	out = append(out, fromCodec(t, "event_2004_binary_publisher", "binary_event_batch",
		enc(func() ([]byte, error) { return felix.AppendEventBatch(nil, &binPub, felix.EventModifierMask) }), "the publisher is opaque bytes (publisher_hex)"))
	emptyPub := felix.EventBatch{HasPublisher: true, Publisher: []byte{}, HasTimestamps: true, Timestamps: []uint64{}}
	out = append(out, fromCodec(t, "event_6004_empty_publisher_empty_batch", "binary_event_batch",
		enc(func() ([]byte, error) { return felix.AppendEventBatch(nil, &emptyPub, felix.EventModifierMask) }), ""))
	pub255 := felix.EventBatch{HasPublisher: true, Publisher: bytes.Repeat([]byte("p"), 255), Payloads: [][]byte{[]byte("x")}}
	out = append(out, fromCodec(t, "event_2004_publisher_255", "binary_event_batch",
		enc(func() ([]byte, error) { return felix.AppendEventBatch(nil, &pub255, felix.EventModifierMask) }), "the longest publisher"))

	// Valid but not canonical: decoded, then re-encoded by upstream's encoder rules.
	nc := func(name, kind, frame, canonical, note string) {
		v := fromCodec(t, name, kind, hx(t, frame), note)
		got := v.canonical
		if got == nil {
			got = v.frame
		}
		if !bytes.Equal(got, hx(t, canonical)) {
			t.Fatalf("%s: re-encoded %x, want %s", name, got, canonical)
		}
		out = append(out, v)
	}
	nc("ack_noncanonical_code_on_success", "binary_publish_ack",
		"464c583100010210 0000000e 00 0000000000000005 0000 0005 01", specAckOK,
		"a code section on a success decodes (read whenever 0x0200 is set); encoders drop it")
	nc("ack_noncanonical_detail_without_code", "binary_publish_ack",
		"464c583100010410 0000001d 01 0000000000000005 0002 6e6f 0006 6d6f76696e67 00000000000000fa", specAckError,
		"0x0400 without 0x0200 is parsed (docs/frame.md rule 4); encoders send a detail only with a code")
	nc("ack_noncanonical_offset_on_failure", "binary_publish_ack",
		"464c583100011010 00000015 01 0000000000000005 0002 6e6f 000000000000002a", specAckError,
		"an offset on a failure decodes; encoders send it only on a success")
	nc("ack_noncanonical_message_on_success", "binary_publish_ack",
		"464c583100010010 0000000d 00 0000000000000005 0002 ff6f", specAckOK,
		"a success's message bytes are skipped unvalidated; encoders write length 0")
	nc("ack_noncanonical_unknown_retry_byte", "binary_publish_ack",
		"464c583100010210 00000010 01 0000000000000005 0002 6e6f 0005 09", "464c583100010210 00000010 01 0000000000000005 0002 6e6f 0005 05",
		"an unknown retry byte decodes as fatal")
	nc("ack_unknown_code_999", "binary_publish_ack",
		"464c583100010210 00000010 01 0000000000000005 0002 6e6f 03e7 02", "464c583100010210 00000010 01 0000000000000005 0002 6e6f 03e7 02",
		"an unknown code number survives as code_999")
	nc("ack_code_0", "binary_publish_ack",
		"464c583100010210 00000010 01 0000000000000005 0002 6e6f 0000 05", "464c583100010210 00000010 01 0000000000000005 0002 6e6f 0000 05",
		"number 0 is not in the table: code_0")
	nc("event_noncanonical_skipped_zero", "binary_event_batch",
		"464c583100010824 0000001f 0000000000000064 0000000000000000 00000002 00000001 61 00000002 6263", specSharedOffset,
		"a 0x0800 section holding 0 decodes; encoders omit it")
	return out
}

// invalidVectors covers every rejection rule.
func invalidVectors(t testing.TB) []binVec {
	const (
		pk = "binary_publish_batch"
		ak = "binary_acked_publish_batch"
		ck = "binary_publish_ack"
		ek = "binary_event_batch"
	)
	var out []binVec
	out = append(out, truncations(t, "invalid_truncated_publish_0149", ak, hx(t, specPublishIdemKey), []field{
		{"request_id", 8}, {"ack_mode", 1}, {"producer_id", 8}, {"sequence", 8}, {"key_len", 2}, {"key", 1},
		{"tenant_len", 2}, {"tenant", 2}, {"namespace_len", 2}, {"namespace", 2}, {"stream_len", 2}, {"stream", 1},
		{"count", 4}, {"payload0_len", 4}, {"payload0", 2}, {"payload1_len", 4}})...)
	out = append(out, truncations(t, "invalid_truncated_ack_0690", ck, hx(t, specAckAll), []field{
		{"status", 1}, {"request_id", 8}, {"message_len", 2}, {"message", 2}, {"code", 2}, {"retry_class", 1},
		{"reason_len", 2}, {"reason", 6}, {"retry_after_ms", 8}, {"node_id_len", 2}, {"node_id", 2}, {"addr_len", 2},
		{"addr", 3}, {"generation", 8}})...)
	out = append(out, truncations(t, "invalid_truncated_ack_1090", ck, hx(t, specAckOwnerOffset), []field{
		{"status", 1}, {"request_id", 8}, {"message_len", 2}, {"node_id_len", 2}, {"node_id", 2}, {"addr_len", 2},
		{"addr", 3}, {"generation", 8}, {"offset", 8}})...)
	out = append(out, truncations(t, "invalid_truncated_event_6822", ek, hx(t, specLegacyAll), []field{
		{"subscription_id", 8}, {"base_offset", 8}, {"skipped_before", 8}, {"publisher_len", 1}, {"publisher", 2},
		{"count", 4}, {"timestamp0", 8}, {"len0", 4}, {"payload0", 1}, {"timestamp1", 8}, {"len1", 4}, {"payload1", 2}})...)
	out = append(out, truncations(t, "invalid_truncated_event_6824", ek, hx(t, specSharedAll), []field{
		{"base_offset", 8}, {"skipped_before", 8}, {"publisher_len", 1}, {"publisher", 2},
		{"count", 4}, {"timestamp0", 8}, {"len0", 4}, {"payload0", 1}, {"timestamp1", 8}, {"len1", 4}, {"payload1", 2}})...)

	plain, acked, ack, shared := hx(t, specPublishPlain), hx(t, specPublishAcked), hx(t, specAckError), hx(t, specSharedPlain)
	pl := func(flags felix.Flags, h string) []byte { return frameOf(t, flags, hx(t, h)) }
	out = append(out,
		// Truncation by hostile counts and lengths in short frames.
		invalid("invalid_publish_count_ffffffff", pk, "truncated", pl(0x0001, "0002 7431 0002 6e73 0001 73 ffffffff"), "a count of 2^32-1 with no payload bytes"),
		invalid("invalid_publish_count_over_bound", pk, "truncated", pl(0x0001, "0002 7431 0002 6e73 0001 73 00000003 00000000 00000000"), "count > remaining/4"),
		invalid("invalid_publish_payload_len_4gib", pk, "truncated", pl(0x0001, "0002 7431 0002 6e73 0001 73 00000001 ffffffff 6869"), "a 4 GiB payload length in a short frame"),
		invalid("invalid_publish_tenant_len_ffff", pk, "truncated", pl(0x0001, "ffff 7431"), ""),
		invalid("invalid_publish_key_len_ffff", pk, "truncated", pl(0x0041, "ffff 6b"), ""),
		invalid("invalid_publish_empty_payload", pk, "truncated", pl(0x0001, ""), ""),
		invalid("invalid_acked_prefix_short", ak, "truncated", pl(0x0009, "0000000000000005"), "fewer than 9 bytes"),
		invalid("invalid_event_count_ffffffff", ek, "truncated", pl(0x0004, "ffffffff"), "a count of 2^32-1 with no event bytes"),
		invalid("invalid_event_legacy_count_ffffffff", ek, "truncated", pl(0x0002, "0000000000000009 ffffffff"), ""),
		invalid("invalid_event_timestamps_count_over_bound", ek, "truncated", pl(0x4004, "00000002 0000000000000001 00000000"), "each event needs 12 bytes with 0x4000"),
		invalid("invalid_event_payload_len_4gib", ek, "truncated", pl(0x0004, "00000001 ffffffff 61"), ""),
		invalid("invalid_event_publisher_past_end", ek, "truncated", pl(0x2004, "05 616c 00000000"), "publisher length runs past the end"),
		invalid("invalid_event_empty_payload", ek, "truncated", pl(0x0004, ""), ""),
		invalid("invalid_ack_message_len_ffff", ck, "truncated", pl(0x0010, "01 0000000000000005 ffff"), "a declared length of 65,535 with no bytes"),
		invalid("invalid_ack_short_base", ck, "truncated", pl(0x0010, "00 0000000000000005 00"), "fewer than 11 bytes"),

		// Flag combinations.
		invalid("invalid_publish_0101", pk, "bad_flag_combination", withFlags(t, plain, 0x0101), "0x0100 without 0x0008"),
		invalid("invalid_publish_0141", pk, "bad_flag_combination", withFlags(t, plain, 0x0141), "0x0100 without 0x0008"),
		invalid("invalid_publish_0008_without_0001", ak, "bad_flag_combination", withFlags(t, acked, 0x0008), "0x0008 needs 0x0001"),
		invalid("invalid_publish_with_event_bit", pk, "bad_flag_combination", withFlags(t, plain, 0x0021), "upstream ignores bits of another layout; we refuse them"),
		invalid("invalid_publish_with_ack_bit", pk, "bad_flag_combination", withFlags(t, plain, 0x0011), ""),
		invalid("invalid_ack_with_publish_bit", ck, "bad_flag_combination", withFlags(t, ack, 0x0050), ""),
		invalid("invalid_ack_with_event_bit", ck, "bad_flag_combination", withFlags(t, ack, 0x0030), ""),
		invalid("invalid_event_0804", ek, "bad_flag_combination", withPayload(t, withFlags(t, shared, 0x0804), append(hx(t, "0000000000000001"), shared[12:]...)), "0x0800 without 0x0020"),
		invalid("invalid_event_0802", ek, "bad_flag_combination", frameOf(t, 0x0802, hx(t, "0000000000000009 0000000000000001 00000000")), "0x0800 without 0x0020"),
		invalid("invalid_event_0006", ek, "bad_flag_combination", withFlags(t, shared, 0x0006), "both event bases"),
		invalid("invalid_event_with_keyed_bit", ek, "bad_flag_combination", withFlags(t, shared, 0x0044), ""),
		invalid("invalid_event_no_base", ek, "bad_flag_combination", withFlags(t, shared, 0x0020), ""),

		// Unknown flags.
		invalid("invalid_publish_unknown_flag", pk, "unknown_flags", withFlags(t, plain, 0x8001), ""),
		invalid("invalid_ack_unknown_flag", ck, "unknown_flags", withFlags(t, ack, 0x8010), ""),
		invalid("invalid_event_unknown_flag", ek, "unknown_flags", withFlags(t, shared, 0x8004), ""),

		// Trailing bytes (upstream ignores them; this project rejects them).
		invalid("invalid_publish_trailing", pk, "trailing_bytes", appendByte(t, plain, 0), ""),
		invalid("invalid_acked_publish_trailing", ak, "trailing_bytes", appendByte(t, hx(t, specPublishIdemKey), 0xff, 0xff), ""),
		invalid("invalid_ack_trailing", ck, "trailing_bytes", appendByte(t, hx(t, specAckOK), 0), ""),
		invalid("invalid_ack_all_trailing", ck, "trailing_bytes", appendByte(t, hx(t, specAckAll), 1), ""),
		invalid("invalid_event_trailing", ek, "trailing_bytes", appendByte(t, shared, 0), ""),
		invalid("invalid_event_empty_trailing", ek, "trailing_bytes", appendByte(t, hx(t, specSharedEmpty), 0, 0, 0, 0), ""),
		invalid("invalid_event_all_trailing", ek, "trailing_bytes", appendByte(t, hx(t, specLegacyAll), 0), ""),

		// UTF-8.
		invalid("invalid_publish_tenant_utf8", pk, "invalid_utf8", pl(0x0001, "0002 ff31 0002 6e73 0001 73 00000000"), ""),
		invalid("invalid_publish_namespace_utf8", pk, "invalid_utf8", pl(0x0001, "0002 7431 0002 c328 0001 73 00000000"), ""),
		invalid("invalid_publish_stream_utf8", pk, "invalid_utf8", pl(0x0001, "0002 7431 0002 6e73 0001 80 00000000"), ""),
		invalid("invalid_acked_publish_stream_utf8", ak, "invalid_utf8", pl(0x0049, "0000000000000005 02 0001 6b 0002 7431 0002 6e73 0003 eda080 00000000"), "an encoded surrogate is not UTF-8"),
		invalid("invalid_ack_message_utf8", ck, "invalid_utf8", pl(0x0010, "01 0000000000000005 0002 ff6f"), ""),
		invalid("invalid_ack_reason_utf8", ck, "invalid_utf8", pl(0x0610, "01 0000000000000005 0002 6e6f 0005 01 0002 c328 00000000000000fa"), ""),
		invalid("invalid_ack_node_id_utf8", ck, "invalid_utf8", pl(0x0090, "00 0000000000000005 0000 0002 ff32 0000 0000000000000007"), ""),
		invalid("invalid_ack_addr_utf8", ck, "invalid_utf8", pl(0x0090, "00 0000000000000005 0000 0002 6232 0001 e0 0000000000000007"), ""),

		// Values.
		invalid("invalid_acked_publish_ack_mode_0", ak, "invalid_value", pl(0x0009, "0000000000000005 00 0002 7431 0002 6e73 0001 73 00000000"), "no binary encoding of ack mode none"),
		invalid("invalid_acked_publish_ack_mode_3", ak, "invalid_value", pl(0x0009, "0000000000000005 03 0002 7431 0002 6e73 0001 73 00000000"), ""),
		invalid("invalid_acked_publish_ack_mode_ff", ak, "invalid_value", pl(0x0109, "0000000000000005 ff 0000000000000001 0000000000000002 0000 0000 0000 00000000"), ""),
		invalid("invalid_ack_status_2", ck, "invalid_value", pl(0x0010, "02 0000000000000005 0000"), ""),
		invalid("invalid_ack_status_ff", ck, "invalid_value", pl(0x0010, "ff 0000000000000005 0000"), ""),
	)
	return out
}

func binaryVectors(t testing.TB) []binVec {
	vs := specVectors(t)
	vs = append(vs, comboVectors(t)...)
	vs = append(vs, invalidVectors(t)...)
	seen := map[string]bool{}
	for _, v := range vs {
		if seen[v.name] {
			t.Fatalf("duplicate vector name %s", v.name)
		}
		seen[v.name] = true
	}
	return vs
}

// TestBinaryVectorFiles checks (or, with -update-binary-vectors, writes)
// vectors/binary against the generator.
func TestBinaryVectorFiles(t *testing.T) {
	vs := binaryVectors(t)
	if *updateBinaryVectors {
		if err := os.MkdirAll(binaryVectorDir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(binaryVectorDir, "*.*"))
		for _, p := range old {
			if strings.HasSuffix(p, ".json") || strings.HasSuffix(p, ".hex") {
				_ = os.Remove(p)
			}
		}
	}
	want := map[string]bool{}
	for _, v := range vs {
		js, hexText := v.render(t)
		for name, content := range map[string][]byte{v.name + ".json": js, v.name + ".hex": hexText} {
			p := filepath.Join(binaryVectorDir, name)
			want[name] = true
			if *updateBinaryVectors {
				if err := os.WriteFile(p, content, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(got, content) {
				t.Errorf("%s is missing or stale (run go test ./vectors -run TestBinaryVectorFiles -update-binary-vectors)", p)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(binaryVectorDir, "*"))
	for _, p := range files {
		if !want[filepath.Base(p)] {
			t.Errorf("%s is not produced by the generator", p)
		}
	}
}

// TestOwnBinaryVectors runs vectors/binary: every vector passes (none is
// skipped) and every layout and rejection class is covered.
func TestOwnBinaryVectors(t *testing.T) {
	vs, err := LoadDir(binaryVectorDir)
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, v := range vs {
		res := Run(v)
		if res.Status != Pass {
			t.Errorf("%s: %v %s", v.ID(), res.Status, res.Summary())
		}
		var kind, layout, class string
		_ = json.Unmarshal(v.Members["kind"], &kind)
		_ = json.Unmarshal(v.Members["layout"], &layout)
		_ = json.Unmarshal(v.Members["error"], &class)
		if kind == "invalid" {
			covered[layout+"/"+class] = true
		} else {
			covered[kind] = true
		}
	}
	need := []string{"binary_publish_batch", "binary_acked_publish_batch", "binary_publish_ack", "binary_event_batch"}
	for _, l := range []string{"binary_publish_batch", "binary_acked_publish_batch", "binary_publish_ack", "binary_event_batch"} {
		need = append(need, l+"/truncated", l+"/trailing_bytes", l+"/bad_flag_combination")
	}
	need = append(need, "binary_publish_batch/unknown_flags", "binary_publish_ack/unknown_flags", "binary_event_batch/unknown_flags",
		"binary_publish_batch/invalid_utf8", "binary_publish_ack/invalid_utf8", "binary_acked_publish_batch/invalid_value",
		"binary_publish_ack/invalid_value")
	var missing []string
	for _, n := range need {
		if !covered[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("no vector for %v", missing)
	}
}
