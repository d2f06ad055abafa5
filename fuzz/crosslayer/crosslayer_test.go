package crosslayer

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flxproto/felix"
)

const repoRoot = "../.."

// vectorFile is the part of a vector JSON file these tests read.
type vectorFile struct {
	Kind     string `json:"kind"`
	Error    string `json:"error"`
	FrameHex string `json:"frame_hex"`
	MaxBytes uint32 `json:"max_frame_bytes"`
}

// allVectors reads every vector JSON file below the repository's vector
// directories, keyed by path.
func allVectors(t *testing.T) map[string]vectorFile {
	t.Helper()
	out := map[string]vectorFile{}
	for _, dir := range VectorDirs(repoRoot) {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") || strings.Contains(path, string(filepath.Separator)+"gen"+string(filepath.Separator)) {
				return err
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var v vectorFile
			if json.Unmarshal(raw, &v) != nil || v.FrameHex == "" {
				return nil // not a vector object
			}
			out[path] = v
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) < 100 {
		t.Fatalf("found %d vectors below %v", len(out), VectorDirs(repoRoot))
	}
	return out
}

// Every vector of the repository satisfies RoundTrip: valid ones decode
// through both layers to the same canonical frame, invalid ones are refused
// with their class.
func TestRoundTripEveryVector(t *testing.T) {
	n := map[string]int{}
	for path, v := range allVectors(t) {
		frame, err := hex.DecodeString(v.FrameHex)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out, err := RoundTrip(frame, v.MaxBytes)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if v.Kind == "invalid" {
			if out.Err == nil || felix.ErrorClass(out.Err) != v.Error {
				t.Errorf("%s: want class %s, got %v", path, v.Error, out.Err)
			}
			n["invalid"]++
			continue
		}
		if out.Err != nil {
			t.Errorf("%s: refused: %v", path, out.Err)
		}
		n[out.Layout.String()]++
	}
	for _, l := range []string{"json_message", "binary_publish_batch", "binary_acked_publish_batch",
		"binary_publish_ack", "binary_event_batch", "invalid"} {
		if n[l] == 0 {
			t.Errorf("no vector of layout %s round-tripped: %v", l, n)
		}
	}
}

func TestRoundTripRefusals(t *testing.T) {
	ok, _ := felix.AppendMessageFrame(nil, &felix.OK{})
	bad := bytes.Clone(ok)
	bad[0] = 'X'
	for name, frame := range map[string][]byte{
		"bad magic":  bad,
		"truncated":  ok[:len(ok)-1],
		"trailing":   append(bytes.Clone(ok), 0),
		"not json":   mustFrame(t, 0, []byte("{")),
		"empty":      nil,
		"no layout":  mustFrame(t, felix.FlagEventBatchOffsets, nil),
		"event junk": mustFrame(t, felix.FlagBinaryEventBatchShared, []byte{1, 2, 3}),
	} {
		out, err := RoundTrip(frame, 0)
		if err != nil || out.Err == nil || out.Canonical != nil {
			t.Errorf("%s: outcome %+v, %v", name, out, err)
		}
	}
	out, err := RoundTrip(ok, 0)
	if err != nil || out.Err != nil || !bytes.Equal(out.Canonical, ok) || out.Layout != felix.LayoutJSON {
		t.Fatalf("ok frame: %+v %v", out, err)
	}
}

func mustFrame(t *testing.T, flags felix.Flags, payload []byte) []byte {
	t.Helper()
	b, err := felix.AppendFrame(nil, flags, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSplitReader(t *testing.T) {
	data := []byte("abcdefghij")
	for _, splits := range [][]byte{nil, {0}, {2, 0x80}, {0x83}, {127, 1}} {
		got, err := io.ReadAll(SplitReader(data, splits))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("splits %v: %q %v", splits, got, err)
		}
	}
	r := SplitReader(data, []byte{2})
	p := make([]byte, 10)
	if n, err := r.Read(p); n != 3 || err != nil {
		t.Fatalf("first read %d %v, want 3 bytes", n, err)
	}
	r = SplitReader([]byte("ab"), []byte{0x81})
	if n, err := r.Read(p); n != 2 || err != io.EOF {
		t.Fatalf("last read %d %v, want 2 bytes with io.EOF", n, err)
	}
}

// A stream of every vector frame (valid ones) reads the same whole and
// split in many ways; a cut stream ends with a truncation at the same
// place.
func TestCheckStreamVectors(t *testing.T) {
	frames, err := VectorFrames(VectorDirs(repoRoot)...)
	if err != nil {
		t.Fatal(err)
	}
	var stream []byte
	for _, f := range frames {
		if out, err := RoundTrip(f, 0); err == nil && out.Err == nil {
			stream = append(stream, f...)
		}
	}
	for _, splits := range [][]byte{nil, {0}, {11, 0x80}, {5, 200, 1}} {
		if err := CheckStream(stream, splits, 0); err != nil {
			t.Fatalf("splits %v: %v", splits, err)
		}
		if err := CheckStream(stream[:len(stream)-5], splits, 0); err != nil {
			t.Fatalf("cut stream, splits %v: %v", splits, err)
		}
	}
	res := ReadAll(SplitReader(stream[:len(stream)-5], []byte{3}), 0)
	if !errors.Is(res.End, felix.ErrTruncated) {
		t.Fatalf("cut stream ends with %v", res.End)
	}
}

func TestVectorFramesMissing(t *testing.T) {
	if _, err := VectorFrames(filepath.Join(t.TempDir(), "absent")); err == nil {
		t.Fatal("absent directory accepted")
	}
	if _, err := VectorFrames(t.TempDir()); err == nil {
		t.Fatal("empty directory accepted")
	}
	t.Setenv("FELIX_VECTORS_DIRS", "extra:/abs")
	if got := VectorDirs("r"); len(got) != 3 || got[1] != filepath.Join("r", "extra") || got[2] != "/abs" {
		t.Fatalf("VectorDirs = %v", got)
	}
}
