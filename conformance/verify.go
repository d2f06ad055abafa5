package conformance

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Report is the verdict on a results document.
type Report struct {
	// Client and Version are copied from the document.
	Client, Version string
	// Refused is why the document could not be graded at all (no
	// outcomes, an outcome without an id, an unknown status, a skip
	// without a detail); nil when it was graded.
	Refused error
	// Passed and Failed count the catalogue scenarios that passed (with
	// their evidence) and failed.
	Passed, Failed int
	// Unproven counts the scenarios reported as passing without the
	// evidence their scenario asks for (CheckEvidence): they count as
	// neither passed nor failed, and make a document not conformant.
	Unproven int
	// RequiredMissing counts required scenarios with no outcome;
	// RequiredSkipped those reported as skipped.
	RequiredMissing, RequiredSkipped int
	// OptionalNotRun counts optional scenarios absent or skipped.
	OptionalNotRun int
	// Unknown counts outcomes whose id the catalogue lacks.
	Unknown int
	// Lines are the FAIL, UNPROVEN, MISSING and UNKNOWN lines, in that
	// order: FAIL, UNPROVEN and MISSING in catalogue order, UNKNOWN in
	// document order.
	Lines []string
}

// ErrRefused is wrapped by every Report.Refused error.
var ErrRefused = errors.New("results document refused")

// Verify grades a results document by the catalogue's verdict rules, and
// one of this repository's: a pass counts only with its evidence. A
// client is conformant when no required scenario is missing, skipped or
// failing, no scenario at all is failing, every pass carries the
// evidence its scenario names (CheckEvidence; a pass without it is
// UNPROVEN), and no outcome names an id the catalogue lacks. A document of
// a newer format than ResultsFormat is refused.
//
// When a document lists a scenario more than once, a failure anywhere is
// a failure; otherwise a pass with its evidence anywhere is a pass.
func Verify(res Results) Report {
	rep := Report{Client: res.Client, Version: res.Version}
	refuse := func(format string, args ...any) Report {
		rep.Refused = fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
		return rep
	}
	if res.Format > ResultsFormat {
		return refuse("it is results format %d; this verifier reads formats up to %d", res.Format, ResultsFormat)
	}
	if len(res.Outcomes) == 0 {
		return refuse("it has no outcomes")
	}
	status := make(map[string]string, len(res.Outcomes))
	why := make(map[string]error) // why an unproven pass is unproven
	unknownSeen := make(map[string]bool)
	var unknown []string
	for i, o := range res.Outcomes {
		if o.ID == "" {
			return refuse("outcome %d has no id", i+1)
		}
		switch o.Status {
		case StatusPass, StatusFail:
		case StatusSkip:
			if o.Detail == "" {
				return refuse("outcome %d (%s) is a skip without a detail", i+1, o.ID)
			}
		default:
			return refuse("outcome %d (%s) has status %q, not pass, fail or skip", i+1, o.ID, o.Status)
		}
		if _, ok := byID[o.ID]; !ok {
			if !unknownSeen[o.ID] {
				unknownSeen[o.ID] = true
				unknown = append(unknown, o.ID)
			}
			continue
		}
		st := o.Status
		if st == StatusPass {
			if err := CheckEvidence(o.ID, o.Evidence); err != nil {
				st = statusUnproven
				if why[o.ID] == nil {
					why[o.ID] = err
				}
			}
		}
		status[o.ID] = worse(status[o.ID], st)
	}
	var fails, unproven, missing []string
	for _, s := range catalogue {
		kind := "optional"
		if s.Required {
			kind = "required"
		}
		switch st, ok := status[s.ID]; {
		case !ok:
			if s.Required {
				rep.RequiredMissing++
				missing = append(missing, fmt.Sprintf("MISSING [required] %s %s", s.ID, s.Title))
			} else {
				rep.OptionalNotRun++
			}
		case st == StatusPass:
			rep.Passed++
		case st == StatusFail:
			rep.Failed++
			fails = append(fails, fmt.Sprintf("FAIL [%s] %s %s", kind, s.ID, s.Title))
		case st == statusUnproven:
			rep.Unproven++
			unproven = append(unproven, fmt.Sprintf("UNPROVEN [%s] %s %s: %s", kind, s.ID, s.Title, evidenceReason(why[s.ID])))
		case st == StatusSkip:
			if s.Required {
				rep.RequiredSkipped++
			} else {
				rep.OptionalNotRun++
			}
		}
	}
	rep.Unknown = len(unknown)
	rep.Lines = append(rep.Lines, fails...)
	rep.Lines = append(rep.Lines, unproven...)
	rep.Lines = append(rep.Lines, missing...)
	for _, id := range unknown {
		rep.Lines = append(rep.Lines, "UNKNOWN scenario "+id)
	}
	return rep
}

// statusUnproven is the grade of a pass without its evidence (never
// written in a document).
const statusUnproven = "unproven"

// evidenceReason is the part of a CheckEvidence error after the sentinel.
func evidenceReason(err error) string {
	if err == nil {
		return "no evidence"
	}
	return strings.TrimPrefix(err.Error(), ErrNoEvidence.Error()+": ")
}

// worse combines two statuses of one scenario: fail beats pass beats an
// unproven pass beats skip.
func worse(a, b string) string {
	rank := func(s string) int {
		switch s {
		case StatusFail:
			return 4
		case StatusPass:
			return 3
		case statusUnproven:
			return 2
		case StatusSkip:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// Conformant reports whether the document was graded and no required
// scenario is missing, skipped or failing, no scenario is failing or
// unproven and no outcome names an unknown id.
func (r Report) Conformant() bool {
	return r.Refused == nil && r.Failed == 0 && r.Unproven == 0 && r.RequiredMissing == 0 &&
		r.RequiredSkipped == 0 && r.Unknown == 0
}

// Verdict is the report's last line: "CONFORMANT" or "NOT CONFORMANT".
func (r Report) Verdict() string {
	if r.Conformant() {
		return "CONFORMANT"
	}
	return "NOT CONFORMANT"
}

// Write prints the report: the client, the counts, the FAIL, UNPROVEN,
// MISSING and UNKNOWN lines, and the verdict as the last line. A refused document is
// reported by its reason and NOT CONFORMANT.
func (r Report) Write(w io.Writer) error {
	var err error
	p := func(format string, args ...any) {
		if err == nil {
			_, err = fmt.Fprintf(w, format, args...)
		}
	}
	if r.Client != "" || r.Version != "" {
		p("client %s %s (catalogue version %d, %d scenarios)\n", r.Client, r.Version, CatalogueVersion, len(catalogue))
	}
	if r.Refused != nil {
		p("%v\n", r.Refused)
	} else {
		p("passed: %d\n", r.Passed)
		p("failed: %d\n", r.Failed)
		p("passes without evidence: %d\n", r.Unproven)
		p("required missing: %d\n", r.RequiredMissing)
		p("required skipped: %d\n", r.RequiredSkipped)
		p("optional not run: %d\n", r.OptionalNotRun)
		for _, l := range r.Lines {
			p("%s\n", l)
		}
	}
	p("%s\n", r.Verdict())
	return err
}

// Regressions returns one line per id of mustPass whose outcome in res is
// not a pass with its evidence ("REGRESSION id title: status detail",
// "REGRESSION id title: pass without evidence: why", or "REGRESSION id:
// absent"); ids the catalogue lacks are reported too. A suite's CI keeps
// the ids that passed once in a file and fails on any line returned.
func Regressions(res Results, mustPass []string) []string {
	grade := func(o Outcome) string {
		if o.Status == StatusPass && CheckEvidence(o.ID, o.Evidence) != nil {
			return statusUnproven
		}
		return o.Status
	}
	status := make(map[string]Outcome, len(res.Outcomes))
	for _, o := range res.Outcomes {
		if prev, ok := status[o.ID]; ok && worse(grade(prev), grade(o)) == grade(prev) {
			continue
		}
		status[o.ID] = o
	}
	var out []string
	for _, id := range mustPass {
		s, known := Lookup(id)
		o, ok := status[id]
		switch {
		case !known:
			out = append(out, fmt.Sprintf("REGRESSION %s: not a scenario of the catalogue", id))
		case !ok:
			out = append(out, fmt.Sprintf("REGRESSION %s %s: absent", id, s.Title))
		case grade(o) == statusUnproven:
			out = append(out, fmt.Sprintf("REGRESSION %s %s: pass without evidence: %s", id, s.Title,
				evidenceReason(CheckEvidence(id, o.Evidence))))
		case o.Status != StatusPass:
			line := fmt.Sprintf("REGRESSION %s %s: %s", id, s.Title, o.Status)
			if o.Detail != "" {
				line += " " + o.Detail
			}
			out = append(out, line)
		}
	}
	return out
}

// ReadIDList reads scenario ids, one per line; blank lines and lines
// starting with # are ignored.
func ReadIDList(r io.Reader) ([]string, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			return nil, fmt.Errorf("conformance: id list: %q is not one id", line)
		}
		ids = append(ids, line)
	}
	return ids, nil
}
