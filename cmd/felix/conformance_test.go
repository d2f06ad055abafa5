package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flxproto/felix/conformance"
)

func TestConformanceScenarios(t *testing.T) {
	code, stdout, stderr := felixRun(t, "", "conformance", "scenarios")
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || stderr != "" || len(lines) != 63 {
		t.Fatalf("code %d, %d lines, stderr %q", code, len(lines), stderr)
	}
	if !strings.HasPrefix(lines[0], "pubsub.roundtrip ") || !strings.Contains(lines[0], " required ") {
		t.Fatalf("first line %q", lines[0])
	}
	if !strings.Contains(stdout, "(publish, drop after 3 of 10, hold 8000 ms)") {
		t.Fatalf("fault steps not listed:\n%s", stdout)
	}
	code, stdout, _ = felixRun(t, "", "conformance", "scenarios", "-required")
	lines = strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || len(lines) != 49 || strings.Contains(stdout, "optional") {
		t.Fatalf("-required: code %d, %d lines", code, len(lines))
	}
	code, stdout, _ = felixRun(t, "", "conformance", "scenarios", "-json")
	var list []conformance.Scenario
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || code != 0 || len(list) != 63 {
		t.Fatalf("-json: code %d, %d scenarios, %v", code, len(list), err)
	}
	code, stdout, _ = felixRun(t, "", "conformance", "scenarios", "-json", "-required")
	list = nil
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || code != 0 || len(list) != 49 {
		t.Fatalf("-json -required: code %d, %d scenarios, %v", code, len(list), err)
	}
	s, _ := conformance.Lookup("fault.cache_through_a_reset_link")
	for _, l := range list {
		if l.ID == s.ID && (l.Step == nil || *l.Step != *s.Step) {
			t.Fatalf("-json step of %s = %+v", s.ID, l.Step)
		}
	}
}

func TestConformanceVerify(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, res conformance.Results) string {
		p := filepath.Join(dir, name)
		if err := res.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Every scenario passing with its evidence (the conformance package
	// keeps the file in step with the catalogue).
	proven, err := conformance.LoadResults(filepath.Join("..", "..", "conformance", "testdata", "passing-results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all []conformance.Outcome
	for _, o := range proven.Outcomes {
		if s, _ := conformance.Lookup(o.ID); s.Required {
			all = append(all, o)
		}
	}
	good := write("good.json", conformance.Results{Format: conformance.ResultsFormat, Client: "felix-go", Version: "t", Outcomes: all})
	code, stdout, stderr := felixRun(t, "", "conformance", "verify", good)
	if code != 0 || stderr != "" || !strings.HasSuffix(stdout, "\nCONFORMANT\n") || !strings.Contains(stdout, "passed: 49\n") {
		t.Fatalf("conformant: code %d\n%s%s", code, stdout, stderr)
	}
	// A hand-written file marking all 63 ids pass, without evidence, is
	// not conformant: every pass is unproven, and a -passing id that is
	// unproven is a regression.
	var bare []conformance.Outcome
	for _, s := range conformance.Scenarios() {
		bare = append(bare, conformance.Outcome{ID: s.ID, Status: "pass"})
	}
	claimed := write("claimed.json", conformance.Results{Client: "felix-go", Version: "t", Outcomes: bare})
	code, stdout, _ = felixRun(t, "", "conformance", "verify", claimed)
	if code != 1 || !strings.HasSuffix(stdout, "\nNOT CONFORMANT\n") || !strings.Contains(stdout, "\npassed: 0\n") ||
		!strings.Contains(stdout, "\npasses without evidence: 63\n") ||
		!strings.Contains(stdout, "\nUNPROVEN [required] fault.subscription_through_a_dropped_link a subscription through a dropped link: "+
			"fault.subscription_through_a_dropped_link records no observation (wants after, before, resumed_at, resumes)\n") {
		t.Fatalf("ids without evidence: code %d\n%s", code, stdout)
	}
	ids := filepath.Join(dir, "ids.txt")
	os.WriteFile(ids, []byte("fault.subscription_through_a_reset_link\n"), 0o644)
	code, stdout, _ = felixRun(t, "", "conformance", "verify", "-passing", ids, claimed)
	if code != 3 || !strings.Contains(stdout, "REGRESSION fault.subscription_through_a_reset_link a subscription through a reset link: pass without evidence: ") {
		t.Fatalf("-passing, ids without evidence: code %d\n%s", code, stdout)
	}
	bad := write("bad.json", conformance.Results{Client: "felix-go", Version: "t", Outcomes: all[1:]})
	code, stdout, _ = felixRun(t, "", "conformance", "verify", bad)
	if code != 1 || !strings.HasSuffix(stdout, "\nNOT CONFORMANT\n") ||
		!strings.Contains(stdout, "\nMISSING [required] pubsub.roundtrip ") {
		t.Fatalf("not conformant: code %d\n%s", code, stdout)
	}
	// Standard input.
	data, _ := os.ReadFile(good)
	code, stdout, _ = felixRun(t, string(data), "conformance", "verify", "-")
	if code != 0 || !strings.HasSuffix(stdout, "\nCONFORMANT\n") {
		t.Fatalf("stdin: code %d\n%s", code, stdout)
	}
	// A document with no outcomes is refused: graded NOT CONFORMANT.
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte(`{"client":"x","version":"1","outcomes":[]}`), 0o644)
	code, stdout, _ = felixRun(t, "", "conformance", "verify", empty)
	if code != 1 || !strings.Contains(stdout, "no outcomes") || !strings.HasSuffix(stdout, "\nNOT CONFORMANT\n") {
		t.Fatalf("empty: code %d\n%s", code, stdout)
	}
	// Unreadable or malformed documents and usage mistakes exit 2.
	garbage := filepath.Join(dir, "garbage.json")
	os.WriteFile(garbage, []byte(`{"outcomes": [`), 0o644)
	for _, args := range [][]string{
		{"conformance", "verify", filepath.Join(dir, "absent.json")},
		{"conformance", "verify", garbage},
		{"conformance", "verify"},
		{"conformance", "verify", good, good},
		{"conformance"},
		{"conformance", "frob"},
		{"conformance", "scenarios", "extra"},
		{"conformance", "scenarios", "-bogus"},
	} {
		code, stdout, stderr := felixRun(t, "", args...)
		if code != 2 || stdout != "" {
			t.Errorf("%v: code %d stdout %q", args, code, stdout)
		}
		oneErrLine(t, stderr)
	}
	// -passing: a listed scenario that did not pass is a regression (exit 3).
	list := filepath.Join(dir, "passing.txt")
	os.WriteFile(list, []byte("# must pass\npubsub.order\n\ncache.put_get\n"), 0o644)
	code, stdout, _ = felixRun(t, "", "conformance", "verify", "-passing", list, good)
	if code != 0 || strings.Contains(stdout, "REGRESSION") {
		t.Fatalf("-passing, all pass: code %d\n%s", code, stdout)
	}
	regressed := write("regressed.json", conformance.Results{Client: "c", Version: "v", Outcomes: []conformance.Outcome{
		{ID: "pubsub.order", Status: "fail", Detail: "out of order"}}})
	code, stdout, stderr = felixRun(t, "", "conformance", "verify", "-passing", list, regressed)
	if code != 3 || !strings.Contains(stdout, "REGRESSION pubsub.order records arrive in publish order: fail out of order\n") ||
		!strings.Contains(stdout, "REGRESSION cache.put_get a cache put reads back: absent\n") {
		t.Fatalf("-passing, regressed: code %d\n%s", code, stdout)
	}
	oneErrLine(t, stderr)
	code, _, stderr = felixRun(t, "", "conformance", "verify", "-passing", filepath.Join(dir, "nope.txt"), good)
	if code != 2 {
		t.Fatalf("-passing of a missing file: code %d", code)
	}
	oneErrLine(t, stderr)

	code, stdout, _ = felixRun(t, "", "conformance", "-h")
	if code != 0 || !strings.Contains(stdout, "conformance scenarios") {
		t.Fatalf("-h: %d %q", code, stdout)
	}
}
