package felix_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flxproto/felix"
	"github.com/google/go-cmp/cmp"
)

// fuzzSeeds adds every vector frame of vectors/binary and of the upstream
// set (vectors/upstream), plus extra hex frames, as (flags, payload) seeds.
func fuzzSeeds(f *testing.F, extra ...string) {
	var paths []string
	for _, dir := range []string{filepath.Join("vectors", "binary"), filepath.Join("vectors", "upstream")} {
		m, _ := filepath.Glob(filepath.Join(dir, "*.hex"))
		paths = append(paths, m...)
	}
	frames := extra
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil {
			frames = append(frames, strings.TrimSpace(string(b)))
		}
	}
	n := 0
	for _, h := range frames {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) < felix.HeaderLen {
			continue
		}
		f.Add(uint16(b[6])<<8|uint16(b[7]), b[felix.HeaderLen:])
		n++
	}
	if n == 0 {
		f.Fatal("no fuzz seeds")
	}
}

func frameBytes(t *testing.T, flags felix.Flags, payload []byte) []byte {
	t.Helper()
	b, err := felix.AppendFrame(nil, flags, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzPublishBatch(f *testing.F) {
	var extra []string
	for _, ex := range publishSpecExamples {
		extra = append(extra, ex.hex)
	}
	fuzzSeeds(f, extra...)
	f.Fuzz(func(t *testing.T, flags uint16, payload []byte) {
		fl := felix.Flags(flags)
		v, err := felix.ParsePublishBatch(fl, payload)
		owned, oerr := felix.DecodePublishBatch(fl, payload)
		if (err == nil) != (oerr == nil) {
			t.Fatalf("Parse error %v, Decode error %v", err, oerr)
		}
		if fl.Has(felix.FlagBinaryPublishAcked) {
			p, perr := felix.PeekAckedPrefix(fl, payload)
			if err == nil && (perr != nil || p.RequestID != v.RequestID || p.AckMode != v.AckMode ||
				p.ProducerID != v.ProducerID || p.Sequence != v.Sequence) {
				t.Fatalf("prefix %+v (%v) disagrees with the batch", p, perr)
			}
		}
		if err != nil {
			if felix.ErrorClass(err) == "" {
				t.Fatalf("error without a class: %v", err)
			}
			return
		}
		n := 0
		for p := range v.Payloads() {
			if len(p) != cap(p) || !bytes.Equal(p, owned.Payloads[n]) {
				t.Fatalf("payload %d differs or is not capped", n)
			}
			n++
		}
		if n != len(owned.Payloads) {
			t.Fatalf("iterated %d payloads, decoded %d", n, len(owned.Payloads))
		}
		// Every publish batch that decodes is canonical, except that an
		// idempotent frame's ack mode byte is always re-encoded as 2
		// (per_batch), as upstream encoders write it (docs/binary.md §4).
		re, err := felix.AppendPublishBatch(nil, &owned)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		want := frameBytes(t, fl, payload)
		if owned.Idempotent {
			want[felix.HeaderLen+8] = byte(felix.AckPerBatch)
		}
		if !bytes.Equal(re, want) {
			t.Fatalf("re-encoded\n %x\nwant\n %x", re, want)
		}
	})
}

func FuzzPublishAck(f *testing.F) {
	var extra []string
	for _, ex := range ackSpecExamples {
		extra = append(extra, ex.hex)
	}
	fuzzSeeds(f, extra...)
	f.Fuzz(func(t *testing.T, flags uint16, payload []byte) {
		fl := felix.Flags(flags)
		a, err := felix.DecodePublishAck(fl, payload)
		if err != nil {
			if felix.ErrorClass(err) == "" {
				t.Fatalf("error without a class: %v", err)
			}
			return
		}
		re, err := felix.AppendPublishAck(nil, &a)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		rf, err := felix.DecodeFrame(re, 0)
		if err != nil {
			t.Fatal(err)
		}
		a2, err := felix.DecodePublishAck(rf.Flags, rf.Payload)
		if err != nil {
			t.Fatalf("re-encoded ack does not decode: %v", err)
		}
		if d := cmp.Diff(a.Restrict(a.Flags()), a2); d != "" {
			t.Fatalf("decode(encode(decode(x))) != decode(x):\n%s", d)
		}
		// A canonical frame (the flag word the encoder would choose, no
		// message on a success) re-encodes to itself, up to an unknown
		// retry byte, which reads and re-encodes as fatal.
		msgLen := int(payload[9])<<8 | int(payload[10])
		if a.Flags() != fl || (a.Status == felix.AckOK && msgLen != 0) {
			return
		}
		want := frameBytes(t, fl, payload)
		if fl.Has(felix.FlagBinaryPublishAckCode) {
			i := felix.HeaderLen + 11 + msgLen + 2
			want[i] = byte(felix.RetryClassFromByte(want[i]))
		}
		if !bytes.Equal(re, want) {
			t.Fatalf("re-encoded\n %x\nwant\n %x", re, want)
		}
	})
}

func FuzzEventBatch(f *testing.F) {
	var extra []string
	for _, ex := range eventSpecExamples {
		extra = append(extra, ex.hex)
	}
	fuzzSeeds(f, extra...)
	f.Fuzz(func(t *testing.T, flags uint16, payload []byte) {
		fl := felix.Flags(flags)
		v, err := felix.ParseEventBatch(fl, payload)
		owned, oerr := felix.DecodeEventBatch(fl, payload)
		if (err == nil) != (oerr == nil) {
			t.Fatalf("Parse error %v, Decode error %v", err, oerr)
		}
		if err != nil {
			if felix.ErrorClass(err) == "" {
				t.Fatalf("error without a class: %v", err)
			}
			return
		}
		i := 0
		for e := range v.Events() {
			if len(e.Payload) != cap(e.Payload) || !bytes.Equal(e.Payload, owned.Payloads[i]) {
				t.Fatalf("event %d differs or is not capped", i)
			}
			if owned.HasTimestamps && e.TimestampMicros != owned.Timestamps[i] {
				t.Fatalf("timestamp %d differs", i)
			}
			i++
		}
		if i != len(owned.Payloads) {
			t.Fatalf("iterated %d events, decoded %d", i, len(owned.Payloads))
		}
		c := v.Cursor()
		for i := range owned.Payloads {
			var e felix.Event
			if !c.Next(&e) || len(e.Payload) != cap(e.Payload) || !bytes.Equal(e.Payload, owned.Payloads[i]) ||
				(owned.HasTimestamps && e.TimestampMicros != owned.Timestamps[i]) ||
				(owned.HasBaseOffset && e.Offset != owned.BaseOffset+uint64(i)) {
				t.Fatalf("cursor event %d differs", i)
			}
		}
		if c.Next(new(felix.Event)) {
			t.Fatal("cursor has more events than the batch")
		}
		re, err := felix.AppendEventBatch(nil, &owned, felix.EventModifierMask)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		want := frameBytes(t, fl, payload)
		if fl.Has(felix.FlagEventBatchSkipped) && owned.SkippedBefore == 0 {
			// Not canonical: encoders omit a zero skipped_before (and its bit).
			at := felix.HeaderLen + 8
			if owned.Legacy {
				at += 8
			}
			want = frameBytes(t, fl&^felix.FlagEventBatchSkipped, append(append([]byte{}, want[felix.HeaderLen:at]...), want[at+8:]...))
		}
		if !bytes.Equal(re, want) {
			t.Fatalf("re-encoded\n %x\nwant\n %x", re, want)
		}
		// The shared encoding for every subscriber set decodes.
		if !owned.Legacy {
			s := felix.NewSharedEventBatch(&owned)
			for _, acc := range []felix.Flags{0, felix.FlagEventBatchOffsets, felix.EventModifierMask} {
				fr, err := s.Frame(acc)
				if err != nil {
					t.Fatal(err)
				}
				ff, err := felix.DecodeFrame(fr, felix.MaxPayloadLen)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := felix.ParseEventBatch(ff.Flags, ff.Payload); err != nil {
					t.Fatalf("shared frame for %v: %v", acc, err)
				}
			}
		}
	})
}
