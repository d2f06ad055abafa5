package conformance

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Scenario is one behaviour of the client catalogue.
type Scenario struct {
	// ID is the stable scenario id, e.g. "pubsub.roundtrip".
	ID string `json:"id"`
	// Group is the catalogue section the scenario belongs to.
	Group string `json:"group"`
	// Title is a short name printed by the verifier.
	Title string `json:"title"`
	// Required reports whether a conformant client must pass it.
	Required bool `json:"required"`
	// Holds says what must hold for the scenario to pass.
	Holds string `json:"holds"`
	// Step is the fault to inject, for the connection-fault scenarios;
	// nil for every other scenario.
	Step *Step `json:"step,omitempty"`
	// Evidence names the observations a pass of the scenario must carry,
	// each with its kind (see CheckEvidence). It is this repository's
	// grading rule, not upstream's catalogue: upstream's results documents
	// carry no evidence.
	Evidence map[string]Kind `json:"evidence"`
}

// Step is a connection-fault step: what the suite does while the link
// interposer injects Fault.
type Step struct {
	// During is "publish", "subscribe" or "cache".
	During string `json:"during"`
	// Fault is the link fault: "drop", "reset" or "stall".
	Fault string `json:"fault"`
	// AfterRecords is the number of records (or cache rounds) completed
	// before the fault is injected.
	AfterRecords int `json:"after_records"`
	// Records is the number of records (or cache rounds) in the step.
	Records int `json:"records"`
	// HoldMS is how long a drop or stall lasts, in milliseconds; 0 for a
	// reset.
	HoldMS int `json:"hold_ms"`
}

// Step During values.
const (
	DuringPublish   = "publish"
	DuringSubscribe = "subscribe"
	DuringCache     = "cache"
)

// Link fault names, as POST /link takes them.
const (
	FaultDrop  = "drop"
	FaultReset = "reset"
	FaultStall = "stall"
)

// CatalogueVersion is the version of the upstream catalogue restated here.
const CatalogueVersion = 1

//go:embed catalogue.json
var catalogueJSON []byte

var (
	catalogue []Scenario
	byID      map[string]int
)

func init() {
	if err := json.Unmarshal(catalogueJSON, &catalogue); err != nil {
		panic(fmt.Sprintf("conformance: embedded catalogue: %v", err))
	}
	byID = make(map[string]int, len(catalogue))
	for i, s := range catalogue {
		if _, dup := byID[s.ID]; dup {
			panic("conformance: embedded catalogue repeats id " + s.ID)
		}
		byID[s.ID] = i
		if len(s.Evidence) == 0 {
			panic("conformance: embedded catalogue: " + s.ID + " names no evidence")
		}
		for name, k := range s.Evidence {
			if err := validKind(k, s.Evidence); err != nil {
				panic(fmt.Sprintf("conformance: embedded catalogue: %s: evidence %q: %v", s.ID, name, err))
			}
		}
	}
}

// Scenarios returns the catalogue in its published order. The slice and
// its steps are copies: changing them does not change the catalogue.
func Scenarios() []Scenario {
	out := slices.Clone(catalogue)
	for i := range out {
		out[i].Step = cloneStep(out[i].Step)
		out[i].Evidence = maps.Clone(out[i].Evidence)
	}
	return out
}

// Lookup returns the scenario with the given id.
func Lookup(id string) (Scenario, bool) {
	i, ok := byID[id]
	if !ok {
		return Scenario{}, false
	}
	s := catalogue[i]
	s.Step = cloneStep(s.Step)
	s.Evidence = maps.Clone(s.Evidence)
	return s, true
}

// Faults returns the fault scenarios' steps in the fixture's "faults"
// form, in catalogue order.
func Faults() []FaultStep {
	var out []FaultStep
	for _, s := range catalogue {
		if s.Step != nil {
			out = append(out, FaultStep{ID: s.ID, Step: *s.Step})
		}
	}
	return out
}

func cloneStep(s *Step) *Step {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}
