package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flxproto/felix/vectors"
)

// felixRun runs one felix invocation in-process.
func felixRun(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// oneErrLine fails unless stderr is exactly one non-empty line.
func oneErrLine(t *testing.T, stderr string) {
	t.Helper()
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") || len(strings.TrimSpace(stderr)) == 0 {
		t.Fatalf("stderr is not one line: %q", stderr)
	}
	if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, ".go:") {
		t.Fatalf("stderr looks like a stack trace: %q", stderr)
	}
}

const okFrame = "464c5831000100000000000d7b2274797065223a226f6b227d"

func TestUsageAndUnknownCommand(t *testing.T) {
	code, _, stderr := felixRun(t, "")
	if code != 2 || !strings.Contains(stderr, "usage: felix") || !strings.Contains(stderr, "felix conform ") {
		t.Fatalf("no args: code %d stderr %q", code, stderr)
	}
	code, stdout, _ := felixRun(t, "", "help")
	for _, c := range []string{"decode", "encode", "conform"} {
		if code != 0 || !strings.Contains(stdout, "felix "+c) {
			t.Fatalf("help: code %d, %q lacks %s", code, stdout, c)
		}
	}
	code, _, stderr = felixRun(t, "", "frobnicate")
	if code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Fatalf("unknown: code %d stderr %q", code, stderr)
	}
	oneErrLine(t, stderr)
	code, stdout, _ = felixRun(t, "", "decode", "-h")
	if code != 0 || !strings.Contains(stdout, "usage: felix decode") {
		t.Fatalf("decode -h: %d %q", code, stdout)
	}
	code, _, stderr = felixRun(t, "", "decode", "-bogus")
	if code != 2 || !strings.Contains(stderr, "-bogus") {
		t.Fatalf("bad flag: %d %q", code, stderr)
	}
	oneErrLine(t, stderr)
}

func TestPanicIsOneLine(t *testing.T) {
	register(command{name: "x-panic", usage: "x-panic", run: func(context.Context, []string, io.Reader, io.Writer, io.Writer) error {
		panic("kaboom")
	}})
	defer delete(commands, "x-panic")
	code, _, stderr := felixRun(t, "", "x-panic")
	if code != 2 || !strings.Contains(stderr, "internal error: kaboom") {
		t.Fatalf("code %d stderr %q", code, stderr)
	}
	oneErrLine(t, stderr)
}

// decodeObject parses decode's output, checking member order.
func decodeObject(t *testing.T, out string, wantOrder ...string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, out)
	}
	last := -1
	for _, name := range wantOrder {
		i := strings.Index(out, `"`+name+`":`)
		if i < 0 || i < last {
			t.Fatalf("member %s missing or out of order in\n%s", name, out)
		}
		last = i
	}
	if !strings.HasPrefix(out, "{\n  \"name\": \"decoded\",\n") || !strings.HasSuffix(out, "}\n") {
		t.Fatalf("not two-space indented: %q", out)
	}
	return m
}

// asVector saves a description as NAME.json + NAME.hex and runs it.
func asVector(t *testing.T, out string) vectors.Result {
	t.Helper()
	dir := t.TempDir()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	var fh string
	_ = json.Unmarshal(m["frame_hex"], &fh)
	if err := os.WriteFile(filepath.Join(dir, "decoded.json"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "decoded.hex"), []byte(fh+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vs, err := vectors.LoadDir(dir)
	if err != nil || len(vs) != 1 {
		t.Fatalf("LoadDir: %v %d", err, len(vs))
	}
	return vectors.Run(vs[0])
}

func TestDecodeJSONMessage(t *testing.T) {
	frame, _ := hex.DecodeString(okFrame)
	inputs := []struct {
		name  string
		stdin string
		args  []string
	}{
		{"hex argument", "", []string{"decode", okFrame}},
		{"hex on stdin with whitespace", okFrame[:10] + "\n  " + okFrame[10:] + "\n", []string{"decode"}},
		{"raw stdin", string(frame), []string{"decode", "-raw"}},
	}
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			code, stdout, stderr := felixRun(t, in.stdin, in.args...)
			if code != 0 || stderr != "" {
				t.Fatalf("code %d stderr %q", code, stderr)
			}
			m := decodeObject(t, stdout, "name", "kind", "flags", "frame_hex", "payload_hex", "payload_json")
			if string(m["kind"]) != `"json_message"` || string(m["flags"]) != "0" || string(m["frame_hex"]) != `"`+okFrame+`"` {
				t.Fatalf("description %s", stdout)
			}
			if string(m["payload_json"]) != `"{\"type\":\"ok\"}"` {
				t.Fatalf("payload_json %s", m["payload_json"])
			}
			if res := asVector(t, stdout); res.Status != vectors.Pass {
				t.Fatalf("description does not pass as a vector: %s", res.Summary())
			}
		})
	}
}

func TestDecodeInvalid(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		stdin  string
		layout string
		class  string
	}{
		{"unknown flags", []string{"decode", "464c58310001800000000000"}, "", "frame", "unknown_flags"},
		{"bad magic", []string{"decode", "464c58320001000000000000"}, "", "frame", "bad_magic"},
		{"truncated header", []string{"decode", "464c5831"}, "", "frame", "truncated"},
		{"empty stdin", []string{"decode"}, "", "frame", "truncated"},
		{"trailing bytes", []string{"decode", okFrame + "00"}, "", "frame", "trailing_bytes"},
		{"too large for -max", []string{"decode", "-max", "4", okFrame}, "", "frame", "frame_too_large"},
		{"flags without base bit", []string{"decode", "464c58310001000800000000"}, "", "json_message", "bad_flag_combination"},
		{"json without type", []string{"decode", "464c583100010000000000027b7d"}, "", "json_message", "invalid_json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := felixRun(t, tc.stdin, tc.args...)
			if code != 1 {
				t.Fatalf("code %d, stdout %q stderr %q", code, stdout, stderr)
			}
			oneErrLine(t, stderr)
			m := decodeObject(t, stdout, "name", "kind", "layout", "error", "frame_hex")
			if string(m["kind"]) != `"invalid"` || string(m["layout"]) != `"`+tc.layout+`"` || string(m["error"]) != `"`+tc.class+`"` {
				t.Fatalf("description %s", stdout)
			}
			if res := asVector(t, stdout); res.Status != vectors.Pass {
				t.Fatalf("description does not pass as a vector: %s", res.Summary())
			}
		})
	}
}

func TestDecodeInputErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"not hex", []string{"decode", "zz"}, 1, "not hex"},
		{"odd hex", []string{"decode", "464"}, 1, "not hex"},
		{"two arguments", []string{"decode", "00", "00"}, 2, "at most one HEX"},
		{"raw with argument", []string{"decode", "-raw", "00"}, 2, "-raw"},
		{"bad max", []string{"decode", "-max", "0", okFrame}, 2, "-max"},
		{"max too big", []string{"decode", "-max", "4294967296", okFrame}, 2, "-max"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := felixRun(t, "", tc.args...)
			if code != tc.code || stdout != "" || !strings.Contains(stderr, tc.msg) {
				t.Fatalf("code %d stdout %q stderr %q", code, stdout, stderr)
			}
			oneErrLine(t, stderr)
		})
	}
}

func TestEncode(t *testing.T) {
	vec := `{"name":"ok","payload_json":"{\"type\":\"ok\"}","frame_hex":"` + okFrame + `"}`
	code, stdout, stderr := felixRun(t, vec, "encode")
	if code != 0 || stdout != okFrame+"\n" || stderr != "" {
		t.Fatalf("stdin: code %d stdout %q stderr %q", code, stdout, stderr)
	}
	file := filepath.Join(t.TempDir(), "v.json")
	if err := os.WriteFile(file, []byte(vec), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = felixRun(t, "", "encode", file)
	if code != 0 || stdout != okFrame+"\n" {
		t.Fatalf("file: code %d stdout %q", code, stdout)
	}

	// decode | encode is the identity for a canonical frame.
	_, desc, _ := felixRun(t, "", "decode", okFrame)
	code, stdout, _ = felixRun(t, desc, "encode")
	if code != 0 || stdout != okFrame+"\n" {
		t.Fatalf("decode|encode: code %d stdout %q", code, stdout)
	}

	errs := []struct {
		name, stdin string
		args        []string
		msg         string
	}{
		{"not json", "nope", []string{"encode"}, "not a vector JSON object"},
		{"json array", "[1]", []string{"encode"}, "not a vector JSON object"},
		{"null", "null", []string{"encode"}, "not a vector JSON object"},
		{"invalid kind", `{"kind":"invalid","layout":"frame","error":"truncated","frame_hex":""}`, []string{"encode"}, "invalid vector"},
		{"unknown kind", `{"kind":"nonsense"}`, []string{"encode"}, `unknown kind "nonsense"; kinds: `},
		{"bad flags", `{"flags":70000,"payload_json":"{}"}`, []string{"encode"}, "flags"},
		{"bad kind type", `{"kind":3}`, []string{"encode"}, "kind"},
		{"codec refuses", `{"flags":1,"payload_json":"{\"type\":\"ok\"}"}`, []string{"encode"}, "bad flag combination"},
		{"missing file", "", []string{"encode", filepath.Join(t.TempDir(), "none.json")}, "none.json"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := felixRun(t, tc.stdin, tc.args...)
			if code != 1 || stdout != "" || !strings.Contains(stderr, tc.msg) {
				t.Fatalf("code %d stdout %q stderr %q", code, stdout, stderr)
			}
			oneErrLine(t, stderr)
		})
	}
	code, _, stderr = felixRun(t, "", "encode", "a", "b")
	if code != 2 {
		t.Fatalf("two files: %d %q", code, stderr)
	}
}

// writeFrameVector writes an invalid frame-layout vector.
func writeFrameVector(t *testing.T, dir, name, frameHex, class string) {
	t.Helper()
	js := `{"name":"` + name + `","kind":"invalid","layout":"frame","error":"` + class + `","frame_hex":"` + frameHex + `"}`
	if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".hex"), []byte(frameHex), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConform(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFrameVector(t, root, "good", "464c5832", "truncated")
	writeFrameVector(t, sub, "bad", "464c58320001000000000000", "truncated")

	code, stdout, stderr := felixRun(t, "", "conform", root)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	want := []string{
		"ok   " + filepath.ToSlash(filepath.Join(root, "good")),
		"FAIL " + filepath.ToSlash(filepath.Join(sub, "bad")) + `: error class "bad_magic"`,
		"1 passed, 1 failed",
	}
	if code != 1 || len(lines) != 3 || lines[0] != want[0] || !strings.HasPrefix(lines[1], want[1]) || lines[2] != want[2] {
		t.Fatalf("code %d\n%s\nwant lines like %q", code, stdout, want)
	}
	oneErrLine(t, stderr)

	// Only passing vectors: exit 0.
	okDir := t.TempDir()
	writeFrameVector(t, okDir, "a", "", "truncated")
	writeFrameVector(t, okDir, "b", okFrame+"00", "trailing_bytes")
	code, stdout, stderr = felixRun(t, "", "conform", okDir)
	if code != 0 || !strings.HasSuffix(stdout, "\n2 passed, 0 failed\n") || stderr != "" {
		t.Fatalf("code %d stdout %q stderr %q", code, stdout, stderr)
	}

	// Missing and empty directories are usage errors (exit 2), not
	// silence and not vector results.
	code, stdout, _ = felixRun(t, "", "conform", filepath.Join(root, "missing"), t.TempDir())
	if code != 2 || stdout != "" {
		t.Fatalf("missing dir: code %d %q", code, stdout)
	}
	code, _, stderr = felixRun(t, "", "conform")
	if code != 2 {
		t.Fatalf("no dir: code %d", code)
	}
	oneErrLine(t, stderr)
}

// A vector whose layout has no codec is reported as skip with the reason,
// and counted in the final line.
func TestConformSkip(t *testing.T) {
	var missing string
	for _, k := range []string{"binary_publish_batch", "binary_acked_publish_batch", "binary_publish_ack", "binary_event_batch", "json_message"} {
		if !slices.Contains(vectors.Kinds(), k) {
			missing = k
			break
		}
	}
	dir := t.TempDir()
	layout := missing
	if layout == "" {
		layout = "json_message" // every codec exists: the vector must then run
	}
	js := `{"name":"s","kind":"invalid","layout":"` + layout + `","error":"bad_magic","frame_hex":"00"}`
	_ = os.WriteFile(filepath.Join(dir, "s.json"), []byte(js), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "s.hex"), []byte("00"), 0o644)
	code, stdout, _ := felixRun(t, "", "conform", dir)
	if missing == "" {
		if code != 1 || strings.Contains(stdout, "skip") {
			t.Fatalf("with every codec registered: code %d %q", code, stdout)
		}
		return
	}
	want := "skip " + filepath.ToSlash(filepath.Join(dir, "s")) + `: no codec registered for layout "` + missing + `" yet` + "\n0 passed, 0 failed, 1 skipped\n"
	if code != 0 || stdout != want {
		t.Fatalf("code %d\n%q\nwant\n%q", code, stdout, want)
	}
}

// The project's vectors and the upstream set pass through the CLI as they
// do through go test.
func TestConformProjectVectors(t *testing.T) {
	code, stdout, stderr := felixRun(t, "", "conform", filepath.Join("..", "..", "vectors", "frame"))
	if code != 0 || strings.Contains(stdout, "FAIL") || !strings.Contains(stdout, " passed, 0 failed") {
		t.Fatalf("code %d\n%s\n%s", code, stdout, stderr)
	}
	if n := strings.Count(stdout, "\nok   "); n < 10 {
		t.Fatalf("only %d frame vectors ran", n)
	}
}

// Every vector's frame, run through `felix decode`, yields a description
// that itself passes as a vector; for an invalid vector the description
// names the same error class.
func TestDecodeDescribesEveryVector(t *testing.T) {
	roots := []string{filepath.Join("..", "..", "vectors")}
	if up := filepath.Join("..", "..", "..", "shared", "vectors", "upstream"); dirExists(up) {
		roots = append(roots, up)
	}
	n := 0
	for _, root := range roots {
		dirs, err := vectors.FindDirs(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range dirs {
			vs, err := vectors.LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				if v.LoadErr != nil {
					continue // reported by go test ./vectors/
				}
				n++
				var kind, class string
				var maxBytes uint64
				_ = json.Unmarshal(v.Members["kind"], &kind)
				_ = json.Unmarshal(v.Members["error"], &class)
				_ = json.Unmarshal(v.Members["max_frame_bytes"], &maxBytes)
				args := []string{"decode"}
				if maxBytes != 0 {
					args = append(args, "-max", strconv.FormatUint(maxBytes, 10))
				}
				code, stdout, stderr := felixRun(t, v.Hex, args...)
				if kind == "invalid" {
					if code != 1 {
						t.Errorf("%s: code %d, want 1 (%s)", v.ID(), code, stderr)
						continue
					}
					var got struct{ Error string }
					_ = json.Unmarshal([]byte(stdout), &got)
					if got.Error != class {
						t.Errorf("%s: decode reports %q, vector %q", v.ID(), got.Error, class)
					}
				} else if code != 0 {
					t.Errorf("%s: code %d: %s", v.ID(), code, stderr)
					continue
				}
				if res := asVector(t, stdout); res.Status != vectors.Pass {
					t.Errorf("%s: description fails as a vector: %s", v.ID(), res.Summary())
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d vectors found", n)
	}
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
