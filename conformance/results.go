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

// Results is the results document a suite writes: the client, its version,
// and one outcome per scenario it ran.
type Results struct {
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

// Write encodes r to w as indented JSON followed by a newline.
func (r Results) Write(w io.Writer) error {
	if r.Outcomes == nil {
		r.Outcomes = []Outcome{}
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
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

// Record stores the outcome of scenario id. A second outcome for the same
// id replaces the first, except that a failure is never replaced by a
// pass or a skip. It refuses an id the catalogue lacks, a status other
// than pass, fail or skip, and a skip without a detail.
func (r *Recorder) Record(id, status, detail string) error {
	if _, ok := Lookup(id); !ok {
		return fmt.Errorf("conformance: record %q: not a scenario of the catalogue", id)
	}
	switch status {
	case StatusPass, StatusFail:
	case StatusSkip:
		if detail == "" {
			return fmt.Errorf("conformance: record %q: a skip needs a detail", id)
		}
	default:
		return fmt.Errorf("conformance: record %q: status %q is not pass, fail or skip", id, status)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, seen := r.outcomes[id]
	if !seen {
		r.order = append(r.order, id)
	} else if prev.Status == StatusFail && status != StatusFail {
		return nil
	}
	r.outcomes[id] = Outcome{ID: id, Status: status, Detail: detail}
	return nil
}

// Pass records that scenario id passed.
func (r *Recorder) Pass(id string) error { return r.Record(id, StatusPass, "") }

// Fail records that scenario id failed, with why.
func (r *Recorder) Fail(id, detail string) error { return r.Record(id, StatusFail, detail) }

// Skip records that scenario id was not run, with the reason.
func (r *Recorder) Skip(id, reason string) error { return r.Record(id, StatusSkip, reason) }

// Results returns the document recorded so far, outcomes in the order
// their ids were first recorded.
func (r *Recorder) Results() Results {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := Results{Client: r.client, Version: r.version, Outcomes: make([]Outcome, 0, len(r.order))}
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
// failed, skip if t was skipped, pass otherwise. An outcome recorded
// explicitly for id during the test (for example Skip with its reason)
// is kept, unless t failed. Track reports an id the catalogue lacks at
// once.
//
//	func TestPubsubOrder(t *testing.T) {
//		rec.Track(t, "pubsub.order")
//		...
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
			_ = r.Record(id, StatusFail, "test "+t.Name()+" failed")
		case explicit:
		case t.Skipped():
			_ = r.Record(id, StatusSkip, "test "+t.Name()+" was skipped")
		default:
			_ = r.Record(id, StatusPass, "")
		}
	})
	return nil
}
