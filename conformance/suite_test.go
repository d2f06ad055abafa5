package conformance_test

// The scenario-tagged conformance suite: one Go test per catalogue
// scenario, named after its id (dots become underscores), written against
// the public API only — the cluster-aware client (package client), the
// client a user should use, and conn.Client where a scenario is about the
// single-connection building block — run against a fixture cluster:
//
//   - by default an in-process reference cluster (internal/broker/cluster)
//     with its control endpoint and link interposer;
//   - or the cluster described by the fixture file named in FELIX_FIXTURE
//     (upstream's format: conformance.LoadFixture); the control endpoint's
//     bearer token is the file's control_token, else FELIX_CONTROL_TOKEN.
//
// When FELIX_CONFORMANCE_RESULTS names a file, the results document is
// written there after the run, for `felix conformance verify`. A scenario
// no test recorded is recorded from the pending table (pending_test.go) as
// a skip with its reason, or left missing.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/internal/broker/cluster"
	"go.uber.org/goleak"
)

// Client and Version name the client in the results document.
const (
	Client  = "felix-go"
	Version = "0.1.0"
)

var (
	fixture  *conformance.Fixture
	recorder = conformance.NewRecorder(Client, Version)
	// inProcess is the in-process cluster (nil with FELIX_FIXTURE).
	inProcess *cluster.Cluster
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if path := os.Getenv("FELIX_FIXTURE"); path != "" {
		f, err := conformance.LoadFixture(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "conformance suite:", err)
			return 2
		}
		if f.ControlToken == "" {
			f.ControlToken = os.Getenv("FELIX_CONTROL_TOKEN")
		}
		fixture = f
	} else {
		c, err := cluster.Start(context.Background(), cluster.Config{Nodes: 3})
		if err != nil {
			fmt.Fprintln(os.Stderr, "conformance suite: start the cluster:", err)
			return 2
		}
		if _, err := c.ServeControl("127.0.0.1:0"); err != nil {
			c.Close()
			fmt.Fprintln(os.Stderr, "conformance suite:", err)
			return 2
		}
		f := c.Fixture()
		fixture, inProcess = &f, c
	}
	code := m.Run()
	// Control requests keep connections to the control endpoint alive.
	http.DefaultClient.CloseIdleConnections()
	if inProcess != nil {
		if err := inProcess.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "conformance suite: close the cluster:", err)
			code = max(code, 1)
		}
	}
	recordPending()
	if out := os.Getenv("FELIX_CONFORMANCE_RESULTS"); out != "" {
		if err := recorder.WriteFile(out); err != nil {
			fmt.Fprintln(os.Stderr, "conformance suite: write results:", err)
			code = max(code, 1)
		}
	}
	// Keep-alive connections to an external fixture's control endpoint
	// outlive the suite; they are the HTTP client's, not a leak.
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "conformance suite: goroutine leak:", err)
			code = 1
		}
	}
	return code
}

// recordPending records, for every scenario no test recorded, the skip of
// the pending table. Scenarios in neither stay missing.
func recordPending() {
	seen := make(map[string]bool)
	for _, o := range recorder.Results().Outcomes {
		seen[o.ID] = true
	}
	for _, s := range conformance.Scenarios() {
		if reason, ok := pending[s.ID]; ok && !seen[s.ID] {
			if err := recorder.Skip(s.ID, reason); err != nil {
				fmt.Fprintln(os.Stderr, "conformance suite:", err)
			}
		}
	}
}
