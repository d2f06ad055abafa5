package vectors

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/flxproto/felix"
)

// Vector is one conformance vector: the NAME.json object and the NAME.hex
// file beside it.
type Vector struct {
	// Dir is the directory the vector was loaded from, as given to LoadDir.
	Dir string
	// Name is the base name (NAME of NAME.json).
	Name string
	// Members are the members of NAME.json.
	Members map[string]json.RawMessage
	// Hex is the content of NAME.hex with trailing whitespace removed.
	Hex string
	// LoadErr records a problem reading the pair (unreadable or malformed
	// JSON, missing .hex file). A vector with a LoadErr fails when run.
	LoadErr error
}

// ID returns "dir/name", the name a vector is reported under.
func (v Vector) ID() string { return filepath.ToSlash(filepath.Join(v.Dir, v.Name)) }

// LoadDir loads every NAME.json + NAME.hex pair of dir, sorted by name. A
// pair that cannot be read is returned with LoadErr set, so it is reported
// by name instead of being lost; the error return is for an unreadable dir.
func LoadDir(dir string) ([]Vector, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	sort.Strings(paths)
	out := make([]Vector, 0, len(paths))
	for _, p := range paths {
		v := Vector{Dir: dir, Name: strings.TrimSuffix(filepath.Base(p), ".json")}
		v.LoadErr = v.load(p)
		out = append(out, v)
	}
	return out, nil
}

func (v *Vector) load(jsonPath string) error {
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&v.Members); err != nil {
		return fmt.Errorf("%s: not a JSON object: %v", filepath.Base(jsonPath), err)
	}
	if v.Members == nil {
		return fmt.Errorf("%s: not a JSON object", filepath.Base(jsonPath))
	}
	h, err := os.ReadFile(strings.TrimSuffix(jsonPath, ".json") + ".hex")
	if err != nil {
		return fmt.Errorf("missing %s.hex: %v", v.Name, err)
	}
	v.Hex = strings.TrimRight(string(h), " \t\r\n")
	return nil
}

// FindDirs returns root and every directory below it that holds at least
// one *.json file, sorted.
func FindDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if m, _ := filepath.Glob(filepath.Join(path, "*.json")); len(m) > 0 {
			dirs = append(dirs, path)
		}
		return nil
	})
	sort.Strings(dirs)
	return dirs, err
}

// Status is the outcome of running one vector.
type Status int

// Outcomes of Run.
const (
	// Pass: every check held.
	Pass Status = iota
	// Fail: at least one check failed; Result.Problems says which.
	Fail
	// Skip: the codec the vector needs is not registered; Result.Reason names it.
	Skip
)

// String returns "pass", "fail" or "skip".
func (s Status) String() string {
	switch s {
	case Pass:
		return "pass"
	case Fail:
		return "fail"
	case Skip:
		return "skip"
	}
	return fmt.Sprintf("status(%d)", int(s))
}

// Result is the outcome of running one vector.
type Result struct {
	// ID is the vector's "dir/name".
	ID string
	// Status is Pass, Fail or Skip.
	Status Status
	// Problems lists every failed check (Fail).
	Problems []string
	// Reason says why the vector was skipped (Skip).
	Reason string
}

// Summary is one line: the reason for a skip, the problems of a failure.
func (r Result) Summary() string {
	switch r.Status {
	case Skip:
		return r.Reason
	case Fail:
		return strings.Join(r.Problems, "; ")
	}
	return ""
}

// FrameLayout is the `layout` of an invalid vector that is decoded as a
// bare frame (felix.DecodeFrame) by the runner itself, without a codec.
const FrameLayout = "frame"

// formatKinds are the kinds of vectors/FORMAT.md that name a layout.
var formatKinds = map[string]bool{
	"json_message": true, "binary_publish_batch": true, "binary_acked_publish_batch": true,
	"binary_publish_ack": true, "binary_event_batch": true,
}

// commonMembers are the members every kind may carry that are not decoded
// values. flag_names is this project's addition (felix decode writes it):
// the flags' names as felix.Flags.String prints them; when present it must
// match flags.
var commonMembers = map[string]bool{
	"name": true, "kind": true, "flags": true, "flag_names": true, "frame_hex": true, "payload_hex": true,
	"canonical_frame_hex": true, "note": true,
}

// run collects the problems found while checking one vector.
type run struct {
	v        Vector
	problems []string
}

func (r *run) failf(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// Run checks one vector as vectors/FORMAT.md describes and never panics,
// whatever the vector or the codecs do.
func Run(v Vector) (res Result) {
	res.ID = v.ID()
	r := &run{v: v}
	defer func() {
		if p := recover(); p != nil {
			r.failf("panic: %v", p)
		}
		if res.Status != Skip && len(r.problems) > 0 {
			res.Status, res.Problems = Fail, r.problems
		}
	}()
	if v.LoadErr != nil {
		r.failf("%v", v.LoadErr)
		return res
	}
	// A vector whose codec is missing is skipped, unless its own files are
	// already inconsistent (hex file, payload_hex, flags): that is a failure.
	if reason := r.check(); reason != "" && len(r.problems) == 0 {
		return Result{ID: res.ID, Status: Skip, Reason: reason}
	}
	return res
}

// check runs every check and returns a skip reason when the vector's codec
// is missing.
func (r *run) check() (skip string) {
	if name, ok := r.str("name"); ok && name != r.v.Name {
		r.failf("member name %q does not match the file name %q", name, r.v.Name)
	}
	kind, ok := r.str("kind")
	if !ok {
		kind = "json_message"
	}
	frameHex, ok := r.str("frame_hex")
	if !ok {
		r.failf("frame_hex missing")
		return ""
	}
	frame, err := hex.DecodeString(frameHex)
	if err != nil {
		r.failf("frame_hex: %v", err)
		return ""
	}
	if fileBytes, err := hex.DecodeString(r.v.Hex); err != nil {
		r.failf("%s.hex: %v", r.v.Name, err)
	} else if !bytes.Equal(fileBytes, frame) {
		r.failf("%s.hex differs from frame_hex", r.v.Name)
	}
	if ph, ok := r.str("payload_hex"); ok {
		p, err := hex.DecodeString(ph)
		switch {
		case err != nil:
			r.failf("payload_hex: %v", err)
		case len(frame) < felix.HeaderLen || !bytes.Equal(p, frame[felix.HeaderLen:]):
			r.failf("payload_hex is not the frame's payload")
		}
	}
	flags, hasFlags := r.uint("flags", 0xFFFF)
	if names, ok := r.str("flag_names"); ok && names != felix.Flags(flags).String() {
		r.failf("flag_names %q, but flags %d are named %q", names, flags, felix.Flags(flags).String())
	}
	if hasFlags || kind != "invalid" {
		if len(frame) >= 8 {
			if got := felix.Flags(frame[6])<<8 | felix.Flags(frame[7]); got != felix.Flags(flags) {
				r.failf("header flags %v, vector flags %v", got, felix.Flags(flags))
			}
		} else {
			r.failf("frame too short to carry flags")
		}
	}
	if kind == "invalid" {
		return r.checkInvalid(frame)
	}
	if !formatKinds[kind] {
		if _, ok := Lookup(kind); !ok {
			r.failf("unknown kind %q", kind)
			return ""
		}
	}
	c, ok := Lookup(kind)
	if !ok {
		return fmt.Sprintf("no codec registered for kind %q yet", kind)
	}
	r.checkValid(c, frame, felix.Flags(flags))
	return ""
}

// checkValid decodes, compares members, re-encodes, and encodes from the
// vector's members.
func (r *run) checkValid(c Codec, frame []byte, flags felix.Flags) {
	want := frame
	if ch, ok := r.str("canonical_frame_hex"); ok {
		b, err := hex.DecodeString(ch)
		if err != nil {
			r.failf("canonical_frame_hex: %v", err)
			return
		}
		want = b
	}
	members, reenc, err := safeDecode(c, frame, 0)
	if err != nil {
		r.failf("decode: %v", err)
	} else {
		r.compareMembers(members)
		if !bytes.Equal(reenc, want) {
			r.failf("re-encoding after decode differs:\n  got  %x\n  want %x", reenc, want)
		}
	}

	enc, err := safeEncode(c, r.v.Members, flags)
	switch {
	case err != nil:
		r.failf("encode from vector members: %v", err)
	case !bytes.Equal(enc, want):
		r.failf("encode from vector members differs:\n  got  %x\n  want %x", enc, want)
	}
}

// checkInvalid checks that decoding fails with the named class.
func (r *run) checkInvalid(frame []byte) (skip string) {
	layout, ok := r.str("layout")
	if !ok {
		r.failf("invalid vector without layout")
		return ""
	}
	class, ok := r.str("error")
	if !ok {
		r.failf("invalid vector without error")
		return ""
	}
	if felix.ClassError(class) == nil {
		r.failf("error %q is not a FORMAT.md class", class)
		return ""
	}
	maxBytes, _ := r.uint("max_frame_bytes", 0xFFFF_FFFF)
	var err error
	switch {
	case layout == FrameLayout:
		err = safeCall(func() error { _, e := felix.DecodeFrame(frame, uint32(maxBytes)); return e })
	case formatKinds[layout]:
		c, ok := Lookup(layout)
		if !ok {
			return fmt.Sprintf("no codec registered for layout %q yet", layout)
		}
		_, _, err = safeDecode(c, frame, uint32(maxBytes))
	default:
		r.failf("unknown layout %q", layout)
		return ""
	}
	if err == nil {
		r.failf("decoded without error, want %s", class)
		return ""
	}
	if errors.Is(err, errPanic) {
		r.failf("%v", err)
		return ""
	}
	if got := felix.ErrorClass(err); got != class {
		r.failf("error class %q (%v), want %q", got, err, class)
	}
	return ""
}

var errPanic = errors.New("panic")

func safeCall(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errPanic, p)
		}
	}()
	return f()
}

func safeDecode(c Codec, frame []byte, max uint32) (members []Member, reenc []byte, err error) {
	err = safeCall(func() error {
		var e error
		members, reenc, e = c.Decode(frame, max)
		return e
	})
	return members, reenc, err
}

func safeEncode(c Codec, v map[string]json.RawMessage, flags felix.Flags) (out []byte, err error) {
	err = safeCall(func() error {
		var e error
		out, e = c.Encode(v, flags)
		return e
	})
	return out, err
}

// str reads a string member; a present member of another type is a problem.
func (r *run) str(name string) (string, bool) {
	raw, ok := r.v.Members[name]
	if !ok {
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		r.failf("member %s is not a string", name)
		return "", false
	}
	return s, true
}

// uint reads an unsigned integer member no larger than max.
func (r *run) uint(name string, max uint64) (uint64, bool) {
	raw, ok := r.v.Members[name]
	if !ok {
		return 0, false
	}
	var n uint64
	if err := json.Unmarshal(raw, &n); err != nil || n > max {
		r.failf("member %s is not an integer in 0..%d", name, max)
		return 0, false
	}
	return n, true
}

// compareMembers compares each decoded member with the vector's member of
// the same name, and reports vector members the decoder did not produce.
// A value given as NAME_utf8 in one and NAME_hex in the other is compared
// as bytes.
func (r *run) compareMembers(decoded []Member) {
	got := map[string]any{}
	for _, d := range decoded {
		key, val, err := normalizeMember(d.Name, d.Value)
		if err != nil {
			r.failf("decoded member %s: %v", d.Name, err)
			continue
		}
		got[key] = val
	}
	names := make([]string, 0, len(r.v.Members))
	for name := range r.v.Members {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if commonMembers[name] {
			continue
		}
		key, want, err := normalizeMember(name, r.v.Members[name])
		if err != nil {
			r.failf("member %s: %v", name, err)
			continue
		}
		g, ok := got[key]
		if !ok {
			r.failf("member %s is not produced by the decoder", name)
			continue
		}
		if !reflect.DeepEqual(g, want) {
			r.failf("member %s: decoded %s, vector %s", name, show(g), show(want))
		}
	}
}

// normalizeMember turns a member into a comparable form under a
// comparison key: payload_json as exact text; NAME_utf8 / NAME_hex as the
// hex of the bytes under key NAME#bytes; anything else as its JSON value
// with numbers as exact decimal strings.
func normalizeMember(name string, value any) (string, any, error) {
	raw, err := toRaw(value)
	if err != nil {
		return "", nil, err
	}
	if name == "payload_json" {
		text, err := JSONText(raw)
		return name, text, err
	}
	v, err := decodeExact(raw)
	if err != nil {
		return "", nil, err
	}
	if base, ok := strings.CutSuffix(name, "_utf8"); ok {
		return base + "#bytes", bytesForm(v, false), nil
	}
	if base, ok := strings.CutSuffix(name, "_hex"); ok {
		return base + "#bytes", bytesForm(v, true), nil
	}
	return name, v, nil
}

// JSONText returns the exact JSON text a payload_json value stands for:
// the content of a JSON string, or the raw JSON itself if it is not a
// string (a codec may hand the payload over as json.RawMessage).
func JSONText(raw json.RawMessage) (string, error) {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '"' {
		var s string
		err := json.Unmarshal(t, &s)
		return s, err
	}
	return string(raw), nil
}

func toRaw(value any) (json.RawMessage, error) {
	switch v := value.(type) {
	case json.RawMessage:
		return v, nil
	case []byte:
		return json.Marshal(hex.EncodeToString(v))
	}
	return json.Marshal(value)
}

// decodeExact unmarshals JSON keeping numbers exact: every number becomes
// its canonical decimal (or float) string.
func decodeExact(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return canonNumbers(v), nil
}

type exactNumber string

func canonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, ok := new(big.Int).SetString(string(x), 10); ok {
			return exactNumber(i.String())
		}
		if f, _, err := big.ParseFloat(string(x), 10, 256, big.ToNearestEven); err == nil {
			if f.IsInt() {
				i, _ := f.Int(nil)
				return exactNumber(i.String())
			}
			return exactNumber(f.Text('g', -1))
		}
		return exactNumber(x)
	case []any:
		for i := range x {
			x[i] = canonNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = canonNumbers(x[k])
		}
	}
	return v
}

// bytesForm maps a string (or array of strings, recursively) of UTF-8 text
// or hex to the lowercase hex of its bytes.
func bytesForm(v any, isHex bool) any {
	switch x := v.(type) {
	case string:
		if isHex {
			return strings.ToLower(x)
		}
		return hex.EncodeToString([]byte(x))
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = bytesForm(x[i], isHex)
		}
		return out
	}
	return v
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
