package conformance

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckKind(t *testing.T) {
	decl := map[string]Kind{"before": KindOffsets}
	cases := []struct {
		kind Kind
		v    any
		bad  string // substring of the error, "" = accepted
	}{
		{KindOffsets, []uint64{4, 5, 6}, ""},
		{KindOffsets, []uint64{0}, ""},
		{KindOffsets, []uint64{}, "non-empty list"},
		{KindOffsets, nil, "non-empty list"},
		{KindOffsets, []uint64{4, 6}, "a gap"},
		{KindOffsets, []uint64{4, 4}, "a repeat"},
		{KindOffsets, []int{4, -5}, "element 1"},
		{KindOffsets, []float64{1.5}, "integer"},
		{KindOffset, uint64(1) << 63, ""},
		{KindOffset, 0, ""},
		{KindOffset, -1, "0 or more"},
		{KindOffset, "7", "want an integer"},
		{KindCount, 1, ""},
		{KindCount, 0, "at least 1"},
		{KindZero, 0, ""},
		{KindZero, 2, "want 0"},
		{KindMS, 0, ""},
		{KindMS, 2.5, ""},
		{KindMS, -1, "0 ms or more"},
		{KindMS, "fast", "milliseconds"},
		{KindText, "forbidden", ""},
		{KindText, " ", "non-empty string"},
		{KindText, 3, "non-empty string"},
		{KindList, []string{"a"}, ""},
		{KindList, []string{}, "non-empty list"},
		{KindList, map[string]int{"a": 1}, "non-empty list"},
		{After("before"), []uint64{13, 14}, ""},
		{After("before"), []uint64{14}, "a gap"},
		{After("before"), []uint64{12, 13}, "a repeat"},
		{After("before"), []uint64{13, 15}, "a gap"},
		{After("missing"), []uint64{13}, `continues "missing"`},
		{Same("before"), 10, ""},
		{Same("before"), 11, "must be equal"},
		{Same("at"), 7, ""},
		{Same("at"), 8, "must be equal"},
		{Same("missing"), 7, `equal "missing"`},
		{Same("before"), "10", "want an integer"},
		{Kind("vibes"), 1, "unknown kind"},
	}
	for _, c := range cases {
		v, err := normalize(c.v)
		if err != nil {
			t.Fatal(err)
		}
		before, _ := normalize([]uint64{10, 11, 12})
		at, _ := normalize(7)
		err = checkKind(c.kind, v, map[string]any{"before": before, "at": at})
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%s %v refused: %v", c.kind, c.v, err)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("%s %v: %v, want an error mentioning %q", c.kind, c.v, err, c.bad)
		}
	}
	if err := validKind(After("before"), decl); err != nil {
		t.Fatal(err)
	}
	decl["at"], decl["text"] = KindOffset, KindText
	for _, k := range []Kind{Same("before"), Same("at")} {
		if err := validKind(k, decl); err != nil {
			t.Errorf("kind %q refused: %v", k, err)
		}
	}
	for _, k := range []Kind{After("after"), After("at"), "offsets+", "nope", Same("text"), Same("nobody")} {
		if validKind(k, decl) == nil {
			t.Errorf("kind %q accepted in a declaration", k)
		}
	}
}

func TestCheckEvidence(t *testing.T) {
	id := "reconnect.subscription_resumes_at_the_next_offset"
	good := Evidence{"killed": "127.0.0.1:1", "before": []uint64{7, 8, 9}, "after": []uint64{10, 11, 12}, "resumed_at": uint64(10),
		"extra": "ignored"}
	if err := CheckEvidence(id, good); err != nil {
		t.Fatal(err)
	}
	for name, ev := range map[string]Evidence{
		"none":     nil,
		"missing":  {"killed": "x", "before": []uint64{7}, "after": []uint64{8}},
		"gap":      {"killed": "x", "before": []uint64{7}, "after": []uint64{9}, "resumed_at": 9},
		"resumed":  {"killed": "x", "before": []uint64{7}, "after": []uint64{8}, "resumed_at": 7},
		"no json":  {"killed": make(chan int), "before": []uint64{7}, "after": []uint64{8}, "resumed_at": 8},
		"wrong ty": {"killed": "x", "before": 7, "after": []uint64{8}, "resumed_at": 8},
	} {
		if err := CheckEvidence(id, ev); !errors.Is(err, ErrNoEvidence) {
			t.Errorf("%s: %v, want ErrNoEvidence", name, err)
		}
	}
	if err := CheckEvidence("no.such", good); err == nil || errors.Is(err, ErrNoEvidence) {
		t.Fatalf("unknown id: %v", err)
	}
	// Every scenario names its evidence, and the kinds are known.
	for _, s := range Scenarios() {
		if len(s.Evidence) == 0 {
			t.Errorf("%s names no evidence", s.ID)
		}
		for n, k := range s.Evidence {
			if err := validKind(k, s.Evidence); err != nil {
				t.Errorf("%s: %s: %v", s.ID, n, err)
			}
		}
	}
}
