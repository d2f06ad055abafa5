package felix_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"testing"

	"github.com/flxproto/felix"
	"pgregory.net/rapid"
)

// mustHex decodes a hex literal or fails the test.
func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// hdr builds a raw 12-byte header without any validation.
func hdr(magic uint32, version, flags uint16, length uint32) []byte {
	return []byte{
		byte(magic >> 24), byte(magic >> 16), byte(magic >> 8), byte(magic),
		byte(version >> 8), byte(version),
		byte(flags >> 8), byte(flags),
		byte(length >> 24), byte(length >> 16), byte(length >> 8), byte(length),
	}
}

// wantClass fails the test unless err belongs to the error class want.
func wantClass(t testing.TB, err error, want error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", want)
	}
	if !errors.Is(err, want) {
		t.Fatalf("got %v (class %q), want class %v", err, felix.ErrorClass(err), want)
	}
	var fe *felix.Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not a *felix.Error", err)
	}
}

// The publish vector from the upstream set, used as a known-good frame.
const upstreamAckedKeyed = "464c5831000100490000002d00000000000000070200026b3700027431000764656661756c74000464656d6f000000010000000568656c6c6f"

func TestAppendHeaderBytes(t *testing.T) {
	tests := []struct {
		name string
		h    felix.Header
		want string
	}{
		{"empty json (spec frame.md)", felix.Header{}, "464c58310001000000000000"},
		{"publish keyed acked", felix.Header{Flags: 0x0049, Length: 0x2d}, "464c5831000100490000002d"},
		{"all known flags, max length", felix.Header{Flags: felix.KnownFlags, Length: math.MaxUint32}, "464c583100017fffffffffff"},
		{"length byte order", felix.Header{Flags: 0x0102, Length: 0x01020304}, "464c58310001010201020304"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("xy")
			got := felix.AppendHeader(prefix, tc.h)
			if !bytes.Equal(got[:2], []byte("xy")) {
				t.Fatalf("AppendHeader overwrote the prefix: %x", got)
			}
			if g := hex.EncodeToString(got[2:]); g != tc.want {
				t.Fatalf("AppendHeader = %s, want %s", g, tc.want)
			}
		})
	}
}

func TestParseHeaderTable(t *testing.T) {
	tests := []struct {
		name    string
		in      []byte
		want    felix.Header
		class   error
		field   string
		offset  int
		errFlag felix.Flags
	}{
		{name: "valid empty json", in: hdr(felix.Magic, 1, 0, 0), want: felix.Header{}},
		{name: "valid with trailing bytes ignored", in: append(hdr(felix.Magic, 1, 0x0004, 3), 1, 2, 3, 4, 5), want: felix.Header{Flags: 4, Length: 3}},
		{name: "valid max length", in: hdr(felix.Magic, 1, 0x7FFF, math.MaxUint32), want: felix.Header{Flags: 0x7FFF, Length: math.MaxUint32}},
		{name: "empty input", in: nil, class: felix.ErrTruncated, field: "header", offset: 0},
		{name: "11 bytes", in: hdr(felix.Magic, 1, 0, 0)[:11], class: felix.ErrTruncated, field: "header", offset: 11},
		{name: "bad magic", in: hdr(0x464C5832, 1, 0, 0), class: felix.ErrBadMagic, field: "magic", offset: 0},
		{name: "lowercase magic", in: append([]byte("flx1"), hdr(felix.Magic, 1, 0, 0)[4:]...), class: felix.ErrBadMagic, field: "magic", offset: 0},
		{name: "version 0", in: hdr(felix.Magic, 0, 0, 0), class: felix.ErrBadVersion, field: "version", offset: 4},
		{name: "version 2", in: hdr(felix.Magic, 2, 0, 0), class: felix.ErrBadVersion, field: "version", offset: 4},
		{name: "version 0x0100 (little endian 1)", in: hdr(felix.Magic, 0x0100, 0, 0), class: felix.ErrBadVersion, field: "version", offset: 4},
		{name: "unknown flag 0x8000", in: hdr(felix.Magic, 1, 0x8000, 0), class: felix.ErrUnknownFlags, field: "flags", offset: 6, errFlag: 0x8000},
		{name: "unknown flag mixed with known", in: hdr(felix.Magic, 1, 0x8049, 0), class: felix.ErrUnknownFlags, field: "flags", offset: 6, errFlag: 0x8000},
		{name: "magic checked before version", in: hdr(0, 7, 0, 0), class: felix.ErrBadMagic, field: "magic"},
		{name: "magic checked before flags", in: hdr(0, 1, 0x8000, 0), class: felix.ErrBadMagic, field: "magic"},
		{name: "version checked before flags", in: hdr(felix.Magic, 9, 0x8000, 0), class: felix.ErrBadVersion, field: "version", offset: 4},
		{name: "all three wrong", in: hdr(0xFFFFFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFF), class: felix.ErrBadMagic, field: "magic"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := felix.ParseHeader(tc.in)
			if tc.class == nil {
				if err != nil {
					t.Fatalf("ParseHeader: %v", err)
				}
				if h != tc.want {
					t.Fatalf("ParseHeader = %+v, want %+v", h, tc.want)
				}
				return
			}
			wantClass(t, err, tc.class)
			var fe *felix.Error
			errors.As(err, &fe)
			if fe.Field != tc.field || fe.Offset != tc.offset || fe.Layout != "frame" {
				t.Fatalf("error location = layout %q field %q offset %d, want frame %q %d", fe.Layout, fe.Field, fe.Offset, tc.field, tc.offset)
			}
			if fe.Flags != tc.errFlag {
				t.Fatalf("error flags = %v, want %v", fe.Flags, tc.errFlag)
			}
		})
	}
}

// Every single flag bit: bits 0..14 are known and parse, 0x8000 is refused
// by the strict parser and accepted by the lenient one.
func TestParseHeaderEverySingleBit(t *testing.T) {
	for i := range 16 {
		bit := felix.Flags(1) << i
		t.Run(bit.String(), func(t *testing.T) {
			in := hdr(felix.Magic, 1, uint16(bit), 5)
			h, err := felix.ParseHeader(in)
			if bit == 0x8000 {
				wantClass(t, err, felix.ErrUnknownFlags)
				if h.Flags != bit {
					t.Fatalf("strict parse of unknown flags returned header %+v", h)
				}
			} else if err != nil || h != (felix.Header{Flags: bit, Length: 5}) {
				t.Fatalf("ParseHeader = %+v, %v", h, err)
			}
			lh, err := felix.ParseHeaderLenient(in)
			if err != nil || lh != (felix.Header{Flags: bit, Length: 5}) {
				t.Fatalf("ParseHeaderLenient = %+v, %v", lh, err)
			}
		})
	}
}

func TestParseHeaderLenientStillChecksMagicAndVersion(t *testing.T) {
	_, err := felix.ParseHeaderLenient(hdr(0x464C5830, 1, 0x8000, 0))
	wantClass(t, err, felix.ErrBadMagic)
	_, err = felix.ParseHeaderLenient(hdr(felix.Magic, 2, 0x8000, 0))
	wantClass(t, err, felix.ErrBadVersion)
	_, err = felix.ParseHeaderLenient(hdr(felix.Magic, 1, 0x8000, 0)[:7])
	wantClass(t, err, felix.ErrTruncated)
	h, err := felix.ParseHeaderLenient(hdr(felix.Magic, 1, 0xFFFF, 1))
	if err != nil || h.Flags != 0xFFFF || h.Length != 1 {
		t.Fatalf("lenient = %+v, %v", h, err)
	}
}

// Every proper prefix of a valid frame is refused as truncated, by
// ParseFrame, DecodeFrame and the Reader (which reports io.EOF only for the
// empty prefix).
func TestEveryTruncatedPrefix(t *testing.T) {
	frames := map[string][]byte{
		"upstream acked keyed publish": mustHex(t, upstreamAckedKeyed),
		"empty payload":                hdr(felix.Magic, 1, 0, 0),
		"json":                         mustHex(t, "464c5831000100000000000d7b2274797065223a226f6b227d"),
	}
	for name, frame := range frames {
		t.Run(name, func(t *testing.T) {
			if _, err := felix.DecodeFrame(frame, 0); err != nil {
				t.Fatalf("full frame does not decode: %v", err)
			}
			for n := range len(frame) {
				prefix := frame[:n]
				_, _, err := felix.ParseFrame(prefix, 0)
				wantClass(t, err, felix.ErrTruncated)
				_, err = felix.DecodeFrame(prefix, 0)
				wantClass(t, err, felix.ErrTruncated)

				r := felix.NewReader(bytes.NewReader(prefix))
				_, err = r.ReadFrame()
				if n == 0 {
					if err != io.EOF {
						t.Fatalf("prefix 0: ReadFrame err = %v, want io.EOF", err)
					}
					continue
				}
				wantClass(t, err, felix.ErrTruncated)
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("prefix %d: %v does not match io.ErrUnexpectedEOF", n, err)
				}
			}
		})
	}
}

func TestParseFrame(t *testing.T) {
	frame := mustHex(t, upstreamAckedKeyed)
	next := hdr(felix.Magic, 1, 0, 0)
	in := append(append([]byte{}, frame...), next...)
	f, rest, err := felix.ParseFrame(in, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Flags != 0x0049 || int(f.Length) != len(frame)-12 || !bytes.Equal(f.Payload, frame[12:]) {
		t.Fatalf("ParseFrame = %+v", f)
	}
	if cap(f.Payload) != len(f.Payload) {
		t.Fatalf("payload capacity %d not capped at %d", cap(f.Payload), len(f.Payload))
	}
	if !bytes.Equal(rest, next) {
		t.Fatalf("rest = %x, want %x", rest, next)
	}
	// The trailing frame is a trailing-bytes error for DecodeFrame.
	_, err = felix.DecodeFrame(in, 0)
	wantClass(t, err, felix.ErrTrailingBytes)
	var fe *felix.Error
	errors.As(err, &fe)
	if fe.Offset != len(frame) {
		t.Fatalf("trailing offset = %d, want %d", fe.Offset, len(frame))
	}
}

func TestParseFrameLimit(t *testing.T) {
	tests := []struct {
		name   string
		length uint32
		max    uint32
		class  error
	}{
		{"at explicit limit", 10, 10, nil},
		{"above explicit limit", 11, 10, felix.ErrFrameTooLarge},
		{"pre-auth limit exact", felix.PreAuthMaxFrameBytes, felix.PreAuthMaxFrameBytes, felix.ErrTruncated},
		{"above pre-auth limit", felix.PreAuthMaxFrameBytes + 1, felix.PreAuthMaxFrameBytes, felix.ErrFrameTooLarge},
		{"default limit exact", felix.DefaultMaxFrameBytes, 0, felix.ErrTruncated},
		{"above default limit", felix.DefaultMaxFrameBytes + 1, 0, felix.ErrFrameTooLarge},
		{"4 GiB announced", math.MaxUint32, math.MaxUint32, felix.ErrTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append(hdr(felix.Magic, 1, 0, tc.length), make([]byte, 10)...)
			_, _, err := felix.ParseFrame(in, tc.max)
			if tc.class == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantClass(t, err, tc.class)
		})
	}
	// Too large is decided on the header alone, before truncation.
	_, err := felix.DecodeFrame(hdr(felix.Magic, 1, 0, 100), 50)
	wantClass(t, err, felix.ErrFrameTooLarge)
}

func TestBeginFinishFrame(t *testing.T) {
	buf := []byte("prev")
	start := len(buf)
	buf = felix.BeginFrame(buf, felix.FlagBinaryPublishAck)
	buf = append(buf, "payload"...)
	buf, err := felix.FinishFrame(buf, start)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:4]) != "prev" {
		t.Fatalf("prefix overwritten: %q", buf[:4])
	}
	f, err := felix.DecodeFrame(buf[start:], 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Flags != felix.FlagBinaryPublishAck || string(f.Payload) != "payload" {
		t.Fatalf("decoded %+v", f)
	}
	want, err := felix.AppendFrame(nil, felix.FlagBinaryPublishAck, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[start:], want) {
		t.Fatalf("BeginFrame/FinishFrame = %x, AppendFrame = %x", buf[start:], want)
	}

	// Two frames back to back in one buffer.
	s2 := len(buf)
	buf = felix.BeginFrame(buf, 0)
	buf, err = felix.FinishFrame(buf, s2)
	if err != nil {
		t.Fatal(err)
	}
	f1, rest, err := felix.ParseFrame(buf[start:], 0)
	if err != nil || string(f1.Payload) != "payload" {
		t.Fatalf("first = %+v, %v", f1, err)
	}
	if f2, err := felix.DecodeFrame(rest, 0); err != nil || f2.Length != 0 {
		t.Fatalf("second = %+v, %v", f2, err)
	}

	// FinishFrame without room for a header.
	_, err = felix.FinishFrame([]byte("short"), 0)
	wantClass(t, err, felix.ErrTruncated)
	_, err = felix.FinishFrame(buf, len(buf)+1)
	wantClass(t, err, felix.ErrTruncated)
}

// A payload too large for the 32-bit length field is refused by the
// encoders. Only the slice header is large: the backing array is mapped but
// never touched, so the test costs no resident memory.
func TestEncodeTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("maps 4 GiB of address space")
	}
	huge := make([]byte, felix.MaxPayloadLen+1)
	_, err := felix.AppendFrame([]byte("x"), 0, huge)
	wantClass(t, err, felix.ErrFrameTooLarge)

	buf := make([]byte, felix.HeaderLen+felix.MaxPayloadLen+1)
	buf = append(buf[:0], felix.BeginFrame(nil, 0)...)
	buf = buf[:felix.HeaderLen+felix.MaxPayloadLen+1]
	out, err := felix.FinishFrame(buf, 0)
	wantClass(t, err, felix.ErrFrameTooLarge)
	if len(out) != 0 {
		t.Fatalf("FinishFrame kept %d bytes of a refused frame", len(out))
	}
	var w bytes.Buffer
	err = felix.NewWriter(&w).WriteFrame(0, huge)
	wantClass(t, err, felix.ErrFrameTooLarge)
	if w.Len() != 0 {
		t.Fatalf("writer wrote %d bytes of a refused frame", w.Len())
	}
}

// Property: append then parse is the identity for any flags and length, and
// the strict parser refuses exactly the words with unknown bits.
func TestPropAppendParseIdentity(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := felix.Header{
			Flags:  felix.Flags(rapid.Uint16().Draw(t, "flags")),
			Length: rapid.Uint32().Draw(t, "length"),
		}
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "prefix")
		b := felix.AppendHeader(append([]byte{}, prefix...), h)
		if len(b) != len(prefix)+felix.HeaderLen {
			t.Fatalf("appended %d bytes", len(b)-len(prefix))
		}
		lh, err := felix.ParseHeaderLenient(b[len(prefix):])
		if err != nil || lh != h {
			t.Fatalf("lenient parse = %+v, %v; want %+v", lh, err, h)
		}
		sh, err := felix.ParseHeader(b[len(prefix):])
		if h.Flags&^felix.KnownFlags != 0 {
			if !errors.Is(err, felix.ErrUnknownFlags) {
				t.Fatalf("strict parse of %v: %v", h.Flags, err)
			}
			return
		}
		if err != nil || sh != h {
			t.Fatalf("strict parse = %+v, %v; want %+v", sh, err, h)
		}
		if again := felix.AppendHeader(nil, sh); !bytes.Equal(again, b[len(prefix):]) {
			t.Fatalf("re-encoding %x != %x", again, b[len(prefix):])
		}
	})
}

// Property: a whole frame round-trips through AppendFrame, ParseFrame and
// the Reader.
func TestPropFrameRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		flags := felix.Flags(rapid.Uint16Range(0, uint16(felix.KnownFlags)).Draw(t, "flags"))
		payload := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "payload")
		b, err := felix.AppendFrame(nil, flags, payload)
		if err != nil {
			t.Fatal(err)
		}
		f, err := felix.DecodeFrame(b, 0)
		if err != nil || f.Flags != flags || !bytes.Equal(f.Payload, payload) {
			t.Fatalf("DecodeFrame = %+v, %v", f, err)
		}
		rf, err := felix.NewReader(bytes.NewReader(b)).ReadFrame()
		if err != nil || rf.Flags != flags || !bytes.Equal(rf.Payload, payload) {
			t.Fatalf("ReadFrame = %+v, %v", rf, err)
		}
	})
}
