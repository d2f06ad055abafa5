package conformance

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sampleEvidence returns well-formed evidence for scenario s: one value of
// each observation's kind.
func sampleEvidence(s Scenario) Evidence {
	ev := Evidence{}
	for _, name := range s.evidenceNames() {
		switch k := s.Evidence[name]; k {
		case KindOffsets:
			ev[name] = []uint64{10, 11, 12}
		case KindOffset:
			ev[name] = uint64(7)
		case KindCount:
			ev[name] = 2
		case KindZero:
			ev[name] = 0
		case KindMS:
			ev[name] = 12.5
		case KindText:
			ev[name] = "observed"
		case KindList:
			ev[name] = []string{"a"}
		default:
			if strings.HasPrefix(string(k), "offset=") { // the first of every offsets sample, or the offset sample
				switch tk := s.Evidence[strings.TrimPrefix(string(k), "offset=")]; tk {
				case KindOffset:
					ev[name] = 7
				case KindOffsets:
					ev[name] = 10
				default: // offsets+NAME
					ev[name] = 13
				}
			} else { // offsets+NAME; NAME is 10, 11, 12
				ev[name] = []uint64{13, 14}
			}
		}
	}
	return ev
}

// pass is a pass of id with sample evidence.
func pass(id string) Outcome {
	s, _ := Lookup(id)
	return Outcome{ID: id, Status: StatusPass, Evidence: sampleEvidence(s)}
}

// requiredPassing builds a document: every required scenario passes, with
// its evidence.
func requiredPassing() []Outcome {
	var out []Outcome
	for _, s := range Scenarios() {
		if s.Required {
			out = append(out, pass(s.ID))
		}
	}
	return out
}

func allPassing() []Outcome {
	var out []Outcome
	for _, s := range Scenarios() {
		out = append(out, pass(s.ID))
	}
	return out
}

// set gives id the status and detail (a pass with sample evidence).
func set(out []Outcome, id, status, detail string) []Outcome {
	o := Outcome{ID: id, Status: status, Detail: detail}
	if status == StatusPass {
		o.Evidence = pass(id).Evidence
	}
	for i := range out {
		if out[i].ID == id {
			out[i] = o
			return out
		}
	}
	return append(out, o)
}

// withEvidence replaces the evidence of id's outcome.
func withEvidence(out []Outcome, id string, ev Evidence) []Outcome {
	for i := range out {
		if out[i].ID == id {
			out[i].Evidence = ev
			return out
		}
	}
	panic("withEvidence: no " + id)
}

// bare is every scenario marked pass without evidence: the hand-written
// document that must not be conformant.
func bare() []Outcome {
	var out []Outcome
	for _, s := range Scenarios() {
		out = append(out, Outcome{ID: s.ID, Status: StatusPass})
	}
	return out
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
	type counts struct{ passed, failed, unproven, reqMissing, reqSkipped, optNotRun, unknown int }
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
		{name: "a newer format is refused", outcomes: allPassing(), refused: "results format 3"},
		{name: "every scenario marked pass without evidence is not conformant", outcomes: bare(),
			counts: counts{unproven: 63}, lines: unprovenLines(bare())},
		{name: "a pass missing one observation is unproven",
			outcomes: withEvidence(allPassing(), "fault.subscription_through_a_dropped_link",
				Evidence{"before": []uint64{3, 4, 5}, "after": []uint64{6, 7}, "resumed_at": 6}),
			counts: counts{passed: 62, unproven: 1},
			lines: []string{`UNPROVEN [required] fault.subscription_through_a_dropped_link a subscription through a dropped link: ` +
				`fault.subscription_through_a_dropped_link lacks observation "resumes" (count)`}},
		{name: "a resume that says it started elsewhere is unproven",
			outcomes: withEvidence(allPassing(), "fault.subscription_through_a_dropped_link",
				Evidence{"before": []uint64{3, 4, 5}, "after": []uint64{6, 7}, "resumed_at": 3, "resumes": 1}),
			counts: counts{passed: 62, unproven: 1},
			lines: []string{`UNPROVEN [required] fault.subscription_through_a_dropped_link a subscription through a dropped link: ` +
				`fault.subscription_through_a_dropped_link: observation "resumed_at": 3, but "after" is 6: they must be equal`}},
		{name: "a resume with a gap is unproven",
			outcomes: withEvidence(allPassing(), "fault.subscription_through_a_reset_link",
				Evidence{"before": []uint64{3, 4, 5}, "after": []uint64{7, 8}, "resumed_at": 7, "resumes": 1}),
			counts: counts{passed: 62, unproven: 1},
			lines: []string{`UNPROVEN [required] fault.subscription_through_a_reset_link a subscription through a reset link: ` +
				`fault.subscription_through_a_reset_link: observation "after": starts at 7 after "before" ended at 5: a gap`}},
		{name: "a resume with a repeat is unproven",
			outcomes: withEvidence(allPassing(), "fault.subscription_through_a_reset_link",
				Evidence{"before": []uint64{3, 4, 5}, "after": []uint64{5, 6}, "resumed_at": 5, "resumes": 1}),
			counts: counts{passed: 62, unproven: 1},
			lines: []string{`UNPROVEN [required] fault.subscription_through_a_reset_link a subscription through a reset link: ` +
				`fault.subscription_through_a_reset_link: observation "after": starts at 5 after "before" ended at 5: a repeat`}},
		{name: "a retry that must not happen is unproven",
			outcomes: withEvidence(allPassing(), "retry.terminal_failures_are_not_retried",
				Evidence{"code": "forbidden", "retry_class": "fatal", "retries": 1}),
			counts: counts{passed: 62, unproven: 1},
			lines: []string{`UNPROVEN [required] retry.terminal_failures_are_not_retried terminal failures are reported at once: ` +
				`retry.terminal_failures_are_not_retried: observation "retries": 1, want 0`}},
		{name: "an unproven pass next to a proven one is a pass",
			outcomes: append(allPassing(), Outcome{ID: "pubsub.order", Status: StatusPass}),
			counts:   counts{passed: 63}, conformant: true},
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
			res := Results{Client: "felix-go", Version: "t", Outcomes: c.outcomes}
			if strings.Contains(c.refused, "format") {
				res.Format = ResultsFormat + 1
			}
			rep := Verify(res)
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
			got := counts{rep.Passed, rep.Failed, rep.Unproven, rep.RequiredMissing, rep.RequiredSkipped, rep.OptionalNotRun, rep.Unknown}
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
				"passed: ", "failed: ", "passes without evidence: ", "required missing: ", "required skipped: ", "optional not run: ",
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
passes without evidence: 0
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

// unprovenLines are the UNPROVEN lines of a document of bare passes.
func unprovenLines(out []Outcome) []string {
	var lines []string
	for _, o := range out {
		s, _ := Lookup(o.ID)
		kind := "optional"
		if s.Required {
			kind = "required"
		}
		lines = append(lines, "UNPROVEN ["+kind+"] "+s.ID+" "+s.Title+": "+s.ID+" records no observation (wants "+
			strings.Join(s.evidenceNames(), ", ")+")")
	}
	return lines
}

func TestRegressions(t *testing.T) {
	res := Results{Outcomes: []Outcome{
		pass("pubsub.order"),
		{ID: "pubsub.roundtrip", Status: StatusPass},
		pass("cache.put_get"),
		{ID: "cache.put_get", Status: StatusFail, Detail: "second run"},
		{ID: "cache.ttl_expires", Status: StatusSkip, Detail: "no clock"},
	}}
	got := Regressions(res, []string{"pubsub.order", "cache.put_get", "cache.ttl_expires", "pubsub.roundtrip", "pubsub.start_earliest", "x.y"})
	want := []string{
		"REGRESSION cache.put_get a cache put reads back: fail second run",
		"REGRESSION cache.ttl_expires a value expires after its TTL: skip no clock",
		"REGRESSION pubsub.roundtrip a published record comes back unchanged: pass without evidence: " +
			"pubsub.roundtrip records no observation (wants offset, payload_bytes)",
		"REGRESSION pubsub.start_earliest earliest means the oldest retained record: absent",
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

// TestPassingResultsFile keeps testdata/passing-results.json, a document
// in which every scenario passes with well-formed evidence (the CLI's
// tests grade it), in step with the catalogue: regenerate it with
// UPDATE_TESTDATA=1.
func TestPassingResultsFile(t *testing.T) {
	path := filepath.Join("testdata", "passing-results.json")
	want := Results{Format: ResultsFormat, Client: "felix-go", Version: "example", Outcomes: allPassing()}
	if os.Getenv("UPDATE_TESTDATA") != "" {
		if err := want.WriteFile(path); err != nil {
			t.Fatal(err)
		}
	}
	got, err := LoadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if rep := Verify(got); !rep.Conformant() || rep.Passed != 63 {
		t.Fatalf("%s: %+v", path, rep)
	}
	for i := range want.Outcomes {
		w, _ := normalize(want.Outcomes[i].Evidence)
		g, _ := normalize(got.Outcomes[i].Evidence)
		if !reflect.DeepEqual(w, g) || want.Outcomes[i].ID != got.Outcomes[i].ID {
			t.Fatalf("%s is out of date at %s (UPDATE_TESTDATA=1 regenerates it)", path, want.Outcomes[i].ID)
		}
	}
}
