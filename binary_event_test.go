package felix_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/flxproto/felix"
	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

var evPayloads = [][]byte{[]byte("a"), []byte("bc")}

func withEv(f func(*felix.EventBatch)) felix.EventBatch {
	b := felix.EventBatch{Payloads: evPayloads}
	f(&b)
	return b
}

func evAll(b *felix.EventBatch) {
	b.HasBaseOffset, b.BaseOffset, b.SkippedBefore = true, 100, 1
	b.HasPublisher, b.Publisher = true, []byte("al")
	b.HasTimestamps, b.Timestamps = true, []uint64{1700000000000000, 1700000000000001}
}

// eventSpecExamples are the worked examples of docs/binary.md §7–§8, hex
// copied from its text.
var eventSpecExamples = []struct {
	name  string
	flags felix.Flags
	hex   string
	want  felix.EventBatch
}{
	{"legacy_plain", 0x0002, "464c583100010002000000170000000000000009000000020000000161000000026263",
		withEv(func(b *felix.EventBatch) { b.Legacy, b.SubscriptionID = true, 9 })},
	{"legacy_base_offset", 0x0022, "464c5831000100220000001f00000000000000090000000000000064000000020000000161000000026263",
		withEv(func(b *felix.EventBatch) {
			b.Legacy, b.SubscriptionID, b.HasBaseOffset, b.BaseOffset = true, 9, true, 100
		})},
	{"legacy_all", 0x6822, "464c5831000168220000003a00000000000000090000000000000064000000000000000102616c0000000200060a24181e4000000000016100060a24181e4001000000026263",
		withEv(func(b *felix.EventBatch) { b.Legacy, b.SubscriptionID = true, 9; evAll(b) })},
	{"shared_plain", 0x0004, "464c5831000100040000000f000000020000000161000000026263", withEv(func(*felix.EventBatch) {})},
	{"shared_empty", 0x0004, "464c5831000100040000000400000000", felix.EventBatch{}},
	{"shared_base_offset", 0x0024, "464c583100010024000000170000000000000064000000020000000161000000026263",
		withEv(func(b *felix.EventBatch) { b.HasBaseOffset, b.BaseOffset = true, 100 })},
	{"shared_skipped", 0x0824, "464c5831000108240000001f00000000000000640000000000000001000000020000000161000000026263",
		withEv(func(b *felix.EventBatch) { b.HasBaseOffset, b.BaseOffset, b.SkippedBefore = true, 100, 1 })},
	{"shared_publisher", 0x2004, "464c5831000120040000001202616c000000020000000161000000026263",
		withEv(func(b *felix.EventBatch) { b.HasPublisher, b.Publisher = true, []byte("al") })},
	{"shared_timestamps", 0x4004, "464c5831000140040000001f0000000200060a24181e4000000000016100060a24181e4001000000026263",
		withEv(func(b *felix.EventBatch) {
			b.HasTimestamps, b.Timestamps = true, []uint64{1700000000000000, 1700000000000001}
		})},
	{"shared_all", 0x6824, "464c583100016824000000320000000000000064000000000000000102616c0000000200060a24181e4000000000016100060a24181e4001000000026263",
		withEv(evAll)},
}

func TestEventBatchSpecExamples(t *testing.T) {
	for _, ex := range eventSpecExamples {
		t.Run(ex.name, func(t *testing.T) {
			flags, payload := binFrame(t, ex.hex)
			require.Equal(t, ex.flags, flags)
			got, err := felix.DecodeEventBatch(flags, payload)
			require.NoError(t, err)
			if d := cmp.Diff(ex.want, got, binCmp); d != "" {
				t.Fatalf("decode mismatch (-want +got):\n%s", d)
			}
			require.Equal(t, ex.flags, ex.want.Flags())
			require.Equal(t, len(ex.hex)/2, ex.want.FrameLen(felix.EventModifierMask))
			enc, err := felix.AppendEventBatch(nil, &ex.want, felix.EventModifierMask)
			require.NoError(t, err)
			require.Equal(t, ex.hex, hex.EncodeToString(enc))

			v, err := felix.ParseEventBatch(flags, payload)
			require.NoError(t, err)
			require.Equal(t, len(ex.want.Payloads), v.Len())
			require.Equal(t, ex.want.Payloads, slices.Collect(v.Payloads()))
			i := 0
			for e := range v.Events() {
				require.Equal(t, ex.want.Payloads[i], e.Payload)
				if ex.want.HasBaseOffset {
					require.Equal(t, ex.want.BaseOffset+uint64(i), e.Offset)
				}
				if ex.want.HasTimestamps {
					require.Equal(t, ex.want.Timestamps[i], e.TimestampMicros)
				}
				i++
			}
			require.Equal(t, len(ex.want.Payloads), i)
		})
	}
}

func TestEventBatchUpstreamCrossCheck(t *testing.T) {
	// Spec §7: legacy + offsets + publisher "p", no timestamps, payload "hi"
	// has payload length 28.
	b := felix.EventBatch{Legacy: true, SubscriptionID: 1, HasBaseOffset: true, BaseOffset: 3,
		HasPublisher: true, Publisher: []byte("p"), Payloads: [][]byte{[]byte("hi")}}
	enc, err := felix.AppendEventBatch(nil, &b, felix.EventModifierMask)
	require.NoError(t, err)
	require.Len(t, enc, felix.HeaderLen+28)
	require.Equal(t, felix.Flags(0x2022), b.Flags())
}

func TestEventBatchSkippedZeroOmitted(t *testing.T) {
	b := withEv(func(b *felix.EventBatch) { b.HasBaseOffset, b.BaseOffset = true, 100 })
	enc, err := felix.AppendEventBatch(nil, &b, felix.EventModifierMask)
	require.NoError(t, err)
	require.Equal(t, eventSpecExamples[5].hex, hex.EncodeToString(enc))
	// A 0x0800 section holding 0 decodes, and re-encodes without it.
	flags, payload := binFrame(t, "464c5831000108240000001f00000000000000640000000000000000000000020000000161000000026263")
	got, err := felix.DecodeEventBatch(flags, payload)
	require.NoError(t, err)
	require.Zero(t, got.SkippedBefore)
	enc, err = felix.AppendEventBatch(nil, &got, felix.EventModifierMask)
	require.NoError(t, err)
	require.Equal(t, eventSpecExamples[5].hex, hex.EncodeToString(enc))
}

func TestEventBatchFlagsFor(t *testing.T) {
	all := withEv(evAll)
	cases := []struct {
		accepted, want felix.Flags
	}{
		{0, 0x0004},
		{felix.OriginalV1Flags, 0x0004},
		{0x0020, 0x0024},
		{0x0800, 0x0004}, // skip without offsets is never written
		{0x0820, 0x0824},
		{0x2000, 0x2004},
		{0x4000, 0x4004},
		{0x6020, 0x6024},
		{felix.KnownFlags, 0x6824},
	}
	for _, tc := range cases {
		require.Equal(t, tc.want, all.FlagsFor(tc.accepted), "accepted %v", tc.accepted)
		enc, err := felix.AppendEventBatch(nil, &all, tc.accepted)
		require.NoError(t, err)
		require.Len(t, enc, all.FrameLen(tc.accepted))
		f, err := felix.DecodeFrame(enc, 0)
		require.NoError(t, err)
		require.Equal(t, tc.want, f.Flags)
		_, err = felix.ParseEventBatch(f.Flags, f.Payload)
		require.NoError(t, err)
	}
	enc, err := felix.AppendEventBatch(nil, &all, 0x0820)
	require.NoError(t, err)
	require.Equal(t, eventSpecExamples[6].hex, hex.EncodeToString(enc))
}

func TestSharedEventBatch(t *testing.T) {
	b := withEv(evAll)
	s := felix.NewSharedEventBatch(&b)
	subs := []felix.Flags{0, 0x0020, 0x0820, felix.KnownFlags, 0, 0x0800, 0x0020 | 0x0010, felix.ClientModifierFlags, felix.OriginalV1Flags}
	frames := make([][]byte, len(subs))
	for i, f := range subs {
		fr, err := s.Frame(f)
		require.NoError(t, err)
		require.Equal(t, len(fr), cap(fr), "frame capacity not capped")
		want, err := felix.AppendEventBatch(nil, &b, f)
		require.NoError(t, err)
		require.Equal(t, want, fr)
		frames[i] = fr
	}
	// 0x0004, 0x0024, 0x6824 and 0x0824 (0x0820): four distinct encodings.
	require.Equal(t, 4, s.Encodings())
	require.Same(t, &frames[0][0], &frames[4][0], "same set, different bytes")
	require.Same(t, &frames[0][0], &frames[5][0])
	require.Same(t, &frames[0][0], &frames[8][0])
	require.Same(t, &frames[1][0], &frames[6][0])
	require.Same(t, &frames[3][0], &frames[7][0])
	require.Equal(t, eventSpecExamples[9].hex, hex.EncodeToString(frames[3]))
	require.Equal(t, eventSpecExamples[6].hex, hex.EncodeToString(frames[2]))

	// Reset reuses the buffers without allocating once they are large enough.
	allocs := testing.AllocsPerRun(50, func() {
		s.Reset(&b)
		for _, f := range subs {
			if _, err := s.Frame(f); err != nil {
				t.Fatal(err)
			}
		}
	})
	require.Zero(t, allocs)

	// Errors are reported to every subscriber of the set.
	bad := withEv(func(b *felix.EventBatch) { b.HasPublisher, b.Publisher = true, make([]byte, 256) })
	s.Reset(&bad)
	_, err := s.Frame(0)
	require.NoError(t, err)
	_, err = s.Frame(felix.FlagEventBatchPublisher)
	binWantErr(t, err, felix.ErrFrameTooLarge)
	_, err = s.Frame(felix.FlagEventBatchPublisher)
	binWantErr(t, err, felix.ErrFrameTooLarge)

	legacy := withEv(func(b *felix.EventBatch) { b.Legacy = true })
	_, err = felix.NewSharedEventBatch(&legacy).Frame(0)
	binWantErr(t, err, felix.ErrInvalidValue)
}

func TestEventBatchRejections(t *testing.T) {
	shared := eventSpecExamples[3].hex[24:]
	cases := []struct {
		name    string
		flags   felix.Flags
		payload string
		class   error
		field   string
	}{
		{"skipped_without_offsets_shared", 0x0804, "0000000000000001" + shared, felix.ErrBadFlagCombination, "flags"},
		{"skipped_without_offsets_legacy", 0x0802, "0000000000000009" + "0000000000000001" + shared, felix.ErrBadFlagCombination, "flags"},
		{"both_bases", 0x0006, shared, felix.ErrBadFlagCombination, "flags"},
		{"publish_bit_on_event", 0x0005, shared, felix.ErrBadFlagCombination, "flags"},
		{"ack_bit_on_event", 0x0014, shared, felix.ErrBadFlagCombination, "flags"},
		{"keyed_bit_on_event", 0x0044, shared, felix.ErrBadFlagCombination, "flags"},
		{"unknown_bit", 0x8004, shared, felix.ErrUnknownFlags, "flags"},
		{"count_huge", 0x0004, "ffffffff", felix.ErrTruncated, "count"},
		{"count_huge_ts", 0x4004, "00000002" + "0000000000000000" + "00000000", felix.ErrTruncated, "count"},
		{"count_over_bound", 0x0004, "00000003" + "000000016100000000", felix.ErrTruncated, "count"},
		{"payload_len_4gib", 0x0004, "00000001" + "ffffffff", felix.ErrTruncated, "payload"},
		{"payload_short", 0x0004, "00000001" + "0000000261", felix.ErrTruncated, "payload"},
		{"publisher_past_end", 0x2004, "ff616c", felix.ErrTruncated, "publisher"},
		{"publisher_missing", 0x2004, "", felix.ErrTruncated, "publisher"},
		{"offset_short", 0x0024, "00000000000000", felix.ErrTruncated, "base_offset"},
		{"skipped_short", 0x0824, "0000000000000064" + "000000", felix.ErrTruncated, "skipped_before"},
		{"subscription_short", 0x0002, "0000", felix.ErrTruncated, "subscription_id"},
		{"count_short", 0x0004, "000000", felix.ErrTruncated, "count"},
		{"timestamp_short", 0x4004, "00000001" + "00060a24181e4000" + "000000", felix.ErrTruncated, "count"},
		{"timestamped_payload_short", 0x4004, "00000001" + "00060a24181e4000" + "00000005" + "61", felix.ErrTruncated, "payload"},
		{"second_timestamp_short", 0x4004, "00000002" + "00060a24181e4000" + "00000005" + "6161616161" + "00060a24181e40", felix.ErrTruncated, "payload"},
		{"trailing", 0x0004, shared + "00", felix.ErrTrailingBytes, "payload"},
		{"trailing_empty", 0x0004, "00000000" + "0102", felix.ErrTrailingBytes, "payload"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := binHex(t, tc.payload)
			_, err := felix.ParseEventBatch(tc.flags, p)
			fe := binWantErr(t, err, tc.class)
			require.Equal(t, tc.field, fe.Field, "%v", err)
			_, err = felix.DecodeEventBatch(tc.flags, p)
			binWantErr(t, err, tc.class)
		})
	}
	// A batch that exactly fills the count bound is accepted.
	_, err := felix.ParseEventBatch(0x0004, binHex(t, "00000002"+"00000000"+"00000000"))
	require.NoError(t, err)
}

func TestAppendEventBatchErrors(t *testing.T) {
	cases := []struct {
		name  string
		b     felix.EventBatch
		class error
	}{
		{"skipped_without_offset", felix.EventBatch{SkippedBefore: 1}, felix.ErrBadFlagCombination},
		{"publisher_256", felix.EventBatch{HasPublisher: true, Publisher: make([]byte, 256)}, felix.ErrFrameTooLarge},
		{"timestamps_short", felix.EventBatch{HasTimestamps: true, Payloads: evPayloads, Timestamps: []uint64{1}}, felix.ErrInvalidValue},
		{"timestamps_long", felix.EventBatch{HasTimestamps: true, Timestamps: []uint64{1}}, felix.ErrInvalidValue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := felix.AppendEventBatch([]byte("keep"), &tc.b, felix.EventModifierMask)
			binWantErr(t, err, tc.class)
			require.Equal(t, "keep", string(out))
		})
	}
	ok := felix.EventBatch{HasPublisher: true, Publisher: make([]byte, 255)}
	out, err := felix.AppendEventBatch(nil, &ok, felix.EventModifierMask)
	require.NoError(t, err)
	require.Len(t, out, ok.FrameLen(felix.EventModifierMask))
}

func TestEventBatchEveryPrefixTruncated(t *testing.T) {
	for _, ex := range eventSpecExamples {
		flags, payload := binFrame(t, ex.hex)
		for k := range len(payload) {
			_, err := felix.ParseEventBatch(flags, payload[:k])
			binWantErr(t, err, felix.ErrTruncated)
		}
	}
}

func TestEventBatchZeroAlloc(t *testing.T) {
	for _, mods := range []bool{false, true} {
		b := benchEventBatch(64, 100, mods)
		buf := make([]byte, 0, b.FrameLen(felix.EventModifierMask))
		allocs := testing.AllocsPerRun(100, func() {
			var err error
			buf, err = felix.AppendEventBatch(buf[:0], &b, felix.EventModifierMask)
			if err != nil {
				t.Fatal(err)
			}
		})
		require.Zero(t, allocs, "encode allocates (mods %v)", mods)
		f, err := felix.DecodeFrame(buf, 0)
		require.NoError(t, err)
		allocs = testing.AllocsPerRun(100, func() {
			v, err := felix.ParseEventBatch(f.Flags, f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			var n int
			var last uint64
			for e := range v.Events() {
				n += len(e.Payload)
				last = e.Offset + e.TimestampMicros
			}
			for p := range v.Payloads() {
				n += len(p)
			}
			c := v.Cursor()
			var e felix.Event
			for c.Next(&e) {
				n += len(e.Payload)
			}
			if n != 3*64*100 || (mods && last == 0) {
				t.Fatal(n, last)
			}
		})
		require.Zero(t, allocs, "iterator decode allocates (mods %v)", mods)
	}
}

// genEventBatch draws a valid event batch (skip only with offsets).
func genEventBatch(t *rapid.T) felix.EventBatch {
	var b felix.EventBatch
	b.Payloads = rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 40), 0, 8).Draw(t, "payloads")
	if rapid.Bool().Draw(t, "legacy") {
		b.Legacy = true
		b.SubscriptionID = rapid.Uint64().Draw(t, "subscription_id")
	}
	if rapid.Bool().Draw(t, "offsets") {
		b.HasBaseOffset = true
		b.BaseOffset = rapid.Uint64().Draw(t, "base_offset")
		if rapid.Bool().Draw(t, "skip") {
			b.SkippedBefore = rapid.Uint64Min(1).Draw(t, "skipped_before")
		}
	}
	if rapid.Bool().Draw(t, "publisher") {
		b.HasPublisher = true
		b.Publisher = rapid.SliceOfN(rapid.Byte(), 0, 255).Draw(t, "publisher_bytes")
	}
	if rapid.Bool().Draw(t, "timestamps") {
		b.HasTimestamps = true
		b.Timestamps = rapid.SliceOfN(rapid.Uint64(), len(b.Payloads), len(b.Payloads)).Draw(t, "ts")
	}
	return b
}

func TestEventBatchProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genEventBatch(t)
		enc, err := felix.AppendEventBatch(nil, &b, felix.EventModifierMask)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) != b.FrameLen(felix.EventModifierMask) {
			t.Fatalf("FrameLen %d, appended %d", b.FrameLen(felix.EventModifierMask), len(enc))
		}
		f, err := felix.DecodeFrame(enc, 0)
		if err != nil {
			t.Fatal(err)
		}
		if f.Flags != b.Flags() {
			t.Fatalf("flags %v want %v", f.Flags, b.Flags())
		}
		got, err := felix.DecodeEventBatch(f.Flags, f.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(b, got, binCmp); d != "" {
			t.Fatalf("decode(encode(v)) != v:\n%s", d)
		}
		re, err := felix.AppendEventBatch(nil, &got, felix.EventModifierMask)
		if err != nil || string(re) != string(enc) {
			t.Fatalf("encode(decode(bytes)) != bytes: %v", err)
		}
		for k := range len(f.Payload) {
			if _, err := felix.ParseEventBatch(f.Flags, f.Payload[:k]); !errors.Is(err, felix.ErrTruncated) {
				t.Fatalf("prefix %d/%d: %v", k, len(f.Payload), err)
			}
		}
		if _, err := felix.ParseEventBatch(f.Flags, append(slices.Clip(f.Payload), 0)); !errors.Is(err, felix.ErrTrailingBytes) {
			t.Fatalf("trailing byte: %v", err)
		}
		// A subscriber's subset decodes to the batch without the refused sections.
		accepted := felix.Flags(rapid.Uint16().Draw(t, "accepted")) & felix.KnownFlags
		sub, err := felix.AppendEventBatch(nil, &b, accepted)
		if err != nil {
			t.Fatal(err)
		}
		sf, err := felix.DecodeFrame(sub, 0)
		if err != nil || sf.Flags != b.FlagsFor(accepted) {
			t.Fatalf("subset frame: %v flags %v", err, sf.Flags)
		}
		if _, err := felix.ParseEventBatch(sf.Flags, sf.Payload); err != nil {
			t.Fatal(err)
		}
	})
}

// Batches longer than the views' recorded index are walked past it, and a
// loop may stop early on either side of it.
func TestBatchViewsBeyondIndex(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 150} {
		ps := make([][]byte, n)
		ts := make([]uint64, n)
		for i := range ps {
			ps[i] = bytes.Repeat([]byte{byte(i)}, i%7)
			ts[i] = uint64(1000 + i)
		}
		pb := felix.PublishBatch{TenantID: "t", Namespace: "n", Stream: "s", Payloads: ps}
		enc, err := felix.AppendPublishBatch(nil, &pb)
		require.NoError(t, err)
		f, err := felix.DecodeFrame(enc, 0)
		require.NoError(t, err)
		pv, err := felix.ParsePublishBatch(f.Flags, f.Payload)
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(ps, slices.Collect(pv.Payloads()), binCmp), "n=%d", n)

		eb := felix.EventBatch{HasBaseOffset: true, BaseOffset: 7, HasTimestamps: true, Timestamps: ts, Payloads: ps}
		enc, err = felix.AppendEventBatch(nil, &eb, felix.EventModifierMask)
		require.NoError(t, err)
		f, err = felix.DecodeFrame(enc, 0)
		require.NoError(t, err)
		ev, err := felix.ParseEventBatch(f.Flags, f.Payload)
		require.NoError(t, err)
		require.Empty(t, cmp.Diff(ps, slices.Collect(ev.Payloads()), binCmp), "n=%d", n)
		i := 0
		for e := range ev.Events() {
			require.Equal(t, ps[i], e.Payload)
			require.Equal(t, ts[i], e.TimestampMicros)
			require.Equal(t, uint64(7+i), e.Offset)
			i++
		}
		require.Equal(t, n, i)
		got, err := felix.DecodeEventBatch(f.Flags, f.Payload)
		require.NoError(t, err)
		require.Equal(t, ts, got.Timestamps)

		for _, stop := range []int{1, 64, 65, 100} {
			if stop > n {
				continue
			}
			seen := 0
			for range pv.Payloads() {
				seen++
				if seen == stop {
					break
				}
			}
			require.Equal(t, stop, seen)
			seen = 0
			for range ev.Events() {
				seen++
				if seen == stop {
					break
				}
			}
			require.Equal(t, stop, seen)
		}
	}
}
