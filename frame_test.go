package felix_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"runtime"
	"testing"
	"testing/iotest"

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
		{"empty json (docs/frame.md §1)", felix.Header{}, "464c58310001000000000000"},
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
	_, err = felix.FinishFrame(buf, -40)
	wantClass(t, err, felix.ErrTruncated)
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

// frames concatenates whole frames built with AppendFrame.
func frames(t testing.TB, parts ...struct {
	f felix.Flags
	p string
}) []byte {
	t.Helper()
	var b []byte
	for _, p := range parts {
		var err error
		if b, err = felix.AppendFrame(b, p.f, []byte(p.p)); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

type fp = struct {
	f felix.Flags
	p string
}

func TestReaderSequenceAndCleanEOF(t *testing.T) {
	stream := frames(t, fp{0, `{"type":"ok"}`}, fp{0x0004, ""}, fp{0x0049, "abc"})
	for name, src := range map[string]func() io.Reader{
		"bytes.Reader":  func() io.Reader { return bytes.NewReader(stream) },
		"one byte":      func() io.Reader { return iotest.OneByteReader(bytes.NewReader(stream)) },
		"data with EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(stream)) },
		"half reads":    func() io.Reader { return iotest.HalfReader(bytes.NewReader(stream)) },
	} {
		t.Run(name, func(t *testing.T) {
			r := felix.NewReader(src())
			want := []fp{{0, `{"type":"ok"}`}, {0x0004, ""}, {0x0049, "abc"}}
			for i, w := range want {
				f, err := r.ReadFrame()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if f.Flags != w.f || string(f.Payload) != w.p || int(f.Length) != len(w.p) {
					t.Fatalf("frame %d = %v %q, want %v %q", i, f.Flags, f.Payload, w.f, w.p)
				}
			}
			for range 2 {
				if _, err := r.ReadFrame(); err != io.EOF {
					t.Fatalf("after last frame: %v, want io.EOF", err)
				}
			}
		})
	}
}

func TestReaderEOFInsideFrame(t *testing.T) {
	full := frames(t, fp{0, "0123456789"})
	tests := []struct {
		name  string
		in    []byte
		field string
	}{
		{"one header byte", full[:1], "header"},
		{"eleven header bytes", full[:11], "header"},
		{"header only", full[:12], "payload"},
		{"half payload", full[:17], "payload"},
		{"one byte short", full[:len(full)-1], "payload"},
		{"second frame cut", append(append([]byte{}, full...), full[:5]...), "header"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := felix.NewReader(bytes.NewReader(tc.in))
			var err error
			for err == nil {
				_, err = r.ReadFrame()
			}
			if err == io.EOF {
				t.Fatal("cut-off frame reported as clean io.EOF")
			}
			wantClass(t, err, felix.ErrTruncated)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%v does not match io.ErrUnexpectedEOF", err)
			}
			var fe *felix.Error
			errors.As(err, &fe)
			if fe.Field != tc.field {
				t.Fatalf("field = %q, want %q", fe.Field, tc.field)
			}
		})
	}
}

// headerOnlyReader serves a header and fails the test if anything beyond it
// is read.
type headerOnlyReader struct {
	t   *testing.T
	hdr []byte
}

func (h *headerOnlyReader) Read(p []byte) (int, error) {
	if len(h.hdr) == 0 {
		h.t.Errorf("payload read before the length was checked")
		return 0, errors.New("payload must not be read")
	}
	n := copy(p, h.hdr)
	h.hdr = h.hdr[n:]
	return n, nil
}

func TestReaderLimitCheckedBeforePayload(t *testing.T) {
	tests := []struct {
		name   string
		max    uint32
		length uint32
	}{
		{"pre-auth limit", felix.PreAuthMaxFrameBytes, felix.PreAuthMaxFrameBytes + 1},
		{"default limit", 0, felix.DefaultMaxFrameBytes + 1},
		{"small limit", 3, 4},
		{"4 GiB", felix.DefaultMaxFrameBytes, math.MaxUint32},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := felix.NewReader(&headerOnlyReader{t: t, hdr: hdr(felix.Magic, 1, 0, tc.length)})
			r.SetMaxPayload(tc.max)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			f, err := r.ReadFrame()
			runtime.ReadMemStats(&after)
			wantClass(t, err, felix.ErrFrameTooLarge)
			if f.Length != tc.length {
				t.Fatalf("header of refused frame not reported: %+v", f.Header)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 4096 {
				t.Fatalf("refusing the frame allocated %d bytes", grew)
			}
		})
	}
}

func TestReaderSetMaxPayload(t *testing.T) {
	r := felix.NewReader(nil)
	if r.MaxPayload() != felix.DefaultMaxFrameBytes {
		t.Fatalf("default limit %d", r.MaxPayload())
	}
	r.SetMaxPayload(felix.PreAuthMaxFrameBytes)
	if r.MaxPayload() != felix.PreAuthMaxFrameBytes {
		t.Fatalf("limit %d", r.MaxPayload())
	}
	// Exactly at the pre-auth limit is accepted.
	payload := bytes.Repeat([]byte{'x'}, felix.PreAuthMaxFrameBytes)
	b, _ := felix.AppendFrame(nil, 0, payload)
	r.Reset(bytes.NewReader(b))
	if f, err := r.ReadFrame(); err != nil || len(f.Payload) != felix.PreAuthMaxFrameBytes {
		t.Fatalf("frame at the limit: %v", err)
	}
	// One byte more is refused.
	b, _ = felix.AppendFrame(nil, 0, append(payload, 'y'))
	r.Reset(bytes.NewReader(b))
	_, err := r.ReadFrame()
	wantClass(t, err, felix.ErrFrameTooLarge)
	// After authentication the limit is raised again; 0 restores the default.
	r.SetMaxPayload(0)
	if r.MaxPayload() != felix.DefaultMaxFrameBytes {
		t.Fatalf("SetMaxPayload(0) left %d", r.MaxPayload())
	}
	r.Reset(bytes.NewReader(b))
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
}

// A hostile 4 GiB length on a short stream costs memory in proportion to the
// bytes that actually arrived, not to the announced length.
func TestReaderHugeLengthGrowsWithData(t *testing.T) {
	for _, sent := range []int{0, 1000, 3 << 20} {
		in := append(hdr(felix.Magic, 1, 0, math.MaxUint32), make([]byte, sent)...)
		r := felix.NewReader(bytes.NewReader(in))
		r.SetMaxPayload(math.MaxUint32)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := r.ReadFrame()
		runtime.ReadMemStats(&after)
		wantClass(t, err, felix.ErrTruncated)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%v does not match io.ErrUnexpectedEOF", err)
		}
		budget := uint64(4*sent + 1<<20)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > budget {
			t.Fatalf("sent %d bytes of a 4 GiB frame: allocated %d (budget %d)", sent, grew, budget)
		}
	}
}

func TestReaderBufferReuseAndZeroAllocs(t *testing.T) {
	stream := frames(t, fp{0x0004, "first-payload"}, fp{0x0004, "second"}, fp{0x0004, "third-payload"})
	r := felix.NewReader(bytes.NewReader(stream))
	f1, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	p1 := &f1.Payload[0]
	f2, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if &f2.Payload[0] != p1 {
		t.Fatal("second frame did not reuse the payload buffer")
	}
	if cap(f2.Payload) != len(f2.Payload) {
		t.Fatalf("payload capacity %d not capped at %d", cap(f2.Payload), len(f2.Payload))
	}
	f3, err := r.ReadFrame()
	if err != nil || &f3.Payload[0] != p1 || string(f3.Payload) != "third-payload" {
		t.Fatalf("third frame %q reused=%v err=%v", f3.Payload, &f3.Payload[0] == p1, err)
	}

	// Steady state: no allocation per frame.
	one := frames(t, fp{0x0004, string(make([]byte, 512))})
	br := bytes.NewReader(one)
	r.Reset(br)
	allocs := testing.AllocsPerRun(200, func() {
		br.Reset(one)
		if _, err := r.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("ReadFrame allocates %v per frame in steady state", allocs)
	}
}

func TestHeaderZeroAllocs(t *testing.T) {
	buf := make([]byte, 0, 64)
	h := felix.Header{Flags: 0x0049, Length: 1234}
	var sink felix.Header
	allocs := testing.AllocsPerRun(200, func() {
		b := felix.AppendHeader(buf[:0], h)
		var err error
		if sink, err = felix.ParseHeader(b); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 || sink != h {
		t.Fatalf("AppendHeader+ParseHeader: %v allocs, header %+v", allocs, sink)
	}
	frame := frames(t, fp{0x0049, "payload"})
	allocs = testing.AllocsPerRun(200, func() {
		if _, err := felix.DecodeFrame(frame, 0); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("DecodeFrame: %v allocs", allocs)
	}
}

// errReader returns data and then a fixed error.
type errReader struct {
	data []byte
	err  error
}

func (e *errReader) Read(p []byte) (int, error) {
	if len(e.data) == 0 {
		return 0, e.err
	}
	n := copy(p, e.data)
	e.data = e.data[n:]
	return n, nil
}

func TestReaderPassesThroughStreamErrors(t *testing.T) {
	boom := errors.New("stream reset")
	full := frames(t, fp{0, "0123456789"})
	for _, cut := range []int{0, 5, 12, 15} {
		r := felix.NewReader(&errReader{data: full[:cut], err: boom})
		_, err := r.ReadFrame()
		if !errors.Is(err, boom) {
			t.Fatalf("cut %d: err = %v, want the stream's error", cut, err)
		}
		if errors.Is(err, io.EOF) {
			t.Fatalf("cut %d: stream error reported as EOF", cut)
		}
	}
}

func TestReaderHeaderErrors(t *testing.T) {
	tests := []struct {
		name  string
		in    []byte
		class error
	}{
		{"bad magic", hdr(0x12345678, 1, 0, 0), felix.ErrBadMagic},
		{"bad version", hdr(felix.Magic, 3, 0, 0), felix.ErrBadVersion},
		{"unknown flags", hdr(felix.Magic, 1, 0x8000, 0), felix.ErrUnknownFlags},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := felix.NewReader(bytes.NewReader(tc.in)).ReadFrame()
			wantClass(t, err, tc.class)
		})
	}
}

// Lenient mode: a frame with an unknown bit is returned whole (so the
// receiver can answer an error) and the next frame is read from the right
// boundary. Magic and version are still checked.
func TestReaderLenient(t *testing.T) {
	stream := frames(t, fp{0x8001, "skip me"}, fp{0, `{"type":"ok"}`})
	strict := felix.NewReader(bytes.NewReader(stream))
	_, err := strict.ReadFrame()
	wantClass(t, err, felix.ErrUnknownFlags)

	r := felix.NewReader(bytes.NewReader(stream))
	r.SetLenientFlags(true)
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	if f.Flags != 0x8001 || string(f.Payload) != "skip me" {
		t.Fatalf("lenient frame = %v %q", f.Flags, f.Payload)
	}
	wantClass(t, f.Flags.CheckKnown(), felix.ErrUnknownFlags)
	f, err = r.ReadFrame()
	if err != nil || f.Flags != 0 || string(f.Payload) != `{"type":"ok"}` {
		t.Fatalf("frame after the skipped one = %+v, %v", f, err)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}

	r.Reset(bytes.NewReader(hdr(felix.Magic, 2, 0x8000, 0)))
	_, err = r.ReadFrame()
	wantClass(t, err, felix.ErrBadVersion)
	r.SetLenientFlags(false)
	r.Reset(bytes.NewReader(stream))
	_, err = r.ReadFrame()
	wantClass(t, err, felix.ErrUnknownFlags)
}

// writeCounter records every Write call.
type writeCounter struct {
	writes [][]byte
	err    error
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, append([]byte{}, p...))
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

func TestWriterOneWritePerFrame(t *testing.T) {
	var wc writeCounter
	w := felix.NewWriter(&wc)
	payloads := []string{`{"type":"ok"}`, "", string(bytes.Repeat([]byte("z"), 70000))}
	for i, p := range payloads {
		if err := w.WriteFrame(felix.Flags(i), []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if len(wc.writes) != len(payloads) {
		t.Fatalf("%d frames took %d writes", len(payloads), len(wc.writes))
	}
	for i, p := range payloads {
		f, err := felix.DecodeFrame(wc.writes[i], 0)
		if err != nil || f.Flags != felix.Flags(i) || string(f.Payload) != p {
			t.Fatalf("write %d is not exactly frame %d: %v", i, i, err)
		}
	}

	// Encoding in place with the Writer's buffer.
	buf := w.Buffer()
	start := len(buf)
	buf = felix.BeginFrame(buf, felix.FlagBinaryPublishAck)
	buf = append(buf, "ack"...)
	buf, err := felix.FinishFrame(buf, start)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteEncoded(buf); err != nil {
		t.Fatal(err)
	}
	w.Keep(buf)
	if len(wc.writes) != 4 {
		t.Fatalf("WriteEncoded took %d writes", len(wc.writes)-3)
	}
	if f, err := felix.DecodeFrame(wc.writes[3], 0); err != nil || string(f.Payload) != "ack" {
		t.Fatalf("encoded frame: %+v %v", f, err)
	}
	if b := w.Buffer(); len(b) != 0 || cap(b) < 70000 {
		t.Fatalf("Buffer() = len %d cap %d; want the kept buffer emptied", len(b), cap(b))
	}

	// Steady state: no allocation per frame.
	w = felix.NewWriter(io.Discard)
	payload := make([]byte, 256)
	allocs := testing.AllocsPerRun(200, func() {
		if err := w.WriteFrame(0x0004, payload); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("WriteFrame allocates %v per frame", allocs)
	}

	// Errors of the underlying writer are returned.
	boom := errors.New("closed")
	w = felix.NewWriter(&writeCounter{err: boom})
	if err := w.WriteFrame(0, nil); !errors.Is(err, boom) {
		t.Fatalf("WriteFrame err = %v", err)
	}
	if err := w.WriteEncoded([]byte{1}); !errors.Is(err, boom) {
		t.Fatalf("WriteEncoded err = %v", err)
	}
}

// Property: one Reader reads any sequence of frames of mixed sizes (around
// and above its growth step) from a stream that delivers short reads.
func TestPropReaderFrameSequence(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sizes := rapid.SliceOfN(rapid.OneOf(rapid.IntRange(0, 300), rapid.IntRange(250<<10, 600<<10)), 1, 6).Draw(t, "sizes")
		var stream []byte
		for i, n := range sizes {
			p := bytes.Repeat([]byte{byte(i + 1)}, n)
			stream, _ = felix.AppendFrame(stream, felix.Flags(i), p)
		}
		r := felix.NewReader(iotest.HalfReader(bytes.NewReader(stream)))
		for i, n := range sizes {
			f, err := r.ReadFrame()
			if err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			if f.Flags != felix.Flags(i) || len(f.Payload) != n || (n > 0 && (f.Payload[0] != byte(i+1) || f.Payload[n-1] != byte(i+1))) {
				t.Fatalf("frame %d: flags %v, %d bytes, want %d", i, f.Flags, len(f.Payload), n)
			}
		}
		if _, err := r.ReadFrame(); err != io.EOF {
			t.Fatalf("end: %v", err)
		}
	})
}
