package felix_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flxproto/felix"
)

// vectorSeedDirs are the directories whose .hex files seed the fuzzers:
// every vector directory of the repository (upstream's set included).
var vectorSeedDirs = []string{"vectors"}

// vectorFrames returns the decoded content of every .hex file below the seed
// directories; a directory that does not exist fails the test.
func vectorFrames(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, dir := range vectorSeedDirs {
		if _, err := os.Stat(dir); err != nil {
			tb.Fatalf("seed vectors: %v", err)
		}
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".hex") {
				return err
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b, err := hex.DecodeString(strings.TrimRight(string(raw), " \t\r\n"))
			if err != nil {
				tb.Errorf("%s: %v", path, err)
				return nil
			}
			out = append(out, b)
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// addSeeds seeds f from every vector frame. Vectors that share their first
// eight header bytes (magic, version, flags) exercise the same frame-layer
// paths, so one frame per distinct prefix is kept (with a cut-off copy and a
// two-frame stream built from it); the fuzzer then spends its time mutating
// rather than replaying hundreds of equivalent JSON frames.
func addSeeds(f *testing.F) {
	frames := vectorFrames(f)
	if len(frames) == 0 {
		f.Fatal("no vector .hex files found to seed the fuzzer")
	}
	seen := map[string]bool{}
	for _, s := range frames {
		key := string(s[:min(len(s), 8)])
		if seen[key] {
			continue
		}
		seen[key] = true
		f.Add(s)
		if len(s) > 1 {
			f.Add(s[:len(s)-1])
		}
		f.Add(append(append([]byte{}, s...), s...))
	}
	f.Add([]byte{})
	f.Add(hdr(felix.Magic, 1, 0x8000, 0))
	f.Add(hdr(felix.Magic, 1, 0, 0xFFFFFFFF))
	f.Add(hdr(felix.Magic, 2, 0, 0))
}

// checkClassed fails unless err is a *felix.Error with a FORMAT.md class.
func checkClassed(t *testing.T, err error) {
	t.Helper()
	var fe *felix.Error
	if !errors.As(err, &fe) || felix.ErrorClass(err) == "" {
		t.Fatalf("error without a class: %#v", err)
	}
}

func FuzzParseHeader(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := felix.ParseHeader(data)
		lh, lerr := felix.ParseHeaderLenient(data)
		if lerr != nil {
			checkClassed(t, lerr)
			if err == nil || felix.ErrorClass(err) != felix.ErrorClass(lerr) {
				t.Fatalf("strict %v, lenient %v", err, lerr)
			}
			return
		}
		if again := felix.AppendHeader(nil, lh); !bytes.Equal(again, data[:felix.HeaderLen]) {
			t.Fatalf("lenient header %+v re-encodes to %x, input %x", lh, again, data[:felix.HeaderLen])
		}
		if err != nil {
			checkClassed(t, err)
			if !errors.Is(err, felix.ErrUnknownFlags) || lh.Flags.Unknown() == 0 {
				t.Fatalf("strict refused a header the lenient parser accepted: %v", err)
			}
			return
		}
		if h != lh || h.Flags.Unknown() != 0 {
			t.Fatalf("strict %+v, lenient %+v", h, lh)
		}
		// A header that parses also checks against its layout without panicking.
		if cerr := h.Flags.CheckLayout(h.Flags.Layout()); cerr != nil {
			checkClassed(t, cerr)
		}
	})
}

func FuzzReader(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 1 << 16
		r := felix.NewReader(bytes.NewReader(data))
		r.SetMaxPayload(limit)
		off := 0
		for {
			fr, err := r.ReadFrame()
			if err == io.EOF {
				if off != len(data) {
					t.Fatalf("io.EOF at offset %d of %d", off, len(data))
				}
				return
			}
			// ParseFrame on the same bytes must agree with the Reader.
			pf, rest, perr := felix.ParseFrame(data[off:], limit)
			if err != nil {
				checkClassed(t, err)
				if felix.ErrorClass(err) != felix.ErrorClass(perr) {
					t.Fatalf("Reader %v, ParseFrame %v", err, perr)
				}
				if errors.Is(err, felix.ErrTruncated) != errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("truncation must match io.ErrUnexpectedEOF: %v", err)
				}
				return
			}
			if perr != nil || pf.Header != fr.Header || !bytes.Equal(pf.Payload, fr.Payload) {
				t.Fatalf("Reader %+v, ParseFrame %+v %v", fr.Header, pf.Header, perr)
			}
			enc, err := felix.AppendFrame(nil, fr.Flags, fr.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, data[off:off+len(enc)]) {
				t.Fatalf("frame at %d re-encodes to %x, input %x", off, enc, data[off:off+len(enc)])
			}
			off += len(enc)
			if len(rest) != len(data)-off {
				t.Fatalf("ParseFrame rest %d bytes, want %d", len(rest), len(data)-off)
			}
		}
	})
}

// FuzzReaderGrowChunk: any byte sequence, delivered in any chunk size,
// reads with a small SetGrowChunk (fresh payloads, lenient flags, the
// pre-auth limit: how a server reads auth frames) as the default Reader
// reads it (or fails with an error of the same class), and the payload
// buffer never grows past twice the bytes received or the chunk: an
// announced length costs nothing until its bytes arrive.
func FuzzReaderGrowChunk(f *testing.F) {
	const chunk = 1 << 10
	auth, _ := felix.AppendMessageFrame(nil, &felix.Auth{TenantID: "t", Token: "x"})
	f.Add(auth, uint8(7))
	f.Add(felix.AppendHeader(nil, felix.Header{Length: 60 << 10}), uint8(1))
	f.Add(append(felix.AppendHeader(nil, felix.Header{Length: 5000}), make([]byte, 300)...), uint8(200))
	f.Add(append(felix.AppendHeader(nil, felix.Header{Length: 5000}), make([]byte, 5000)...), uint8(63))
	f.Add([]byte("FLX1\x01"), uint8(3))
	f.Add([]byte("XLX1\x01\x00\x00\x00\x00\x00\x00\x00"), uint8(12))
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		r := felix.NewReader(&chunkReader{data: bytes.Clone(data), sizes: []byte{size%64 + 1}})
		r.SetMaxPayload(felix.PreAuthMaxFrameBytes)
		r.SetLenientFlags(true)
		r.SetFreshPayloads(true)
		r.SetGrowChunk(chunk)
		fr, err := r.ReadFrame()
		ref := felix.NewReader(bytes.NewReader(data))
		ref.SetMaxPayload(felix.PreAuthMaxFrameBytes)
		ref.SetLenientFlags(true)
		want, werr := ref.ReadFrame()
		if (err == nil) != (werr == nil) {
			t.Fatalf("chunked err %v, default err %v", err, werr)
		}
		if err != nil {
			if felix.ErrorClass(err) != felix.ErrorClass(werr) || errors.Is(err, io.EOF) != errors.Is(werr, io.EOF) {
				t.Fatalf("class %q vs %q (%v / %v)", felix.ErrorClass(err), felix.ErrorClass(werr), err, werr)
			}
			return
		}
		if fr.Header != want.Header || !bytes.Equal(fr.Payload, want.Payload) {
			t.Fatalf("frame differs: %+v vs %+v", fr.Header, want.Header)
		}
		if limit := max(chunk, 2*len(data)); cap(fr.Payload) > limit {
			t.Fatalf("payload buffer %d for %d bytes received", cap(fr.Payload), len(data))
		}
	})
}
