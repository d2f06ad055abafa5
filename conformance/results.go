package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Outcome statuses.
const (
	StatusPass = "pass"
	StatusFail = "fail"
	StatusSkip = "skip"
)

// ResultsFormat is the version of the results document this package
// writes and the newest it grades. Format 1 (the member absent) is
// upstream's document: ids and statuses only, so its passes carry no
// evidence and grade as unproven. Format 2 adds each pass's evidence
// (Outcome.Evidence).
const ResultsFormat = 2

// Results is the results document a suite writes: the client, its version,
// and one outcome per scenario it ran.
type Results struct {
	// Format is the document's format (ResultsFormat when written by a
	// Recorder; 0 or 1 for upstream's document, which has no such
	// member).
	Format int `json:"format,omitempty"`
	// Client names the client binding, e.g. "felix-go".
	Client string `json:"client"`
	// Version is the client's version.
	Version string `json:"version"`
	// Outcomes are the scenario results.
	Outcomes []Outcome `json:"outcomes"`
}

// Outcome is the result of one scenario.
type Outcome struct {
	// ID is the scenario id.
	ID string `json:"id"`
	// Status is StatusPass, StatusFail or StatusSkip.
	Status string `json:"status"`
	// Detail says why a scenario failed or was skipped; a skip needs one.
	Detail string `json:"detail,omitempty"`
	// Evidence is what the test observed, for a pass: the observations
	// its scenario names (Scenario.Evidence), checked by CheckEvidence. A
	// pass without it is graded unproven, not passed.
	Evidence Evidence `json:"evidence,omitempty"`
}

// ReadResults decodes a results document from r.
func ReadResults(r io.Reader) (Results, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Results{}, err
	}
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		return Results{}, fmt.Errorf("conformance: results document: %w", err)
	}
	return res, nil
}

// LoadResults reads the results document at path.
func LoadResults(path string) (Results, error) {
	f, err := os.Open(path)
	if err != nil {
		return Results{}, err
	}
	defer f.Close()
	res, err := ReadResults(f)
	if err != nil {
		return Results{}, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}

// Write encodes r to w as indented JSON followed by a newline (no HTML
// escaping: evidence reads as recorded).
func (r Results) Write(w io.Writer) error {
	if r.Outcomes == nil {
		r.Outcomes = []Outcome{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // evidence text such as "<nil>" stays readable
	return enc.Encode(r)
}

// WriteFile writes r to path, replacing the file atomically where the
// file system allows (a temporary file in the same directory is renamed).
func (r Results) WriteFile(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".results-*.json")
	if err != nil {
		return err
	}
	if err := r.Write(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

// Recorder collects outcomes from tests that may run in parallel. The zero
// value is not usable; call NewRecorder.
type Recorder struct {
	mu       sync.Mutex
	client   string
	version  string
	order    []string
	outcomes map[string]Outcome
}

// NewRecorder returns a Recorder for the named client and version.
func NewRecorder(client, version string) *Recorder {
	return &Recorder{client: client, version: version, outcomes: make(map[string]Outcome)}
}

// Record stores outcome o. A second outcome for the same id replaces the
// first, except that a failure is never replaced by a pass or a skip. It
// refuses an id the catalogue lacks, a status other than pass, fail or
// skip, a skip without a detail, and a pass without the evidence its
// scenario asks for (CheckEvidence; the error wraps ErrNoEvidence).
func (r *Recorder) Record(o Outcome) error {
	if _, ok := Lookup(o.ID); !ok {
		return fmt.Errorf("conformance: record %q: not a scenario of the catalogue", o.ID)
	}
	switch o.Status {
	case StatusPass:
		if err := CheckEvidence(o.ID, o.Evidence); err != nil {
			return fmt.Errorf("conformance: record %q: %w", o.ID, err)
		}
	case StatusFail:
	case StatusSkip:
		if o.Detail == "" {
			return fmt.Errorf("conformance: record %q: a skip needs a detail", o.ID)
		}
	default:
		return fmt.Errorf("conformance: record %q: status %q is not pass, fail or skip", o.ID, o.Status)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, seen := r.outcomes[o.ID]
	if !seen {
		r.order = append(r.order, o.ID)
	} else if prev.Status == StatusFail && o.Status != StatusFail {
		return nil
	}
	r.outcomes[o.ID] = o
	return nil
}

// Pass records that scenario id passed, with what its test observed. It
// refuses evidence that lacks an observation the scenario names, or has
// one of the wrong kind.
func (r *Recorder) Pass(id string, ev Evidence) error {
	return r.Record(Outcome{ID: id, Status: StatusPass, Evidence: ev})
}

// Fail records that scenario id failed, with why.
func (r *Recorder) Fail(id, detail string) error {
	return r.Record(Outcome{ID: id, Status: StatusFail, Detail: detail})
}

// Skip records that scenario id was not run, with the reason.
func (r *Recorder) Skip(id, reason string) error {
	return r.Record(Outcome{ID: id, Status: StatusSkip, Detail: reason})
}

// Results returns the document recorded so far, outcomes in the order
// their ids were first recorded.
func (r *Recorder) Results() Results {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Results{Format: ResultsFormat, Client: r.client, Version: r.version, Outcomes: make([]Outcome, 0, len(r.order))}
	for _, id := range r.order {
		res.Outcomes = append(res.Outcomes, r.outcomes[id])
	}
	return res
}

// WriteFile writes the document recorded so far to path.
func (r *Recorder) WriteFile(path string) error {
	return r.Results().WriteFile(path)
}

// TB is the part of *testing.T that Track uses.
type TB interface {
	Name() string
	Failed() bool
	Skipped() bool
	Cleanup(func())
}

// Track records the outcome of scenario id when test t ends: fail if t
// failed; otherwise the outcome recorded explicitly during the test (Pass
// with its evidence, or Skip with its reason); skip if t was skipped
// without one; and fail if t returned without recording anything — a
// test that merely did not fail has proven nothing. Track reports an id
// the catalogue lacks at once.
//
//	func TestPubsubOrder(t *testing.T) {
//		rec.Track(t, "pubsub.order")
//		...
//		rec.Pass("pubsub.order", conformance.Evidence{"delivered": offsets, "records": n})
//	}
func (r *Recorder) Track(t TB, id string) error {
	if _, ok := Lookup(id); !ok {
		return fmt.Errorf("conformance: track %q: not a scenario of the catalogue", id)
	}
	t.Cleanup(func() {
		r.mu.Lock()
		_, explicit := r.outcomes[id]
		r.mu.Unlock()
		switch {
		case t.Failed():
			_ = r.Fail(id, "test "+t.Name()+" failed")
		case explicit:
		case t.Skipped():
			_ = r.Skip(id, "test "+t.Name()+" was skipped")
		default:
			_ = r.Fail(id, "test "+t.Name()+" returned without recording a pass and its evidence")
		}
	})
	return nil
}
