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
