package felix

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The publish and event batch decoders have two readers: parseFast, a
// straight-line path for well-formed input, and parseCursor, the
// sticky-error reader that reports the first failure. These tests hold the
// fast path to the reference one: on any input, valid or damaged, the fast
// path accepts exactly when the cursor does, and then builds the same view.

var publishWords = []Flags{0x0001, 0x0009, 0x0041, 0x0049, 0x0109, 0x0149}

// eventWords returns every legal event batch flag word.
func eventWords() []Flags {
	var ws []Flags
	for _, base := range []Flags{FlagBinaryEventBatch, FlagBinaryEventBatchShared} {
		for m := range 16 {
			f := base
			if m&1 != 0 {
				f |= FlagEventBatchOffsets
			}
			if m&2 != 0 {
				if m&1 == 0 {
					continue // 0x0800 needs 0x0020
				}
				f |= FlagEventBatchSkipped
			}
			if m&4 != 0 {
				f |= FlagEventBatchPublisher
			}
			if m&8 != 0 {
				f |= FlagEventBatchTimestamps
			}
			ws = append(ws, f)
		}
	}
	return ws
}

// rawPublish builds a publish batch payload for flags by hand (not with
// the encoder, so that the test does not depend on it).
func rawPublish(flags Flags, ackMode byte, key []byte, names [3]string, payloads [][]byte) []byte {
	var b []byte
	if flags.Has(FlagBinaryPublishAcked) {
		b = binary.BigEndian.AppendUint64(b, 0x0102030405060708)
		b = append(b, ackMode)
		if flags.Has(FlagBinaryPublishIdempotent) {
			b = binary.BigEndian.AppendUint64(b, 11)
			b = binary.BigEndian.AppendUint64(b, 12)
		}
	}
	if flags.Has(FlagBinaryPublishKeyed) {
		b = appendBytes16(b, key)
	}
	for _, s := range names {
		b = appendStr16(b, s)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(payloads)))
	for _, p := range payloads {
		b = appendBytes32(b, p)
	}
	return b
}

// rawEvent builds an event batch payload for flags by hand.
func rawEvent(flags Flags, publisher []byte, payloads [][]byte) []byte {
	var b []byte
	if flags.Has(FlagBinaryEventBatch) {
		b = binary.BigEndian.AppendUint64(b, 99)
	}
	if flags.Has(FlagEventBatchOffsets) {
		b = binary.BigEndian.AppendUint64(b, 1000)
	}
	if flags.Has(FlagEventBatchSkipped) {
		b = binary.BigEndian.AppendUint64(b, 5)
	}
	if flags.Has(FlagEventBatchPublisher) {
		b = append(b, byte(len(publisher)))
		b = append(b, publisher...)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(payloads)))
	for i, p := range payloads {
		if flags.Has(FlagEventBatchTimestamps) {
			b = binary.BigEndian.AppendUint64(b, uint64(5000+i))
		}
		b = appendBytes32(b, p)
	}
	return b
}

// damage applies a few random edits to b: truncation, trailing bytes, a
// changed byte (often in a length field near the front).
func damage(t *rapid.T, b []byte) []byte {
	b = slices.Clone(b)
	for range rapid.IntRange(0, 3).Draw(t, "edits") {
		switch rapid.IntRange(0, 3).Draw(t, "edit") {
		case 0:
			if len(b) > 0 {
				b = b[:rapid.IntRange(0, len(b)-1).Draw(t, "cut")]
			}
		case 1:
			b = append(b, rapid.SliceOfN(rapid.Byte(), 1, 6).Draw(t, "tail")...)
		default:
			if len(b) > 0 {
				i := rapid.IntRange(0, min(len(b)-1, 40)).Draw(t, "at")
				if rapid.Bool().Draw(t, "anywhere") {
					i = rapid.IntRange(0, len(b)-1).Draw(t, "at_any")
				}
				b[i] = rapid.SampledFrom([]byte{0, 1, 2, 0x7f, 0x80, 0xc3, 0xff}).Draw(t, "byte")
			}
		}
	}
	return b
}

func drawPayloads(t *rapid.T) [][]byte {
	n := rapid.SampledFrom([]int{0, 1, 2, 5, 63, 64, 65, 70}).Draw(t, "count")
	ps := make([][]byte, n)
	for i := range ps {
		ps[i] = bytes.Repeat([]byte{byte(i)}, rapid.IntRange(0, 9).Draw(t, "size"))
	}
	return ps
}

func TestParseFastMatchesCursor(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ps := drawPayloads(t)
		if rapid.Bool().Draw(t, "publish") {
			flags := rapid.SampledFrom(publishWords).Draw(t, "flags")
			names := [3]string{
				rapid.StringN(0, 6, -1).Draw(t, "tenant"),
				rapid.StringN(0, 6, -1).Draw(t, "namespace"),
				rapid.StringN(0, 6, -1).Draw(t, "stream"),
			}
			key := rapid.SliceOfN(rapid.Byte(), 0, 5).Draw(t, "key")
			raw := rawPublish(flags, byte(rapid.IntRange(0, 3).Draw(t, "ack_mode")), key, names, ps)
			raw = damage(t, raw)
			if rapid.Bool().Draw(t, "other_flags") {
				flags = rapid.SampledFrom(publishWords).Draw(t, "flags2")
			}
			l := LayoutPublishBatch
			if flags.Has(FlagBinaryPublishAcked) {
				l = LayoutAckedPublishBatch
			}
			var fast, ref PublishBatchView
			fast.Flags = flags
			ok := fast.parseFast(flags, raw)
			err := ref.parseCursor(l, flags, raw)
			if ok != (err == nil) {
				t.Fatalf("fast path ok=%v, cursor err=%v, payload %x", ok, err, raw)
			}
			if ok && !reflect.DeepEqual(fast, ref) {
				t.Fatalf("views differ:\nfast %+v\nref  %+v", fast, ref)
			}
			return
		}
		flags := rapid.SampledFrom(eventWords()).Draw(t, "flags")
		pub := rapid.SliceOfN(rapid.Byte(), 0, 5).Draw(t, "publisher")
		raw := damage(t, rawEvent(flags, pub, ps))
		if rapid.Bool().Draw(t, "other_flags") {
			flags = rapid.SampledFrom(eventWords()).Draw(t, "flags2")
		}
		var fast, ref EventBatchView
		fast.Flags = flags
		ok := fast.parseFast(flags, raw)
		err := ref.parseCursor(flags, raw)
		if ok != (err == nil) {
			t.Fatalf("fast path ok=%v, cursor err=%v, payload %x", ok, err, raw)
		}
		if ok && !reflect.DeepEqual(fast, ref) {
			t.Fatalf("views differ:\nfast %+v\nref  %+v", fast, ref)
		}
	})
}

// The iterators walk the recorded index and then the entries past it, with
// one loop per layout: every flag word, batch sizes around the index, and
// loops that stop early on either side of it.
func TestBatchIteratorsEveryLayout(t *testing.T) {
	for _, n := range []int{0, 1, 2, indexLen - 1, indexLen, indexLen + 1, 2*indexLen + 3} {
		ps := make([][]byte, n)
		for i := range ps {
			ps[i] = bytes.Repeat([]byte{byte(i)}, (i*5)%9)
		}
		check := func(name string, seq func(func([]byte) bool)) {
			t.Helper()
			var got [][]byte
			for p := range seq {
				if len(p) != cap(p) {
					t.Fatalf("%s n=%d: payload %d has cap %d > len %d", name, n, len(got), cap(p), len(p))
				}
				got = append(got, p)
			}
			if len(got) != n {
				t.Fatalf("%s n=%d: %d payloads", name, n, len(got))
			}
			for i := range got {
				if !bytes.Equal(got[i], ps[i]) {
					t.Fatalf("%s n=%d: payload %d = %x, want %x", name, n, i, got[i], ps[i])
				}
			}
			for _, stop := range []int{1, indexLen - 1, indexLen, indexLen + 1, n} {
				if stop < 1 || stop > n {
					continue
				}
				seen := 0
				for range seq {
					if seen++; seen == stop {
						break
					}
				}
				if seen != stop {
					t.Fatalf("%s n=%d: stopped at %d, want %d", name, n, seen, stop)
				}
			}
		}
		for _, f := range publishWords {
			v, err := ParsePublishBatch(f, rawPublish(f, 1, []byte("k"), [3]string{"t", "n", "s"}, ps))
			if err != nil {
				t.Fatalf("publish %#04x n=%d: %v", uint16(f), n, err)
			}
			check("publish", v.Payloads())
		}
		for _, f := range eventWords() {
			v, err := ParseEventBatch(f, rawEvent(f, []byte("p"), ps))
			if err != nil {
				t.Fatalf("event %#04x n=%d: %v", uint16(f), n, err)
			}
			check("event payloads", v.Payloads())
			var evs [][]byte
			i := 0
			for e := range v.Events() {
				var off, ts uint64
				if f.Has(FlagEventBatchOffsets) {
					off = 1000 + uint64(i)
				}
				if f.Has(FlagEventBatchTimestamps) {
					ts = 5000 + uint64(i)
				}
				if e.Offset != off || e.TimestampMicros != ts {
					t.Fatalf("event %#04x n=%d: event %d offset %d ts %d, want %d %d", uint16(f), n, i, e.Offset, e.TimestampMicros, off, ts)
				}
				evs = append(evs, e.Payload)
				i++
			}
			check("events", func(yield func([]byte) bool) {
				for _, p := range evs {
					if !yield(p) {
						return
					}
				}
			})
			check("events early stop", func(yield func([]byte) bool) {
				for e := range v.Events() {
					if !yield(e.Payload) {
						return
					}
				}
			})
			checkCursor(t, f, n, &v)
		}
	}
}

// checkCursor walks v (n events, of flag word f) with an EventCursor, in
// step with Events: the same payloads (capacity capped), offsets and
// timestamps, Remaining counting down, and false once past the end,
// leaving the event alone.
func checkCursor(t *testing.T, f Flags, n int, v *EventBatchView) {
	t.Helper()
	c := v.Cursor()
	i := 0
	for want := range v.Events() {
		if c.Remaining() != n-i {
			t.Fatalf("cursor %#04x n=%d: remaining %d before event %d", uint16(f), n, c.Remaining(), i)
		}
		e := Event{Offset: 99, TimestampMicros: 99} // stale values must not survive
		if !c.Next(&e) {
			t.Fatalf("cursor %#04x n=%d: ended at %d", uint16(f), n, i)
		}
		if e.Offset != want.Offset || e.TimestampMicros != want.TimestampMicros || !bytes.Equal(e.Payload, want.Payload) ||
			len(e.Payload) != cap(e.Payload) || (len(e.Payload) > 0 && &e.Payload[0] != &want.Payload[0]) {
			t.Fatalf("cursor %#04x n=%d: event %d = %d %d %x (cap %d), want %d %d %x", uint16(f), n, i,
				e.Offset, e.TimestampMicros, e.Payload, cap(e.Payload), want.Offset, want.TimestampMicros, want.Payload)
		}
		i++
	}
	end := Event{Offset: 7}
	if c.Remaining() != 0 || c.Next(&end) || c.Next(&end) || end.Offset != 7 || end.Payload != nil {
		t.Fatalf("cursor %#04x n=%d: past the end: remaining %d, event %+v", uint16(f), n, c.Remaining(), end)
	}
	var zero EventCursor
	if zero.Remaining() != 0 || zero.Next(&end) {
		t.Fatal("the zero cursor has events")
	}
}

// FuzzParseFastMatchesCursor is TestParseFastMatchesCursor for arbitrary
// bytes under any flag word that passes CheckLayout.
func FuzzParseFastMatchesCursor(f *testing.F) {
	ps := [][]byte{[]byte("hi"), nil, []byte("there")}
	for _, w := range publishWords {
		f.Add(uint16(w), rawPublish(w, 2, []byte("k"), [3]string{"t", "ns", "s"}, ps))
	}
	for _, w := range eventWords() {
		f.Add(uint16(w), rawEvent(w, []byte("pub"), ps))
	}
	f.Fuzz(func(t *testing.T, w uint16, raw []byte) {
		flags := Flags(w)
		if flags.Has(FlagBinaryPublishBatch) {
			l := LayoutPublishBatch
			if flags.Has(FlagBinaryPublishAcked) {
				l = LayoutAckedPublishBatch
			}
			if flags.CheckLayout(l) != nil {
				return
			}
			var fast, ref PublishBatchView
			fast.Flags = flags
			ok := fast.parseFast(flags, raw)
			err := ref.parseCursor(l, flags, raw)
			if ok != (err == nil) || ok && !reflect.DeepEqual(fast, ref) {
				t.Fatalf("fast ok=%v, cursor err=%v", ok, err)
			}
			return
		}
		if flags.CheckLayout(LayoutEventBatch) != nil {
			return
		}
		var fast, ref EventBatchView
		fast.Flags = flags
		ok := fast.parseFast(flags, raw)
		err := ref.parseCursor(flags, raw)
		if ok != (err == nil) || ok && !reflect.DeepEqual(fast, ref) {
			t.Fatalf("fast ok=%v, cursor err=%v", ok, err)
		}
	})
}
