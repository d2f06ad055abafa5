package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

// Fixture describes a fixture cluster to a conformance suite: where the
// brokers are, which credentials and names to use, and, in the optional
// members, which faults the fixture can produce. A suite skips the
// scenarios whose optional members are absent.
//
// The JSON form is upstream's fixture description; members this type does
// not know are ignored when it is read.
type Fixture struct {
	// Addrs are the broker addresses (host:port), at least one.
	Addrs []string `json:"addrs"`
	// TenantID and Namespace name where the fixture's streams and caches
	// live.
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	// Token may publish, subscribe, and read and write caches.
	Token string `json:"token"`
	// UnauthorizedToken authenticates but holds no stream permission.
	UnauthorizedToken string `json:"unauthorized_token"`
	// CAFile is a PEM file with the brokers' certificate; clients verify
	// it. LoadFixture resolves a relative path against the fixture file's
	// directory.
	CAFile string `json:"ca_file"`
	// DurableStream is a durable stream: offsets, resume and order are
	// observable.
	DurableStream string `json:"durable_stream"`
	// Cache is a cache with several shards.
	Cache string `json:"cache"`
	// SingleShardCache is a one-shard cache for prefix and retained
	// watches.
	SingleShardCache string `json:"single_shard_cache"`
	// MissingStream is a stream name that is deliberately not registered.
	MissingStream string `json:"missing_stream"`

	// MovableStream is a single-shard stream the control endpoint fences
	// mid-move (POST /fence).
	MovableStream string `json:"movable_stream,omitempty"`
	// QuorumStream is a single-shard stream whose writes need a majority
	// (POST /partition cuts its leader off).
	QuorumStream string `json:"quorum_stream,omitempty"`
	// ControlURL is the base URL of the control endpoint (POST /fence,
	// /partition, /heal, /link).
	ControlURL string `json:"control_url,omitempty"`
	// ControlToken is the bearer token every request to ControlURL
	// carries (Authorization: Bearer ControlToken), when the control
	// endpoint asks for one (this module's reference cluster always
	// does). It is this module's member, not upstream's: a suite reading
	// another fixture may take it from elsewhere (our suite: the
	// environment variable FELIX_CONTROL_TOKEN). A fixture file holding it
	// is readable by its owner only.
	ControlToken string `json:"control_token,omitempty"`
	// LinkAddr is the link interposer in front of the broker that owns
	// LinkStream; only a client whose only seed is LinkAddr is affected by
	// POST /link.
	LinkAddr string `json:"link_addr,omitempty"`
	// LinkStream is a durable single-shard stream owned by the broker
	// behind the interposer.
	LinkStream string `json:"link_stream,omitempty"`
	// Faults are the catalogue's fault steps, for suites that cannot read
	// the catalogue; [Faults] returns them.
	Faults []FaultStep `json:"faults,omitempty"`
}

// maxControlAnswer bounds the answer Control reads.
const maxControlAnswer = 4 << 20

// Control sends one request to the fixture's control endpoint: method
// (GET or POST) to ControlURL+path, with the bearer token ControlToken
// and, for a POST, body as application/json. It returns the HTTP status
// and the answer (at most 4 MiB of it); err is set when no answer came.
func (f *Fixture) Control(ctx context.Context, method, path string, body []byte) (status int, answer []byte, err error) {
	if f.ControlURL == "" {
		return 0, nil, fmt.Errorf("%w: no control_url", ErrInvalidFixture)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.ControlURL+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if f.ControlToken != "" {
		req.Header.Set("Authorization", "Bearer "+f.ControlToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("conformance: control %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	answer, err = io.ReadAll(io.LimitReader(resp.Body, maxControlAnswer))
	if err != nil {
		return resp.StatusCode, answer, fmt.Errorf("conformance: control %s %s: reading the answer: %w", method, path, err)
	}
	return resp.StatusCode, answer, nil
}

// FaultStep is one fault scenario as the fixture lists it: the scenario
// id and its step.
type FaultStep struct {
	// ID is the fault scenario's id.
	ID string `json:"id"`
	Step
}

// ErrInvalidFixture is the sentinel of every error Validate returns.
var ErrInvalidFixture = errors.New("conformance: invalid fixture")

// LoadFixture reads and validates the fixture description at path. A
// relative ca_file is resolved against the directory of path.
func LoadFixture(path string) (*Fixture, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f Fixture
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidFixture, path, err)
	}
	if f.CAFile != "" && !filepath.IsAbs(f.CAFile) {
		f.CAFile = filepath.Join(filepath.Dir(path), f.CAFile)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// WriteFile validates f and writes it to path as indented JSON, readable
// by its owner only (mode 0600: it holds tokens).
func (f *Fixture) WriteFile(path string) error {
	if err := f.Validate(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Chmod(path, 0o600) // an existing file keeps its mode otherwise
}

// Validate reports the first problem of f: a required member that is
// empty, an address that is not host:port, an optional member that needs
// another one (link_addr needs link_stream and control_url; movable_stream,
// quorum_stream and control_token need control_url), or a fault step that
// is not the catalogue's. The error wraps ErrInvalidFixture.
func (f *Fixture) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidFixture, fmt.Sprintf(format, args...))
	}
	if len(f.Addrs) == 0 {
		return bad("addrs is empty")
	}
	for _, a := range f.Addrs {
		if err := checkHostPort(a); err != nil {
			return bad("addrs: %v", err)
		}
	}
	for _, m := range []struct{ name, v string }{
		{"tenant_id", f.TenantID},
		{"namespace", f.Namespace},
		{"token", f.Token},
		{"unauthorized_token", f.UnauthorizedToken},
		{"ca_file", f.CAFile},
		{"durable_stream", f.DurableStream},
		{"cache", f.Cache},
		{"single_shard_cache", f.SingleShardCache},
		{"missing_stream", f.MissingStream},
	} {
		if m.v == "" {
			return bad("%s is missing or empty", m.name)
		}
	}
	if f.Token == f.UnauthorizedToken {
		return bad("unauthorized_token equals token")
	}
	if f.LinkAddr != "" {
		if err := checkHostPort(f.LinkAddr); err != nil {
			return bad("link_addr: %v", err)
		}
		if f.LinkStream == "" {
			return bad("link_addr is set but link_stream is not")
		}
	}
	if f.LinkStream != "" && f.LinkAddr == "" {
		return bad("link_stream is set but link_addr is not")
	}
	if f.ControlURL == "" {
		for _, m := range []struct{ name, v string }{
			{"movable_stream", f.MovableStream},
			{"quorum_stream", f.QuorumStream},
			{"link_addr", f.LinkAddr},
			{"control_token", f.ControlToken},
		} {
			if m.v != "" {
				return bad("%s is set but control_url is not", m.name)
			}
		}
	}
	seen := make(map[string]bool, len(f.Faults))
	for _, fs := range f.Faults {
		s, ok := Lookup(fs.ID)
		if !ok || s.Step == nil {
			return bad("faults: %q is not a fault scenario of the catalogue", fs.ID)
		}
		if seen[fs.ID] {
			return bad("faults: %q listed twice", fs.ID)
		}
		seen[fs.ID] = true
		if fs.Step != *s.Step {
			return bad("faults: %s: step %+v differs from the catalogue's %+v", fs.ID, fs.Step, *s.Step)
		}
	}
	return nil
}

// checkHostPort reports whether a is host:port with a numeric port.
func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if host == "" {
		return fmt.Errorf("%q has no host", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("%q has no valid port", a)
	}
	return nil
}
