package vectors

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flxproto/felix"
)

// vectorDirs returns every directory below this package holding vector
// files, plus each directory of FELIX_VECTORS_DIRS (colon-separated; a
// relative path is taken from the repository root, the parent of this
// directory).
//
// Each entry is {path to read, label to name the subtests by}.
func vectorDirs(t *testing.T) [][2]string {
	found, err := FindDirs(".")
	if err != nil {
		t.Fatal(err)
	}
	var dirs [][2]string
	for _, d := range found {
		dirs = append(dirs, [2]string{d, d})
	}
	for _, d := range strings.Split(os.Getenv("FELIX_VECTORS_DIRS"), ":") {
		if d == "" {
			continue
		}
		path := d
		if !filepath.IsAbs(d) {
			path = filepath.Join("..", d)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("FELIX_VECTORS_DIRS: %v", err)
			continue
		}
		dirs = append(dirs, [2]string{path, filepath.Clean(d)})
	}
	return dirs
}

// TestVectors runs every vector as its own subtest, named dir/name. A
// vector whose codec is not registered yet is skipped with the reason.
func TestVectors(t *testing.T) {
	dirs := vectorDirs(t)
	total := 0
	for _, dir := range dirs {
		vs, err := LoadDir(dir[0])
		if err != nil {
			t.Errorf("%s: %v", dir[1], err)
			continue
		}
		for _, v := range vs {
			total++
			t.Run(filepath.ToSlash(filepath.Join(dir[1], v.Name)), func(t *testing.T) {
				res := Run(v)
				switch res.Status {
				case Skip:
					t.Skipf("skipped: %s", res.Reason)
				case Fail:
					for _, p := range res.Problems {
						t.Error(p)
					}
				}
			})
		}
	}
	if total == 0 {
		t.Fatal("no vectors found")
	}
}

// The project's own frame vectors are all present and none is skipped.
func TestOwnFrameVectorsComplete(t *testing.T) {
	vs, err := LoadDir("frame")
	if err != nil {
		t.Fatal(err)
	}
	classes := map[string]int{}
	for _, v := range vs {
		res := Run(v)
		if res.Status != Pass {
			t.Errorf("%s: %v %s", v.ID(), res.Status, res.Summary())
		}
		var c string
		_ = json.Unmarshal(v.Members["error"], &c)
		classes[c]++
	}
	for _, c := range []string{"bad_magic", "bad_version", "unknown_flags", "truncated", "frame_too_large", "trailing_bytes"} {
		if classes[c] == 0 {
			t.Errorf("no frame vector for class %s", c)
		}
	}
}

// echoKind is a test codec: its payload is text, described by payload_utf8.
const echoKind = "x_test_echo"

func init() {
	Register(Codec{
		Kind: echoKind,
		Decode: func(frame []byte, max uint32) ([]Member, []byte, error) {
			f, err := felix.DecodeFrame(frame, max)
			if err != nil {
				return nil, nil, err
			}
			if string(f.Payload) == "boom" {
				panic("codec exploded")
			}
			re, err := felix.AppendFrame(nil, f.Flags, f.Payload)
			return []Member{{"text_utf8", string(f.Payload)}, {"length", uint64(len(f.Payload))}, {"extra", true}}, re, err
		},
		Encode: func(v map[string]json.RawMessage, flags felix.Flags) ([]byte, error) {
			var p string
			if raw, ok := v["text_utf8"]; ok {
				if err := json.Unmarshal(raw, &p); err != nil {
					return nil, err
				}
			} else if raw, ok := v["text_hex"]; ok {
				var h string
				if err := json.Unmarshal(raw, &h); err != nil {
					return nil, err
				}
				b, err := hex.DecodeString(h)
				if err != nil {
					return nil, err
				}
				p = string(b)
			}
			return felix.AppendFrame(nil, flags, []byte(p))
		},
	})
}

func frameHex(flags felix.Flags, payload string) string {
	b, _ := felix.AppendFrame(nil, flags, []byte(payload))
	return hex.EncodeToString(b)
}

// writeVector writes NAME.json (from members) and NAME.hex (hexText, or
// frame_hex when hexText is "=").
func writeVector(t *testing.T, dir, name string, members map[string]any, hexText string) {
	t.Helper()
	if _, ok := members["name"]; !ok {
		members["name"] = name
	}
	js, err := json.MarshalIndent(members, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if hexText == "=" {
		hexText, _ = members["frame_hex"].(string)
	}
	if hexText != "-" {
		if err := os.WriteFile(filepath.Join(dir, name+".hex"), []byte(hexText), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The runner's own checks, each exercised on a vector built to pass or to
// fail one check.
func TestRunnerChecks(t *testing.T) {
	formatKinds["x_not_registered"] = true
	defer delete(formatKinds, "x_not_registered")
	dir := t.TempDir()
	good := frameHex(4, "hi")
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	tests := []struct {
		name    string
		members map[string]any
		hexText string
		status  Status
		problem string
	}{
		{"pass", m("kind", echoKind, "flags", 4, "frame_hex", good, "payload_hex", hex.EncodeToString([]byte("hi")), "text_utf8", "hi", "length", 2), good + "\n", Pass, ""},
		{"pass_number_forms", m("kind", echoKind, "flags", 4, "frame_hex", good, "length", json.RawMessage("2.0"), "text_utf8", "hi"), "=", Pass, ""},
		{"pass_hex_form", m("kind", echoKind, "flags", 4, "frame_hex", good, "text_hex", "6869"), "=", Pass, ""},
		{"hex_form_differs", m("kind", echoKind, "flags", 4, "frame_hex", good, "text_hex", "6868"), "=", Fail, "member text_hex"},
		{"member_not_produced", m("kind", echoKind, "flags", 4, "frame_hex", good, "unused", nil), "=", Fail, "unused is not produced"},
		{"hex_file_differs", m("kind", echoKind, "flags", 4, "frame_hex", good), frameHex(4, "ho"), Fail, "differs from frame_hex"},
		{"hex_file_missing", m("kind", echoKind, "flags", 4, "frame_hex", good), "-", Fail, "missing"},
		{"flags_differ", m("kind", echoKind, "flags", 2, "frame_hex", good), "=", Fail, "header flags"},
		{"flags_absent_means_zero", m("kind", echoKind, "frame_hex", good), "=", Fail, "header flags"},
		{"member_differs", m("kind", echoKind, "flags", 4, "frame_hex", good, "text_utf8", "ho"), "=", Fail, "member text_utf8"},
		{"payload_hex_differs", m("kind", echoKind, "flags", 4, "frame_hex", good, "payload_hex", "00"), "=", Fail, "payload_hex is not"},
		{"name_differs", m("name", "other", "kind", echoKind, "flags", 4, "frame_hex", good), "=", Fail, "does not match the file name"},
		{"canonical_differs", m("kind", echoKind, "flags", 4, "frame_hex", good, "canonical_frame_hex", frameHex(4, "hi!")), "=", Fail, "re-encoding after decode differs"},
		{"encode_differs", m("kind", echoKind, "flags", 4, "frame_hex", good, "text_utf8", "hx"), "=", Fail, "encode from vector members differs"},
		{"codec_panics", m("kind", echoKind, "flags", 4, "frame_hex", frameHex(4, "boom")), "=", Fail, "panic"},
		{"decode_fails", m("kind", echoKind, "flags", 4, "frame_hex", good[:20]), "=", Fail, "decode:"},
		{"bad_frame_hex", m("kind", echoKind, "frame_hex", "zz"), "=", Fail, "frame_hex"},
		{"flags_not_integer", m("kind", echoKind, "flags", "4", "frame_hex", good), "=", Fail, "member flags is not an integer"},
		{"flags_out_of_range", m("kind", echoKind, "flags", 65536, "frame_hex", good), "=", Fail, "member flags is not an integer"},
		{"kind_not_string", m("kind", 3, "frame_hex", good, "flags", 4), "=", Fail, "member kind is not a string"},
		{"frame_hex_missing", m("kind", echoKind, "flags", 4), "", Fail, "frame_hex missing"},
		{"invalid_max_negative", m("kind", "invalid", "layout", "frame", "error", "bad_magic", "max_frame_bytes", -1, "frame_hex", "00"+good[2:]), "=", Fail, "member max_frame_bytes is not an integer"},
		{"invalid_no_layout", m("kind", "invalid", "error", "bad_magic", "frame_hex", good), "=", Fail, "without layout"},
		{"invalid_no_error", m("kind", "invalid", "layout", "frame", "frame_hex", good), "=", Fail, "without error"},
		{"unknown_kind", m("kind", "nonsense", "frame_hex", good, "flags", 4), "=", Fail, "unknown kind"},
		{"missing_codec", m("kind", "x_not_registered", "frame_hex", good, "flags", 4), "=", Skip, "no codec registered for kind \"x_not_registered\""},
		{"missing_codec_but_bad_hex_file", m("kind", "x_not_registered", "frame_hex", good, "flags", 4), "00", Fail, "differs from frame_hex"},
		{"invalid_ok", m("kind", "invalid", "layout", "frame", "error", "bad_magic", "frame_hex", "00"+good[2:]), "=", Pass, ""},
		{"invalid_too_large", m("kind", "invalid", "layout", "frame", "error", "frame_too_large", "max_frame_bytes", 1, "flags", 4, "frame_hex", good), "=", Pass, ""},
		{"invalid_wrong_class", m("kind", "invalid", "layout", "frame", "error", "truncated", "frame_hex", "00"+good[2:]), "=", Fail, "error class \"bad_magic\""},
		{"invalid_decodes", m("kind", "invalid", "layout", "frame", "error", "truncated", "frame_hex", good), "=", Fail, "decoded without error"},
		{"invalid_bad_class", m("kind", "invalid", "layout", "frame", "error", "oops", "frame_hex", good), "=", Fail, "not a FORMAT.md class"},
		{"invalid_bad_layout", m("kind", "invalid", "layout", "nope", "error", "truncated", "frame_hex", good), "=", Fail, "unknown layout"},
		{"invalid_missing_codec", m("kind", "invalid", "layout", "x_not_registered", "error", "truncated", "frame_hex", good), "=", Skip, "no codec registered for layout"},
		{"invalid_codec_layout", m("kind", "invalid", "layout", echoKind, "error", "truncated", "frame_hex", good[:20]), "=", Fail, "unknown layout"},
		{"invalid_codec_panics", m("kind", "invalid", "layout", "x_echo_format", "error", "truncated", "frame_hex", frameHex(4, "boom")), "=", Fail, "panic"},
	}
	formatKinds["x_echo_format"] = true
	defer delete(formatKinds, "x_echo_format")
	c, _ := Lookup(echoKind)
	c.Kind = "x_echo_format"
	Register(c)
	for _, tc := range tests {
		writeVector(t, dir, tc.name, tc.members, tc.hexText)
	}
	vs, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Vector{}
	for _, v := range vs {
		byName[v.Name] = v
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := byName[tc.name]
			if !ok {
				t.Fatal("vector not loaded")
			}
			res := Run(v)
			if res.Status != tc.status {
				t.Fatalf("status %v (%s), want %v", res.Status, res.Summary(), tc.status)
			}
			if tc.problem != "" && !strings.Contains(res.Summary(), tc.problem) {
				t.Fatalf("summary %q does not mention %q", res.Summary(), tc.problem)
			}
			if res.ID != filepath.ToSlash(filepath.Join(dir, tc.name)) {
				t.Fatalf("ID %q", res.ID)
			}
		})
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "broken.json"), []byte("{not json"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "array.json"), []byte("[1]"), 0o644)
	vs, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 {
		t.Fatalf("%d vectors", len(vs))
	}
	for _, v := range vs {
		if v.LoadErr == nil {
			t.Errorf("%s: no load error", v.Name)
		}
		if res := Run(v); res.Status != Fail {
			t.Errorf("%s: status %v", v.Name, res.Status)
		}
	}
	if _, err := LoadDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadDir of a missing directory succeeded")
	}
	sub := filepath.Join(dir, "a", "b")
	_ = os.MkdirAll(sub, 0o755)
	_ = os.WriteFile(filepath.Join(sub, "x.json"), []byte("{}"), 0o644)
	dirs, err := FindDirs(dir)
	if err != nil || len(dirs) != 2 || dirs[0] != dir || dirs[1] != sub {
		t.Fatalf("FindDirs = %v, %v", dirs, err)
	}
}

func TestNormalizeMember(t *testing.T) {
	k1, v1, _ := normalizeMember("key_utf8", "k7")
	k2, v2, _ := normalizeMember("key_hex", json.RawMessage(`"6B37"`))
	if k1 != k2 || v1 != v2 {
		t.Fatalf("utf8 %v=%v, hex %v=%v", k1, v1, k2, v2)
	}
	_, big1, _ := normalizeMember("offset", uint64(18446744073709551615))
	_, big2, _ := normalizeMember("offset", json.RawMessage(`18446744073709551615`))
	_, big3, _ := normalizeMember("offset", json.RawMessage(`18446744073709551614`))
	if big1 != big2 || big1 == big3 {
		t.Fatalf("u64 comparison: %v %v %v", big1, big2, big3)
	}
	_, t1, _ := normalizeMember("payload_json", `{"type":"ok"}`)
	_, t2, _ := normalizeMember("payload_json", json.RawMessage(`{"type":"ok"}`))
	_, t3, _ := normalizeMember("payload_json", `{"type": "ok"}`)
	if t1 != t2 || t1 == t3 {
		t.Fatalf("payload_json must compare as exact text: %q %q %q", t1, t2, t3)
	}
	if _, _, err := normalizeMember("x", make(chan int)); err == nil {
		t.Fatal("unmarshalable value accepted")
	}
	if Pass.String() != "pass" || Fail.String() != "fail" || Skip.String() != "skip" || Status(9).String() != "status(9)" {
		t.Fatal("Status.String")
	}
	if !errors.Is(safeCall(func() error { panic("x") }), errPanic) {
		t.Fatal("safeCall did not recover")
	}
}
