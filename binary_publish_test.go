package felix_test

import (
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/flxproto/felix"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// binHex decodes a hex literal or fails the test.
func binHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// binFrame splits a whole frame (hex) into its flags and payload.
func binFrame(t testing.TB, s string) (felix.Flags, []byte) {
	t.Helper()
	f, err := felix.DecodeFrame(binHex(t, s), felix.MaxPayloadLen)
	require.NoError(t, err)
	return f.Flags, f.Payload
}

// binWantErr checks that err is a *felix.Error of the given class with a
// layout and a field, and returns it.
func binWantErr(t testing.TB, err error, class error) *felix.Error {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, class, "got %v", err)
	var fe *felix.Error
	require.True(t, errors.As(err, &fe), "not a *felix.Error: %T", err)
	require.NotEmpty(t, fe.Layout, "error without layout: %v", err)
	require.NotEmpty(t, fe.Field, "error without field: %v", err)
	return fe
}

var binCmp = cmpopts.EquateEmpty()

var specBody = felix.PublishBatch{TenantID: "t1", Namespace: "ns", Stream: "s", Payloads: [][]byte{[]byte("hi"), {}}}

func withPub(f func(*felix.PublishBatch)) felix.PublishBatch {
	b := specBody
	f(&b)
	return b
}

// publishSpecExamples are the worked examples of docs/binary.md §1–§5; the
// hex is copied from its text.
var publishSpecExamples = []struct {
	name  string
	flags felix.Flags
	hex   string
	want  felix.PublishBatch
}{
	{"plain", 0x0001, "464c583100010001000000190002743100026e730001730000000200000002686900000000", specBody},
	{"acked", 0x0009, "464c583100010009000000220000000000000005010002743100026e730001730000000200000002686900000000",
		withPub(func(b *felix.PublishBatch) { b.AckMode, b.RequestID = felix.AckPerMessage, 5 })},
	{"keyed", 0x0041, "464c5831000100410000001c00016b0002743100026e730001730000000200000002686900000000",
		withPub(func(b *felix.PublishBatch) { b.HasKey, b.Key = true, []byte("k") })},
	{"idempotent", 0x0109, "464c58310001010900000032000000000000000502010203040506070800000000000000030002743100026e730001730000000200000002686900000000",
		withPub(func(b *felix.PublishBatch) {
			b.AckMode, b.RequestID, b.Idempotent, b.ProducerID, b.Sequence = felix.AckPerBatch, 5, true, 0x0102030405060708, 3
		})},
	{"acked_keyed", 0x0049, "464c5831000100490000002500000000000000050200016b0002743100026e730001730000000200000002686900000000",
		withPub(func(b *felix.PublishBatch) {
			b.AckMode, b.RequestID, b.HasKey, b.Key = felix.AckPerBatch, 5, true, []byte("k")
		})},
	{"idempotent_keyed", 0x0149, "464c583100010149000000350000000000000005020102030405060708000000000000000300016b0002743100026e730001730000000200000002686900000000",
		withPub(func(b *felix.PublishBatch) {
			b.AckMode, b.RequestID, b.Idempotent, b.ProducerID, b.Sequence = felix.AckPerBatch, 5, true, 0x0102030405060708, 3
			b.HasKey, b.Key = true, []byte("k")
		})},
}

func TestPublishBatchSpecExamples(t *testing.T) {
	for _, ex := range publishSpecExamples {
		t.Run(ex.name, func(t *testing.T) {
			frame := binHex(t, ex.hex)
			flags, payload := binFrame(t, ex.hex)
			require.Equal(t, ex.flags, flags)

			got, err := felix.DecodePublishBatch(flags, payload)
			require.NoError(t, err)
			if d := cmp.Diff(ex.want, got, binCmp); d != "" {
				t.Fatalf("decode mismatch (-want +got):\n%s", d)
			}

			require.Equal(t, ex.flags, ex.want.Flags())
			require.Equal(t, len(frame), ex.want.FrameLen())
			enc, err := felix.AppendPublishBatch(nil, &ex.want)
			require.NoError(t, err)
			require.Equal(t, ex.hex, hex.EncodeToString(enc))

			// The view agrees with the owned decode.
			v, err := felix.ParsePublishBatch(flags, payload)
			require.NoError(t, err)
			require.Equal(t, 2, v.Len())
			require.Equal(t, [][]byte{[]byte("hi"), {}}, slices.Collect(v.Payloads()))
			require.Equal(t, ex.want.HasKey, v.HasKey())
			require.Equal(t, ex.want.Idempotent, v.Idempotent())
			require.Equal(t, ex.want.AckMode != felix.AckNone, v.Acked())
		})
	}
}

func TestPublishBatchViewAliasesInput(t *testing.T) {
	flags, payload := binFrame(t, publishSpecExamples[2].hex)
	v, err := felix.ParsePublishBatch(flags, payload)
	require.NoError(t, err)
	for p := range v.Payloads() {
		require.Equal(t, len(p), cap(p), "payload capacity not capped")
		if len(p) > 0 {
			require.Same(t, &payload[len(payload)-6], &p[0], "payload does not alias the input")
		}
	}
	require.Equal(t, len(v.Key), cap(v.Key))
	require.Equal(t, len(v.TenantID), cap(v.TenantID))
	// The owned copy does not alias.
	b := v.Batch()
	payload[len(payload)-6] = 'X'
	require.Equal(t, "hi", string(b.Payloads[0]))
	require.Equal(t, "Xi", string(slices.Collect(v.Payloads())[0]))
}

func TestPublishBatchEmptyKeyIsAKey(t *testing.T) {
	keyed := withPub(func(b *felix.PublishBatch) { b.HasKey, b.Key = true, nil })
	enc, err := felix.AppendPublishBatch(nil, &keyed)
	require.NoError(t, err)
	require.Equal(t, felix.Flags(0x0041), keyed.Flags())
	f, err := felix.DecodeFrame(enc, 0)
	require.NoError(t, err)
	v, err := felix.ParsePublishBatch(f.Flags, f.Payload)
	require.NoError(t, err)
	require.True(t, v.HasKey())
	require.NotNil(t, v.Key)
	require.Empty(t, v.Key)
	plain, err := felix.AppendPublishBatch(nil, &specBody)
	require.NoError(t, err)
	require.NotEqual(t, plain, enc)
}

func TestPublishBatchEmptyBatchAndEmptyNames(t *testing.T) {
	b := felix.PublishBatch{}
	enc, err := felix.AppendPublishBatch(nil, &b)
	require.NoError(t, err)
	require.Equal(t, "464c583100010001000000"+"0a"+"000000000000"+"00000000", hex.EncodeToString(enc))
	f, err := felix.DecodeFrame(enc, 0)
	require.NoError(t, err)
	got, err := felix.DecodePublishBatch(f.Flags, f.Payload)
	require.NoError(t, err)
	require.Empty(t, got.Payloads)
}

func TestPublishBatchRejections(t *testing.T) {
	plain := publishSpecExamples[0].hex[24:]
	acked := publishSpecExamples[1].hex[24:]
	cases := []struct {
		name    string
		flags   felix.Flags
		payload string
		class   error
		field   string
	}{
		{"idempotent_without_acked", 0x0101, plain, felix.ErrBadFlagCombination, "flags"},
		{"idempotent_keyed_without_acked", 0x0141, plain, felix.ErrBadFlagCombination, "flags"},
		{"event_bit_on_publish", 0x0005, plain, felix.ErrBadFlagCombination, "flags"},
		{"ack_bit_on_publish", 0x0011, plain, felix.ErrBadFlagCombination, "flags"},
		{"unknown_bit", 0x8001, plain, felix.ErrUnknownFlags, "flags"},
		{"no_base_bit", 0x0008, acked, felix.ErrBadFlagCombination, "flags"},
		{"ack_mode_0", 0x0009, "000000000000000500" + acked[18:], felix.ErrInvalidValue, "ack_mode"},
		{"ack_mode_3", 0x0009, "000000000000000503" + acked[18:], felix.ErrInvalidValue, "ack_mode"},
		{"acked_prefix_short", 0x0009, "0000000000000005", felix.ErrTruncated, "ack_mode"},
		{"tenant_utf8", 0x0001, "0002ff3100026e730001730000000200000002686900000000", felix.ErrInvalidUTF8, "tenant_id"},
		{"namespace_utf8", 0x0001, "000274310002c3280001730000000200000002686900000000", felix.ErrInvalidUTF8, "namespace"},
		{"stream_utf8", 0x0001, "0002743100026e730001800000000200000002686900000000", felix.ErrInvalidUTF8, "stream"},
		{"count_huge", 0x0001, "0002743100026e730001" + "73" + "ffffffff", felix.ErrTruncated, "count"},
		{"count_over_bound", 0x0001, "0002743100026e730001" + "73" + "00000003" + "0000000268690000000000", felix.ErrTruncated, "count"},
		{"payload_len_4gib", 0x0001, "0002743100026e730001" + "73" + "00000001" + "ffffffff", felix.ErrTruncated, "payload"},
		{"tenant_len_huge", 0x0001, "ffff7431", felix.ErrTruncated, "tenant_id"},
		{"key_len_huge", 0x0041, "ffff6b", felix.ErrTruncated, "key"},
		{"trailing_byte", 0x0001, plain + "00", felix.ErrTrailingBytes, "payload"},
		{"trailing_acked", 0x0009, acked + "ff", felix.ErrTrailingBytes, "payload"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := binHex(t, tc.payload)
			_, err := felix.ParsePublishBatch(tc.flags, p)
			fe := binWantErr(t, err, tc.class)
			require.Equal(t, tc.field, fe.Field, "%v", err)
			_, err = felix.DecodePublishBatch(tc.flags, p)
			binWantErr(t, err, tc.class)
		})
	}
}

func TestPublishBatchErrorOffsets(t *testing.T) {
	_, err := felix.ParsePublishBatch(0x0001, binHex(t, "000274310002c3280001730000000200000002686900000000"))
	fe := binWantErr(t, err, felix.ErrInvalidUTF8)
	require.Equal(t, 6, fe.Offset) // the namespace bytes start after 0002 7431 0002
	require.Equal(t, "binary_publish_batch", fe.Layout)
	_, err = felix.ParsePublishBatch(0x0009, binHex(t, "000000000000000503"))
	fe = binWantErr(t, err, felix.ErrInvalidValue)
	require.Equal(t, 8, fe.Offset)
	require.Equal(t, "binary_acked_publish_batch", fe.Layout)
}

func TestPublishBatchEveryPrefixTruncated(t *testing.T) {
	for _, ex := range publishSpecExamples {
		flags, payload := binFrame(t, ex.hex)
		for k := range len(payload) {
			_, err := felix.ParsePublishBatch(flags, payload[:k])
			binWantErr(t, err, felix.ErrTruncated)
		}
		frame := binHex(t, ex.hex)
		for k := range len(frame) {
			_, err := felix.DecodeFrame(frame[:k], 0)
			require.ErrorIs(t, err, felix.ErrTruncated)
		}
	}
}

func TestPeekAckedPrefix(t *testing.T) {
	for _, ex := range publishSpecExamples {
		flags, payload := binFrame(t, ex.hex)
		p, err := felix.PeekAckedPrefix(flags, payload)
		if ex.want.AckMode == felix.AckNone {
			binWantErr(t, err, felix.ErrBadFlagCombination)
			continue
		}
		require.NoError(t, err)
		want := felix.AckedPrefix{RequestID: 5, AckMode: ex.want.AckMode, Idempotent: ex.want.Idempotent,
			HasProducer: ex.want.Idempotent, ProducerID: ex.want.ProducerID, Sequence: ex.want.Sequence}
		require.Equal(t, want, p)
	}
	// A malformed body does not hide the prefix: the broker answers it.
	p, err := felix.PeekAckedPrefix(0x0009, binHex(t, "000000000000002a02ffff"))
	require.NoError(t, err)
	require.Equal(t, felix.AckedPrefix{RequestID: 42, AckMode: felix.AckPerBatch}, p)
	_, err = felix.ParsePublishBatch(0x0009, binHex(t, "000000000000002a02ffff"))
	binWantErr(t, err, felix.ErrTruncated)
	// Idempotent with a short producer section: prefix readable, producer not.
	p, err = felix.PeekAckedPrefix(0x0109, binHex(t, "000000000000002a020102"))
	require.NoError(t, err)
	require.Equal(t, felix.AckedPrefix{RequestID: 42, AckMode: felix.AckPerBatch, Idempotent: true}, p)
	// The prefix itself unusable.
	_, err = felix.PeekAckedPrefix(0x0009, binHex(t, "000000000000002a"))
	binWantErr(t, err, felix.ErrTruncated)
	_, err = felix.PeekAckedPrefix(0x0009, binHex(t, "000000000000002a00"))
	binWantErr(t, err, felix.ErrInvalidValue)
}

func TestAppendPublishBatchErrors(t *testing.T) {
	long := string(make([]byte, 65536))
	cases := []struct {
		name  string
		b     felix.PublishBatch
		class error
	}{
		{"tenant_too_long", felix.PublishBatch{TenantID: long}, felix.ErrFrameTooLarge},
		{"namespace_too_long", felix.PublishBatch{Namespace: long}, felix.ErrFrameTooLarge},
		{"stream_too_long", felix.PublishBatch{Stream: long}, felix.ErrFrameTooLarge},
		{"key_too_long", felix.PublishBatch{HasKey: true, Key: []byte(long)}, felix.ErrFrameTooLarge},
		{"tenant_not_utf8", felix.PublishBatch{TenantID: "\xff"}, felix.ErrInvalidUTF8},
		{"ack_mode_3", felix.PublishBatch{AckMode: 3}, felix.ErrInvalidValue},
		{"idempotent_unacked", felix.PublishBatch{Idempotent: true}, felix.ErrBadFlagCombination},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := felix.AppendPublishBatch(dst, &tc.b)
			binWantErr(t, err, tc.class)
			require.Equal(t, "keep", string(out))
		})
	}
	// A key of exactly 65,535 bytes is fine.
	ok := felix.PublishBatch{HasKey: true, Key: make([]byte, 65535)}
	out, err := felix.AppendPublishBatch(nil, &ok)
	require.NoError(t, err)
	require.Len(t, out, ok.FrameLen())
}

func TestPublishBatchZeroAlloc(t *testing.T) {
	b := benchPublishBatch(64, 100, true)
	buf := make([]byte, 0, b.FrameLen())
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		buf, err = felix.AppendPublishBatch(buf[:0], &b)
		if err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs, "encode into a reused buffer allocates")
	f, err := felix.DecodeFrame(buf, 0)
	require.NoError(t, err)
	allocs = testing.AllocsPerRun(100, func() {
		v, err := felix.ParsePublishBatch(f.Flags, f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for p := range v.Payloads() {
			n += len(p)
		}
		if n != 64*100 {
			t.Fatal(n)
		}
	})
	require.Zero(t, allocs, "iterator decode allocates")
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := felix.PeekAckedPrefix(f.Flags, f.Payload); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

// genPublishBatch draws a valid publish batch of any of the six forms.
func genPublishBatch(t *rapid.T) felix.PublishBatch {
	var b felix.PublishBatch
	form := rapid.IntRange(0, 5).Draw(t, "form")
	if form >= 1 && form != 2 {
		b.AckMode = felix.AckMode(rapid.IntRange(1, 2).Draw(t, "ack_mode"))
		b.RequestID = rapid.Uint64().Draw(t, "request_id")
	}
	if form >= 4 {
		// Canonical idempotent batches carry per_batch: the encoder always
		// writes 2 (TestIdempotentAckModeIsPerBatch).
		b.AckMode = felix.AckPerBatch
		b.Idempotent = true
		b.ProducerID = rapid.Uint64().Draw(t, "producer_id")
		b.Sequence = rapid.Uint64().Draw(t, "sequence")
	}
	if form == 2 || form == 3 || form == 5 {
		b.HasKey = true
		b.Key = rapid.SliceOfN(rapid.Byte(), 0, 20).Draw(t, "key")
	}
	b.TenantID = rapid.StringN(0, 12, -1).Draw(t, "tenant")
	b.Namespace = rapid.StringN(0, 12, -1).Draw(t, "namespace")
	b.Stream = rapid.StringN(0, 12, -1).Draw(t, "stream")
	b.Payloads = rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 40), 0, 8).Draw(t, "payloads")
	return b
}

func TestPublishBatchProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genPublishBatch(t)
		enc, err := felix.AppendPublishBatch(nil, &b)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) != b.FrameLen() {
			t.Fatalf("FrameLen %d, appended %d", b.FrameLen(), len(enc))
		}
		f, err := felix.DecodeFrame(enc, felix.MaxPayloadLen)
		if err != nil {
			t.Fatal(err)
		}
		if f.Flags != b.Flags() {
			t.Fatalf("flags %v want %v", f.Flags, b.Flags())
		}
		got, err := felix.DecodePublishBatch(f.Flags, f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(b, got, binCmp); d != "" {
			t.Fatalf("decode(encode(v)) != v:\n%s", d)
		}
		re, err := felix.AppendPublishBatch(nil, &got)
		if err != nil || string(re) != string(enc) {
			t.Fatalf("encode(decode(bytes)) != bytes: %v", err)
		}
		for k := range len(f.Payload) {
			if _, err := felix.ParsePublishBatch(f.Flags, f.Payload[:k]); !errors.Is(err, felix.ErrTruncated) {
				t.Fatalf("prefix %d/%d: %v", k, len(f.Payload), err)
			}
		}
		if _, err := felix.ParsePublishBatch(f.Flags, append(slices.Clip(f.Payload), 0)); !errors.Is(err, felix.ErrTrailingBytes) {
			t.Fatalf("trailing byte: %v", err)
		}
	})
}

// TestIdempotentAckModeIsPerBatch: the encoder writes ack mode 2 for every
// idempotent frame (docs/binary.md §4), and the decoder accepts 1 there
// (docs/frame.md rule 3), so such a frame re-encodes with 2.
func TestIdempotentAckModeIsPerBatch(t *testing.T) {
	b := felix.PublishBatch{AckMode: felix.AckPerMessage, RequestID: 5, Idempotent: true, ProducerID: 0x0102030405060708, Sequence: 3,
		TenantID: "t1", Namespace: "ns", Stream: "s", Payloads: [][]byte{[]byte("hi"), {}}}
	frame, err := felix.AppendPublishBatch(nil, &b)
	require.NoError(t, err)
	// The hand-computed example of docs/binary.md §4.
	want := "464c58310001010900000032000000000000000502010203040506070800000000000000030002743100026e730001730000000200000002686900000000"
	require.Equal(t, want, hex.EncodeToString(frame))

	perMessage := append([]byte(nil), frame...)
	perMessage[felix.HeaderLen+8] = byte(felix.AckPerMessage)
	got, err := felix.DecodePublishBatch(b.Flags(), perMessage[felix.HeaderLen:])
	require.NoError(t, err)
	require.Equal(t, felix.AckPerMessage, got.AckMode, "the decoder keeps what it read")
	re, err := felix.AppendPublishBatch(nil, &got)
	require.NoError(t, err)
	require.Equal(t, frame, re)
}
