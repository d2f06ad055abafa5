package conformance

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// outcomes builds a document: every required scenario passes, then edit
// changes it.
func requiredPassing() []Outcome {
	var out []Outcome
	for _, s := range Scenarios() {
		if s.Required {
			out = append(out, Outcome{ID: s.ID, Status: StatusPass})
		}
	}
	return out
}

func allPassing() []Outcome {
	var out []Outcome
	for _, s := range Scenarios() {
		out = append(out, Outcome{ID: s.ID, Status: StatusPass})
	}
	return out
}

func set(out []Outcome, id, status, detail string) []Outcome {
	for i := range out {
		if out[i].ID == id {
			out[i].Status, out[i].Detail = status, detail
			return out
		}
	}
	return append(out, Outcome{ID: id, Status: status, Detail: detail})
}

func drop(out []Outcome, id string) []Outcome {
	for i := range out {
		if out[i].ID == id {
			return append(out[:i:i], out[i+1:]...)
		}
	}
	panic("drop: no " + id)
}

func TestVerifyRules(t *testing.T) {
	type counts struct{ passed, failed, reqMissing, reqSkipped, optNotRun, unknown int }
	cases := []struct {
		name       string
		outcomes   []Outcome
		refused    string // substring of the refusal, "" = graded
		counts     counts
		lines      []string
		conformant bool
	}{
		{name: "no outcomes is refused", outcomes: nil, refused: "no outcomes"},
		{name: "empty outcomes is refused", outcomes: []Outcome{}, refused: "no outcomes"},
		{name: "a skip needs a detail", outcomes: set(requiredPassing(), "ack.offset_negotiated", StatusSkip, ""),
			refused: "skip without a detail"},
		{name: "unknown status is refused", outcomes: set(requiredPassing(), "pubsub.order", "ok", ""),
			refused: `status "ok"`},
		{name: "an outcome needs an id", outcomes: append(requiredPassing(), Outcome{Status: StatusPass}),
			refused: "no id"},
		{name: "every required passes, optional absent", outcomes: requiredPassing(),
			counts: counts{passed: 49, optNotRun: 14}, conformant: true},
		{name: "everything passes", outcomes: allPassing(),
			counts: counts{passed: 63}, conformant: true},
		{name: "optional skipped with a reason is fine",
			outcomes:   set(requiredPassing(), "sharded.resumes_per_shard", StatusSkip, "not yet"),
			counts:     counts{passed: 49, optNotRun: 14},
			conformant: true},
		{name: "a required scenario missing",
			outcomes: drop(requiredPassing(), "pubsub.order"),
			counts:   counts{passed: 48, reqMissing: 1, optNotRun: 14},
			lines:    []string{"MISSING [required] pubsub.order records arrive in publish order"}},
		{name: "a required scenario skipped",
			outcomes: set(requiredPassing(), "cache.ttl_expires", StatusSkip, "no clock"),
			counts:   counts{passed: 48, reqSkipped: 1, optNotRun: 14}},
		{name: "a required scenario failing",
			outcomes: set(requiredPassing(), "cache.put_get", StatusFail, "bytes differ"),
			counts:   counts{passed: 48, failed: 1, optNotRun: 14},
			lines:    []string{"FAIL [required] cache.put_get a cache put reads back"}},
		{name: "an optional scenario failing is worse than absent",
			outcomes: set(requiredPassing(), "ack.offset_negotiated", StatusFail, ""),
			counts:   counts{passed: 49, failed: 1, optNotRun: 13},
			lines:    []string{"FAIL [optional] ack.offset_negotiated ack offsets only when offered"}},
		{name: "an unknown id",
			outcomes: set(allPassing(), "pubsub.teleport", StatusPass, ""),
			counts:   counts{passed: 63, unknown: 1},
			lines:    []string{"UNKNOWN scenario pubsub.teleport"}},
		{name: "an unknown id even when skipped, listed once",
			outcomes: append(set(allPassing(), "x.y", StatusSkip, "r"), Outcome{ID: "x.y", Status: StatusFail}),
			counts:   counts{passed: 63, unknown: 1},
			lines:    []string{"UNKNOWN scenario x.y"}},
		{name: "a repeated id: a failure anywhere fails",
			outcomes: append(allPassing(), Outcome{ID: "pubsub.order", Status: StatusFail}),
			counts:   counts{passed: 62, failed: 1},
			lines:    []string{"FAIL [required] pubsub.order records arrive in publish order"}},
		{name: "a repeated id: a pass beats a skip",
			outcomes:   append(allPassing(), Outcome{ID: "pubsub.order", Status: StatusSkip, Detail: "r"}),
			counts:     counts{passed: 63},
			conformant: true},
		{name: "lines: FAIL then MISSING in catalogue order, then UNKNOWN",
			outcomes: set(set(drop(drop(set(requiredPassing(), "zz.top", StatusPass, ""),
				"commit.negotiated"), "pubsub.roundtrip"),
				"watch.resumes_from_an_offset", StatusFail, "x"),
				"cache.put_get", StatusFail, "y"),
			counts: counts{passed: 45, failed: 2, reqMissing: 2, optNotRun: 14, unknown: 1},
			lines: []string{
				"FAIL [required] cache.put_get a cache put reads back",
				"FAIL [required] watch.resumes_from_an_offset a watch resumes from a cache-log offset",
				"MISSING [required] pubsub.roundtrip a published record comes back unchanged",
				"MISSING [required] commit.negotiated commits only to brokers that offer them",
				"UNKNOWN scenario zz.top",
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := Verify(Results{Client: "felix-go", Version: "t", Outcomes: c.outcomes})
			var out bytes.Buffer
			if err := rep.Write(&out); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
			last := lines[len(lines)-1]
			if c.refused != "" {
				if rep.Refused == nil || !errors.Is(rep.Refused, ErrRefused) || !strings.Contains(rep.Refused.Error(), c.refused) {
					t.Fatalf("Refused = %v, want mention of %q", rep.Refused, c.refused)
				}
				if rep.Conformant() || last != "NOT CONFORMANT" || !strings.Contains(text, c.refused) {
					t.Fatalf("refused document reported as:\n%s", text)
				}
				return
			}
			if rep.Refused != nil {
				t.Fatalf("refused: %v", rep.Refused)
			}
			got := counts{rep.Passed, rep.Failed, rep.RequiredMissing, rep.RequiredSkipped, rep.OptionalNotRun, rep.Unknown}
			if got != c.counts {
				t.Errorf("counts %+v, want %+v", got, c.counts)
			}
			if strings.Join(rep.Lines, "\n") != strings.Join(c.lines, "\n") {
				t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(rep.Lines, "\n"), strings.Join(c.lines, "\n"))
			}
			if rep.Conformant() != c.conformant {
				t.Errorf("Conformant() = %v, want %v", rep.Conformant(), c.conformant)
			}
			wantLast := "NOT CONFORMANT"
			if c.conformant {
				wantLast = "CONFORMANT"
			}
			if last != wantLast {
				t.Errorf("last line %q, want %q; report:\n%s", last, wantLast, text)
			}
			for _, want := range []string{
				"passed: ", "failed: ", "required missing: ", "required skipped: ", "optional not run: ",
			} {
				if !strings.Contains(text, "\n"+want) {
					t.Errorf("report lacks %q:\n%s", want, text)
				}
			}
			for _, l := range c.lines {
				if !strings.Contains(text, "\n"+l+"\n") {
					t.Errorf("report lacks line %q", l)
				}
			}
		})
	}
}

func TestReportWriteExact(t *testing.T) {
	out := drop(requiredPassing(), "pubsub.order")
	out = set(out, "cache.ttl_expires", StatusSkip, "no clock")
	out = set(out, "ack.offset_negotiated", StatusFail, "bit set")
	var b bytes.Buffer
	Verify(Results{Client: "felix-go", Version: "0.3.0", Outcomes: out}).Write(&b)
	want := `client felix-go 0.3.0 (catalogue version 1, 63 scenarios)
passed: 47
failed: 1
required missing: 1
required skipped: 1
optional not run: 13
FAIL [optional] ack.offset_negotiated ack offsets only when offered
MISSING [required] pubsub.order records arrive in publish order
NOT CONFORMANT
`
	if b.String() != want {
		t.Fatalf("report:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestRegressions(t *testing.T) {
	res := Results{Outcomes: []Outcome{
		{ID: "pubsub.order", Status: StatusPass},
		{ID: "cache.put_get", Status: StatusPass},
		{ID: "cache.put_get", Status: StatusFail, Detail: "second run"},
		{ID: "cache.ttl_expires", Status: StatusSkip, Detail: "no clock"},
	}}
	got := Regressions(res, []string{"pubsub.order", "cache.put_get", "cache.ttl_expires", "pubsub.roundtrip", "x.y"})
	want := []string{
		"REGRESSION cache.put_get a cache put reads back: fail second run",
		"REGRESSION cache.ttl_expires a value expires after its TTL: skip no clock",
		"REGRESSION pubsub.roundtrip a published record comes back unchanged: absent",
		"REGRESSION x.y: not a scenario of the catalogue",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r := Regressions(res, nil); len(r) != 0 {
		t.Fatalf("empty list: %v", r)
	}
	ids, err := ReadIDList(strings.NewReader("# c\n a.b \n\nc.d\n"))
	if err != nil || strings.Join(ids, ",") != "a.b,c.d" {
		t.Fatalf("ReadIDList = %v, %v", ids, err)
	}
	if _, err := ReadIDList(strings.NewReader("a.b c.d\n")); err == nil {
		t.Fatal("two ids on a line accepted")
	}
}
