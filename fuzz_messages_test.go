package felix

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// messageSeedPayloads returns the JSON payloads of the vector directories
// (upstream and the project's own json vectors, whichever exist) plus the
// pinned examples.
func messageSeedPayloads() [][]byte {
	var out [][]byte
	for _, dir := range []string{upstreamVectorsDir, "vectors/json", "vectors"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			var v struct {
				FrameHex string `json:"frame_hex"`
				Kind     string `json:"kind"`
				Layout   string `json:"layout"`
			}
			if json.Unmarshal(raw, &v) != nil {
				continue
			}
			if v.Kind != "" && v.Kind != "json_message" && v.Layout != "json_message" {
				continue
			}
			frame, err := hex.DecodeString(v.FrameHex)
			if err != nil || len(frame) < HeaderLen {
				continue
			}
			out = append(out, frame[HeaderLen:])
		}
	}
	for _, p := range pinned {
		out = append(out, []byte(p.json))
	}
	return out
}

// FuzzDecodeMessage: decoding never panics; whatever decodes re-encodes,
// the re-encoding decodes to the same value, and it is canonical (encoding
// it again gives the same bytes).
func FuzzDecodeMessage(f *testing.F) {
	for _, p := range messageSeedPayloads() {
		f.Add(p)
	}
	f.Add([]byte(`{"type":"frob","request_id":3,"x":[1,2]}`))
	f.Add([]byte(`{"request_id":7,"type":"publish_ok","offset":null}`))
	f.Add([]byte(`{"type":"commit","tenant_id":"t","namespace":"n","stream":"s","entity_key":"","event":"","changes":[{"op":"put","key":"k","value":"AA=="}],"request_id":1}`))
	f.Add([]byte(`{"type":"extension","name":"n","body":{"a":[1.5e3,"\u00e9"]}}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		m, err := DecodeMessage(payload)
		if err != nil {
			if m != nil {
				t.Fatalf("message %#v returned with error %v", m, err)
			}
			if ErrorClass(err) == "" {
				t.Fatalf("error without a class: %v", err)
			}
			return
		}
		enc, err := AppendMessage(nil, m)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := DecodeMessage(enc)
		if err != nil {
			t.Fatalf("re-encoding %q of %q does not decode: %v", enc, payload, err)
		}
		if diff := cmp.Diff(m, back, cmpMsg); diff != "" {
			t.Fatalf("re-encoding %q of %q decodes differently:\n%s", enc, payload, diff)
		}
		if again := back.AppendJSON(nil); !bytes.Equal(again, enc) {
			t.Fatalf("not canonical: %q then %q", enc, again)
		}
		if _, unknown := m.(*UnknownMessage); !unknown && !json.Valid(enc) {
			t.Fatalf("encoding/json refuses %q", enc)
		}
	})
}
