package felix_test

import (
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/flxproto/felix"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

var (
	ackOwnerB2   = felix.AckOwner{NodeID: "b2", Generation: 7}
	ackOwnerB2h1 = felix.AckOwner{NodeID: "b2", Addr: "h:1", Generation: 7}
)

// ackSpecExamples are the worked examples of docs/binary.md §6, hex copied
// from its text.
var ackSpecExamples = []struct {
	name  string
	flags felix.Flags
	hex   string
	want  felix.PublishAck
}{
	{"ok", 0x0010, "464c5831000100100000000b0000000000000000050000",
		felix.PublishAck{RequestID: 5}},
	{"error", 0x0010, "464c5831000100100000000d01000000000000000500026e6f",
		felix.PublishAck{Status: felix.AckError, RequestID: 5, Message: "no"}},
	{"error_code", 0x0210, "464c5831000102100000001001000000000000000500026e6f000501",
		felix.PublishAck{Status: felix.AckError, RequestID: 5, Message: "no", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry}},
	{"error_code_detail", 0x0610, "464c5831000106100000002001000000000000000500026e6f00050100066d6f76696e6700000000000000fa",
		felix.PublishAck{Status: felix.AckError, RequestID: 5, Message: "no", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry,
			HasDetail: true, Reason: felix.ReasonMoving, RetryAfterMs: 250}},
	{"ok_owner_no_addr", 0x0090, "464c5831000100900000001900000000000000000500000002623200000000000000000007",
		felix.PublishAck{RequestID: 5, HasOwner: true, Owner: ackOwnerB2}},
	{"ok_offset", 0x1010, "464c583100011010000000130000000000000000050000000000000000002a",
		felix.PublishAck{RequestID: 5, HasOffset: true, Offset: 42}},
	{"ok_owner_offset", 0x1090, "464c583100011090000000240000000000000000050000000262320003683a310000000000000007000000000000002a",
		felix.PublishAck{RequestID: 5, HasOwner: true, Owner: ackOwnerB2h1, HasOffset: true, Offset: 42}},
	{"error_code_detail_owner", 0x0690, "464c5831000106900000003101000000000000000500026e6f00050100066d6f76696e6700000000000000fa000262320003683a310000000000000007",
		felix.PublishAck{Status: felix.AckError, RequestID: 5, Message: "no", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry,
			HasDetail: true, Reason: felix.ReasonMoving, RetryAfterMs: 250, HasOwner: true, Owner: ackOwnerB2h1}},
}

func TestPublishAckSpecExamples(t *testing.T) {
	for _, ex := range ackSpecExamples {
		t.Run(ex.name, func(t *testing.T) {
			flags, payload := binFrame(t, ex.hex)
			require.Equal(t, ex.flags, flags)
			got, err := felix.DecodePublishAck(flags, payload)
			require.NoError(t, err)
			if d := cmp.Diff(ex.want, got); d != "" {
				t.Fatalf("decode mismatch (-want +got):\n%s", d)
			}
			require.Equal(t, ex.flags, ex.want.Flags())
			require.Equal(t, len(ex.hex)/2, ex.want.FrameLen())
			enc, err := felix.AppendPublishAck(nil, &ex.want)
			require.NoError(t, err)
			require.Equal(t, ex.hex, hex.EncodeToString(enc))
		})
	}
}

func TestPublishAckUpstreamCrossCheck(t *testing.T) {
	// binary_publish_ack_ok / _error of the upstream vectors (docs/binary.md §6).
	a := felix.PublishAck{RequestID: 7}
	enc, err := felix.AppendPublishAck(nil, &a)
	require.NoError(t, err)
	require.Equal(t, "464c5831000100100000000b0000000000000000070000", hex.EncodeToString(enc))
	a = felix.PublishAck{Status: felix.AckError, RequestID: 9, Message: "stream not found"}
	enc, err = felix.AppendPublishAck(nil, &a)
	require.NoError(t, err)
	require.Equal(t, "464c5831000100100000001b010000000000000009001073747265616d206e6f7420666f756e64", hex.EncodeToString(enc))
}

func TestPublishAckEncoderDropsSections(t *testing.T) {
	// Upstream encoder rules: code/detail only on a failure with a code,
	// offset only on a success; an ack without optional sections is the v1 ack.
	v1 := "464c5831000100100000000b0000000000000000050000"
	cases := []felix.PublishAck{
		{RequestID: 5, Code: felix.CodeInternal, Retry: felix.RetryFatal},
		{RequestID: 5, Code: felix.CodeInternal, HasDetail: true, Reason: "x", RetryAfterMs: 1},
		{RequestID: 5, HasDetail: true, Reason: "x"},
		{RequestID: 5, Message: "ignored on success"},
	}
	for i, a := range cases {
		enc, err := felix.AppendPublishAck(nil, &a)
		require.NoError(t, err, "case %d", i)
		require.Equal(t, v1, hex.EncodeToString(enc), "case %d", i)
		require.Len(t, enc, a.FrameLen())
	}
	// A failure keeps no offset; a detail without a code is dropped.
	a := felix.PublishAck{Status: felix.AckError, RequestID: 5, Message: "no", HasOffset: true, Offset: 9, HasDetail: true, Reason: "r"}
	enc, err := felix.AppendPublishAck(nil, &a)
	require.NoError(t, err)
	require.Equal(t, ackSpecExamples[1].hex, hex.EncodeToString(enc))
	require.Len(t, enc, a.FrameLen())
}

func TestPublishAckRestrict(t *testing.T) {
	full := ackSpecExamples[7].want
	require.Equal(t, felix.Flags(0x0690), full.Flags())
	require.Equal(t, felix.Flags(0x0010), full.Restrict(0).Flags())
	require.Equal(t, felix.Flags(0x0210), full.Restrict(felix.FlagBinaryPublishAckCode).Flags())
	require.Equal(t, felix.Flags(0x0090), full.Restrict(felix.FlagBinaryPublishAckOwner|felix.FlagBinaryPublishAckDetail).Flags())
	require.Equal(t, felix.Flags(0x0690), full.Restrict(felix.ClientModifierFlags).Flags())
	ok := ackSpecExamples[6].want
	require.Equal(t, felix.Flags(0x0090), ok.Restrict(felix.FlagBinaryPublishAckOwner).Flags())
	require.Equal(t, felix.Flags(0x1010), ok.Restrict(felix.FlagBinaryPublishAckOffset).Flags())
}

func TestPublishAckUnknownCodeAndRetry(t *testing.T) {
	// code 999 with retry byte 2, then code 0 with unknown retry byte 9.
	flags, payload := binFrame(t, "464c5831000102100000001001000000000000000500026e6f03e702")
	a, err := felix.DecodePublishAck(flags, payload)
	require.NoError(t, err)
	require.Equal(t, felix.ErrorCode("code_999"), a.Code)
	require.Equal(t, felix.RetryAfter, a.Retry)
	enc, err := felix.AppendPublishAck(nil, &a)
	require.NoError(t, err)
	require.Equal(t, "464c5831000102100000001001000000000000000500026e6f03e702", hex.EncodeToString(enc))

	flags, payload = binFrame(t, "464c5831000102100000001001000000000000000500026e6f000009")
	a, err = felix.DecodePublishAck(flags, payload)
	require.NoError(t, err)
	require.Equal(t, felix.ErrorCode("code_0"), a.Code)
	require.Equal(t, felix.RetryFatal, a.Retry)
	enc, err = felix.AppendPublishAck(nil, &a)
	require.NoError(t, err)
	require.Equal(t, "464c5831000102100000001001000000000000000500026e6f000005", hex.EncodeToString(enc))
}

func TestPublishAckNonCanonicalDecodes(t *testing.T) {
	cases := []struct {
		name      string
		flags     felix.Flags
		payload   string
		canonical string
		check     func(t *testing.T, a felix.PublishAck)
	}{
		{"detail_without_code", 0x0410, "010000000000000005" + "00026e6f" + "00066d6f76696e67" + "00000000000000fa",
			ackSpecExamples[1].hex, func(t *testing.T, a felix.PublishAck) {
				require.True(t, a.HasDetail)
				require.Equal(t, felix.ReasonMoving, a.Reason)
				require.Equal(t, uint64(250), a.RetryAfterMs)
				require.Empty(t, a.Code)
			}},
		{"empty_detail", 0x0610, "010000000000000005" + "00026e6f" + "000501" + "0000" + "0000000000000000",
			"464c5831000106100000001a01000000000000000500026e6f00050100000000000000000000", func(t *testing.T, a felix.PublishAck) {
				require.True(t, a.HasDetail) // a present but empty detail survives the round trip
				require.Empty(t, a.Reason)
				require.Zero(t, a.RetryAfterMs)
			}},
		{"code_on_success", 0x0210, "000000000000000005" + "0000" + "000501",
			ackSpecExamples[0].hex, func(t *testing.T, a felix.PublishAck) {
				require.Equal(t, felix.CodeShardUnavailable, a.Code)
				require.Equal(t, felix.RetryRetry, a.Retry)
			}},
		{"offset_on_failure", 0x1010, "010000000000000005" + "00026e6f" + "000000000000002a",
			ackSpecExamples[1].hex, func(t *testing.T, a felix.PublishAck) {
				require.True(t, a.HasOffset)
				require.Equal(t, uint64(42), a.Offset)
			}},
		{"message_on_success_not_validated", 0x0010, "000000000000000005" + "0002ff6f",
			ackSpecExamples[0].hex, func(t *testing.T, a felix.PublishAck) { require.Empty(t, a.Message) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := felix.DecodePublishAck(tc.flags, binHex(t, tc.payload))
			require.NoError(t, err)
			tc.check(t, a)
			enc, err := felix.AppendPublishAck(nil, &a)
			require.NoError(t, err)
			require.Equal(t, tc.canonical, hex.EncodeToString(enc))
		})
	}
}
func TestPublishAckRejections(t *testing.T) {
	full := ackSpecExamples[7].hex[24:]
	cases := []struct {
		name    string
		flags   felix.Flags
		payload string
		class   error
		field   string
	}{
		{"status_2", 0x0010, "020000000000000005" + "0000", felix.ErrInvalidValue, "status"},
		{"status_ff", 0x0010, "ff0000000000000005" + "0000", felix.ErrInvalidValue, "status"},
		{"message_utf8", 0x0010, "010000000000000005" + "0002ff6f", felix.ErrInvalidUTF8, "message"},
		{"message_len_65535", 0x0010, "010000000000000005" + "ffff", felix.ErrTruncated, "message"},
		{"short_base", 0x0010, "00000000000000000500", felix.ErrTruncated, "message"},
		{"reason_utf8", 0x0610, "01000000000000000500026e6f000501" + "0002c328" + "00000000000000fa", felix.ErrInvalidUTF8, "reason"},
		{"node_id_utf8", 0x0090, "000000000000000005" + "0000" + "0002ff32" + "0000" + "0000000000000007", felix.ErrInvalidUTF8, "node_id"},
		{"addr_utf8", 0x0090, "000000000000000005" + "0000" + "00026232" + "0001e0" + "0000000000000007", felix.ErrInvalidUTF8, "addr"},
		{"code_truncated", 0x0210, "01000000000000000500026e6f" + "0005", felix.ErrTruncated, "retry_class"},
		{"detail_truncated", 0x0610, "01000000000000000500026e6f000501" + "00066d6f76696e67000000", felix.ErrTruncated, "retry_after_ms"},
		{"reason_len_huge", 0x0610, "01000000000000000500026e6f000501" + "ffff", felix.ErrTruncated, "reason"},
		{"owner_truncated", 0x0090, "000000000000000005" + "0000" + "00026232" + "0000" + "00000000", felix.ErrTruncated, "generation"},
		{"offset_truncated", 0x1010, "000000000000000005" + "0000" + "000000", felix.ErrTruncated, "offset"},
		{"trailing", 0x0690, full + "00", felix.ErrTrailingBytes, "payload"},
		{"trailing_v1", 0x0010, "000000000000000005" + "0000" + "01", felix.ErrTrailingBytes, "payload"},
		{"unknown_flag", 0x8010, "000000000000000005" + "0000", felix.ErrUnknownFlags, "flags"},
		{"publish_bit_on_ack", 0x0011, "000000000000000005" + "0000", felix.ErrBadFlagCombination, "flags"},
		{"event_bit_on_ack", 0x0030, "000000000000000005" + "0000", felix.ErrBadFlagCombination, "flags"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := felix.DecodePublishAck(tc.flags, binHex(t, tc.payload))
			fe := binWantErr(t, err, tc.class)
			require.Equal(t, tc.field, fe.Field, "%v", err)
			if tc.class != felix.ErrUnknownFlags {
				require.Equal(t, "binary_publish_ack", fe.Layout)
			}
		})
	}
	// A success's message is not validated.
	_, err := felix.DecodePublishAck(0x0010, binHex(t, "000000000000000005"+"0002ff6f"))
	require.NoError(t, err)
}

func TestAppendPublishAckErrors(t *testing.T) {
	long := string(make([]byte, 65536))
	cases := []struct {
		name  string
		a     felix.PublishAck
		class error
	}{
		{"status_2", felix.PublishAck{Status: 2}, felix.ErrInvalidValue},
		{"message_utf8", felix.PublishAck{Status: felix.AckError, Message: "\xff"}, felix.ErrInvalidUTF8},
		{"message_long", felix.PublishAck{Status: felix.AckError, Message: long}, felix.ErrFrameTooLarge},
		{"reason_utf8", felix.PublishAck{Status: felix.AckError, Code: felix.CodeInternal, HasDetail: true, Reason: "\xc3"}, felix.ErrInvalidUTF8},
		{"node_utf8", felix.PublishAck{HasOwner: true, Owner: felix.AckOwner{NodeID: "\xff"}}, felix.ErrInvalidUTF8},
		{"addr_utf8", felix.PublishAck{HasOwner: true, Owner: felix.AckOwner{Addr: "\xff"}}, felix.ErrInvalidUTF8},
		{"addr_long", felix.PublishAck{HasOwner: true, Owner: felix.AckOwner{Addr: long}}, felix.ErrFrameTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := felix.AppendPublishAck([]byte("keep"), &tc.a)
			binWantErr(t, err, tc.class)
			require.Equal(t, "keep", string(out))
		})
	}
}

func TestPublishAckEveryPrefixTruncated(t *testing.T) {
	for _, ex := range ackSpecExamples {
		flags, payload := binFrame(t, ex.hex)
		for k := range len(payload) {
			_, err := felix.DecodePublishAck(flags, payload[:k])
			binWantErr(t, err, felix.ErrTruncated)
		}
	}
}

func TestPublishAckZeroAllocEncode(t *testing.T) {
	a := ackSpecExamples[7].want
	buf := make([]byte, 0, 128)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		buf, err = felix.AppendPublishAck(buf[:0], &a)
		if err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

// genPublishAck draws a canonical ack: every section it carries is one the
// encoder sends.
func genPublishAck(t *rapid.T) felix.PublishAck {
	var a felix.PublishAck
	a.RequestID = rapid.Uint64().Draw(t, "request_id")
	if rapid.Bool().Draw(t, "failed") {
		a.Status = felix.AckError
		a.Message = rapid.StringN(0, 16, -1).Draw(t, "message")
		if rapid.Bool().Draw(t, "code") {
			a.Code = felix.ErrorCodeFromNumber(rapid.Uint16().Draw(t, "code_number"))
			a.Retry = felix.RetryClass(rapid.IntRange(1, 5).Draw(t, "retry"))
			if rapid.Bool().Draw(t, "detail") {
				a.HasDetail = true
				a.Reason = rapid.StringN(0, 12, -1).Draw(t, "reason")
				a.RetryAfterMs = rapid.Uint64().Draw(t, "retry_after_ms")
			}
		}
	} else if rapid.Bool().Draw(t, "offset") {
		a.HasOffset = true
		a.Offset = rapid.Uint64().Draw(t, "offset_value")
	}
	if rapid.Bool().Draw(t, "owner") {
		a.HasOwner = true
		a.Owner = felix.AckOwner{
			NodeID:     rapid.StringN(0, 8, -1).Draw(t, "node_id"),
			Addr:       rapid.SampledFrom([]string{"", "h:1", "10.0.0.1:7000", "[::1]:443"}).Draw(t, "addr"),
			Generation: rapid.Uint64().Draw(t, "generation"),
		}
	}
	return a
}

func TestPublishAckProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genPublishAck(t)
		enc, err := felix.AppendPublishAck(nil, &a)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) != a.FrameLen() {
			t.Fatalf("FrameLen %d, appended %d", a.FrameLen(), len(enc))
		}
		f, err := felix.DecodeFrame(enc, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Flags != a.Flags() {
			t.Fatalf("flags %v want %v", f.Flags, a.Flags())
		}
		got, err := felix.DecodePublishAck(f.Flags, f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(a, got); d != "" {
			t.Fatalf("decode(encode(v)) != v:\n%s", d)
		}
		re, err := felix.AppendPublishAck(nil, &got)
		if err != nil || string(re) != string(enc) {
			t.Fatalf("encode(decode(bytes)) != bytes: %v", err)
		}
		for k := range len(f.Payload) {
			if _, err := felix.DecodePublishAck(f.Flags, f.Payload[:k]); !errors.Is(err, felix.ErrTruncated) {
				t.Fatalf("prefix %d/%d: %v", k, len(f.Payload), err)
			}
		}
		if _, err := felix.DecodePublishAck(f.Flags, append(slices.Clip(f.Payload), 0)); !errors.Is(err, felix.ErrTrailingBytes) {
			t.Fatalf("trailing byte: %v", err)
		}
	})
}

// TestPublishAckZeroRetryIsCodeDefault: a zero Retry is written as the
// code's default class (docs/errors.md), the rule of the JSON path too; an
// explicit class is kept, and a code without a default gets fatal.
func TestPublishAckZeroRetryIsCodeDefault(t *testing.T) {
	for _, tc := range []struct {
		code  felix.ErrorCode
		retry felix.RetryClass
		want  felix.RetryClass
	}{
		{felix.CodeShardUnavailable, 0, felix.RetryRetry},
		{felix.CodeOverloaded, 0, felix.RetryAfter},
		{felix.CodeNotLeader, 0, felix.RetryRedirect},
		{felix.CodeQuorumTimeout, 0, felix.RetryOutcomeUnknown},
		{felix.CodeForbidden, 0, felix.RetryFatal},
		{"code_999", 0, felix.RetryFatal},
		{felix.CodeShardUnavailable, felix.RetryAfter, felix.RetryAfter},
		{felix.CodeShardUnavailable, 9, felix.RetryFatal},
	} {
		a := felix.PublishAck{Status: felix.AckError, RequestID: 1, Message: "m", Code: tc.code, Retry: tc.retry}
		require.Equal(t, tc.want, a.RetryClass(), "%s/%d", tc.code, tc.retry)
		enc, err := felix.AppendPublishAck(nil, &a)
		require.NoError(t, err)
		h, err := felix.ParseHeader(enc)
		require.NoError(t, err)
		got, err := felix.DecodePublishAck(h.Flags, enc[felix.HeaderLen:])
		require.NoError(t, err)
		require.Equal(t, tc.want, got.Retry, "%s/%d", tc.code, tc.retry)
	}
}
