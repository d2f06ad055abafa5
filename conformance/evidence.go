package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Evidence is what a scenario's test observed when it passed: named
// observations (offsets, counts, error codes, delays), each a value that
// encodes as JSON. A pass carries the observations its scenario asks for
// (Scenario.Evidence); a pass without them is not a pass. Values are
// checked by their kind after a JSON round trip, so a test may record Go
// values ([]uint64, int, time-derived float64, string) and a results
// document read back from a file grades the same.
type Evidence map[string]any

// Kind is what one observation of a pass must look like.
type Kind string

// Observation kinds. A kind "offsets+NAME" (see After) is a list of
// offsets that continues observation NAME: its first offset is one past
// NAME's last. A kind "offset=NAME" (see Same) is an offset equal to
// observation NAME (its first offset, when NAME is a list).
const (
	// KindOffsets is a non-empty list of offsets, each one more than the
	// one before (contiguous: no gap, no duplicate).
	KindOffsets Kind = "offsets"
	// KindOffset is one offset (an integer, 0 or more).
	KindOffset Kind = "offset"
	// KindCount is how often something was observed: an integer, 1 or
	// more.
	KindCount Kind = "count"
	// KindZero is how often something that must not happen was observed:
	// exactly 0.
	KindZero Kind = "zero"
	// KindMS is a measured duration in milliseconds: a number, 0 or more.
	KindMS Kind = "ms"
	// KindText is a non-empty string: an error code, a reason, an address.
	KindText Kind = "text"
	// KindList is a non-empty list of anything.
	KindList Kind = "list"
)

// After returns the kind of a list of offsets that continues observation
// name: contiguous, starting one past name's last offset (name must be of
// kind offsets). It is how a resume is proven: what was delivered before
// a fault and what was delivered after it, with nothing skipped or
// repeated in between.
func After(name string) Kind { return Kind(string(KindOffsets) + "+" + name) }

// Same returns the kind of an offset that equals observation name (an
// offset, or the first of a list of offsets): where a write landed and
// where it was expected, where a subscription resumed and the first
// record it delivered after the fault.
func Same(name string) Kind { return Kind(string(KindOffset) + "=" + name) }

// ErrNoEvidence is wrapped by every error that says a pass lacks the
// evidence its scenario asks for (or carries it malformed).
var ErrNoEvidence = errors.New("a pass without its evidence")

// CheckEvidence reports whether ev is the evidence scenario id asks for:
// every observation the scenario names is present and of its kind
// (observations it does not name are allowed and ignored). The error
// wraps ErrNoEvidence and names the first observation that is missing or
// malformed. An id the catalogue lacks is an error too.
func CheckEvidence(id string, ev Evidence) error {
	s, ok := Lookup(id)
	if !ok {
		return fmt.Errorf("conformance: %q is not a scenario of the catalogue", id)
	}
	if len(ev) == 0 {
		return fmt.Errorf("%w: %s records no observation (wants %s)", ErrNoEvidence, id, strings.Join(s.evidenceNames(), ", "))
	}
	norm := make(map[string]any, len(ev))
	for name, v := range ev {
		n, err := normalize(v)
		if err != nil {
			return fmt.Errorf("%w: %s: observation %q: %v", ErrNoEvidence, id, name, err)
		}
		norm[name] = n
	}
	for _, name := range s.evidenceNames() {
		v, ok := norm[name]
		if !ok {
			return fmt.Errorf("%w: %s lacks observation %q (%s)", ErrNoEvidence, id, name, s.Evidence[name])
		}
		if err := checkKind(s.Evidence[name], v, norm); err != nil {
			return fmt.Errorf("%w: %s: observation %q: %v", ErrNoEvidence, id, name, err)
		}
	}
	return nil
}

// evidenceNames returns the names of the scenario's observations, sorted.
func (s Scenario) evidenceNames() []string {
	names := make([]string, 0, len(s.Evidence))
	for n := range s.Evidence {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// normalize round-trips v through JSON, numbers kept exact.
func normalize(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkKind checks one normalized value against k; all holds every
// normalized observation of the pass (for kinds that refer to another).
func checkKind(k Kind, v any, all map[string]any) error {
	switch k {
	case KindOffsets:
		_, err := offsets(v)
		return err
	case KindOffset:
		_, err := natural(v)
		return err
	case KindCount:
		n, err := natural(v)
		if err == nil && n == 0 {
			err = errors.New("0, want at least 1")
		}
		return err
	case KindZero:
		n, err := natural(v)
		if err == nil && n != 0 {
			err = fmt.Errorf("%d, want 0", n)
		}
		return err
	case KindMS:
		num, ok := v.(json.Number)
		if !ok {
			return fmt.Errorf("%s, want a duration in milliseconds", describe(v))
		}
		f, err := num.Float64()
		if err != nil || f < 0 {
			return fmt.Errorf("%s, want a duration of 0 ms or more", num)
		}
		return nil
	case KindText:
		if s, ok := v.(string); !ok || strings.TrimSpace(s) == "" {
			return fmt.Errorf("%s, want a non-empty string", describe(v))
		}
		return nil
	case KindList:
		if l, ok := v.([]any); !ok || len(l) == 0 {
			return fmt.Errorf("%s, want a non-empty list", describe(v))
		}
		return nil
	}
	if other, ok := strings.CutPrefix(string(k), string(KindOffset)+"="); ok {
		got, err := natural(v)
		if err != nil {
			return err
		}
		ov, ok := all[other]
		if !ok {
			return fmt.Errorf("it must equal %q, which is missing", other)
		}
		var want uint64
		if _, isList := ov.([]any); isList {
			var offs []uint64
			if offs, err = offsets(ov); err == nil {
				want = offs[0]
			}
		} else {
			want, err = natural(ov)
		}
		if err != nil {
			return fmt.Errorf("it must equal %q: %v", other, err)
		}
		if got != want {
			return fmt.Errorf("%d, but %q is %d: they must be equal", got, other, want)
		}
		return nil
	}
	if prev, ok := strings.CutPrefix(string(k), string(KindOffsets)+"+"); ok {
		got, err := offsets(v)
		if err != nil {
			return err
		}
		pv, ok := all[prev]
		if !ok {
			return fmt.Errorf("it continues %q, which is missing", prev)
		}
		before, err := offsets(pv)
		if err != nil {
			return fmt.Errorf("it continues %q: %v", prev, err)
		}
		if last := before[len(before)-1]; got[0] != last+1 {
			return fmt.Errorf("starts at %d after %q ended at %d: %s", got[0], prev, last, gapOrRepeat(got[0], last))
		}
		return nil
	}
	return fmt.Errorf("unknown kind %q", k)
}

func gapOrRepeat(first, last uint64) string {
	if first <= last {
		return "a repeat"
	}
	return "a gap"
}

// natural returns v as a non-negative integer.
func natural(v any) (uint64, error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s, want an integer", describe(v))
	}
	var n uint64
	if _, err := fmt.Sscan(num.String(), &n); err != nil || fmt.Sprint(n) != num.String() {
		return 0, fmt.Errorf("%s, want an integer of 0 or more", num)
	}
	return n, nil
}

// offsets returns v as a non-empty contiguous list of offsets.
func offsets(v any) ([]uint64, error) {
	l, ok := v.([]any)
	if !ok || len(l) == 0 {
		return nil, fmt.Errorf("%s, want a non-empty list of offsets", describe(v))
	}
	out := make([]uint64, len(l))
	for i, e := range l {
		n, err := natural(e)
		if err != nil {
			return nil, fmt.Errorf("element %d: %v", i, err)
		}
		if i > 0 && n != out[i-1]+1 {
			return nil, fmt.Errorf("offset %d follows %d: %s, want contiguous offsets", n, out[i-1], gapOrRepeat(n, out[i-1]))
		}
		out[i] = n
	}
	return out, nil
}

// describe names a normalized value for an error.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("%q", v)
	case []any:
		return fmt.Sprintf("a list of %d", len(v))
	case map[string]any:
		return "an object"
	case bool:
		return fmt.Sprint(v)
	}
	return fmt.Sprint(v)
}

// validKind reports whether k is a kind the checker knows; an "offsets+NAME"
// kind must name another observation of kind offsets in decl.
func validKind(k Kind, decl map[string]Kind) error {
	switch k {
	case KindOffsets, KindOffset, KindCount, KindZero, KindMS, KindText, KindList:
		return nil
	}
	if other, ok := strings.CutPrefix(string(k), string(KindOffset)+"="); ok {
		switch dk := decl[other]; {
		case dk == KindOffset, dk == KindOffsets, strings.HasPrefix(string(dk), string(KindOffsets)+"+"):
			return nil
		}
		return fmt.Errorf("kind %q compares with %q, which is not an observation of kind offset or offsets", k, other)
	}
	if prev, ok := strings.CutPrefix(string(k), string(KindOffsets)+"+"); ok {
		if decl[prev] != KindOffsets {
			return fmt.Errorf("kind %q continues %q, which is not an observation of kind offsets", k, prev)
		}
		return nil
	}
	return fmt.Errorf("unknown kind %q", k)
}
