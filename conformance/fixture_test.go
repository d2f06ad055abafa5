package conformance

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func validFixture() Fixture {
	return Fixture{
		Addrs:             []string{"127.0.0.1:4433", "127.0.0.1:4434"},
		TenantID:          "t1",
		Namespace:         "ns",
		Token:             "tok",
		UnauthorizedToken: "nobody",
		CAFile:            "/tmp/ca.pem",
		DurableStream:     "durable",
		Cache:             "c",
		SingleShardCache:  "c1",
		MissingStream:     "missing",
	}
}

func TestFixtureJSONMembers(t *testing.T) {
	f := validFixture()
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"addrs", "tenant_id", "namespace", "token", "unauthorized_token", "ca_file",
		"durable_stream", "cache", "single_shard_cache", "missing_stream"} {
		if _, ok := m[k]; !ok {
			t.Errorf("member %s missing from %s", k, data)
		}
	}
	if len(m) != 10 {
		t.Errorf("optional members must be omitted when empty: %s", data)
	}

	f.MovableStream, f.QuorumStream, f.ControlURL = "mv", "q", "http://127.0.0.1:9000"
	f.LinkAddr, f.LinkStream, f.Faults = "127.0.0.1:5000", "link", Faults()
	data, _ = json.Marshal(f)
	m = nil
	json.Unmarshal(data, &m)
	for _, k := range []string{"movable_stream", "quorum_stream", "control_url", "link_addr", "link_stream", "faults"} {
		if _, ok := m[k]; !ok {
			t.Errorf("member %s missing from %s", k, data)
		}
	}
	var faults []map[string]any
	json.Unmarshal(m["faults"], &faults)
	want := map[string]any{"id": "fault.publish_through_a_dropped_link", "during": "publish", "fault": "drop",
		"after_records": 3.0, "records": 10.0, "hold_ms": 8000.0}
	if len(faults) != 7 || !reflect.DeepEqual(faults[0], want) {
		t.Fatalf("faults[0] = %v, want %v", faults[0], want)
	}
}

func TestFixtureValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Fixture)
		want string // "" = valid
	}{
		{"minimal", func(*Fixture) {}, ""},
		{"full", func(f *Fixture) {
			f.MovableStream, f.QuorumStream, f.ControlURL = "mv", "q", "http://x"
			f.LinkAddr, f.LinkStream, f.Faults = "[::1]:5000", "link", Faults()
		}, ""},
		{"no addrs", func(f *Fixture) { f.Addrs = nil }, "addrs is empty"},
		{"bad addr", func(f *Fixture) { f.Addrs = []string{"localhost"} }, "addrs"},
		{"no port", func(f *Fixture) { f.Addrs = []string{"h:0"} }, "valid port"},
		{"no host", func(f *Fixture) { f.Addrs = []string{":4433"} }, "no host"},
		{"tenant", func(f *Fixture) { f.TenantID = "" }, "tenant_id"},
		{"namespace", func(f *Fixture) { f.Namespace = "" }, "namespace"},
		{"token", func(f *Fixture) { f.Token = "" }, "token"},
		{"unauthorized", func(f *Fixture) { f.UnauthorizedToken = "" }, "unauthorized_token"},
		{"same tokens", func(f *Fixture) { f.UnauthorizedToken = f.Token }, "equals token"},
		{"ca", func(f *Fixture) { f.CAFile = "" }, "ca_file"},
		{"durable", func(f *Fixture) { f.DurableStream = "" }, "durable_stream"},
		{"cache", func(f *Fixture) { f.Cache = "" }, "cache is"},
		{"single", func(f *Fixture) { f.SingleShardCache = "" }, "single_shard_cache"},
		{"missing", func(f *Fixture) { f.MissingStream = "" }, "missing_stream"},
		{"link without stream", func(f *Fixture) { f.LinkAddr, f.ControlURL = "127.0.0.1:1", "http://x" }, "link_stream"},
		{"link stream without addr", func(f *Fixture) { f.LinkStream = "l" }, "link_addr"},
		{"bad link addr", func(f *Fixture) { f.LinkAddr, f.LinkStream, f.ControlURL = "nope", "l", "http://x" }, "link_addr"},
		{"link without control", func(f *Fixture) { f.LinkAddr, f.LinkStream = "127.0.0.1:1", "l" }, "control_url"},
		{"movable without control", func(f *Fixture) { f.MovableStream = "m" }, "control_url"},
		{"quorum without control", func(f *Fixture) { f.QuorumStream = "q" }, "control_url"},
		{"control token without control", func(f *Fixture) { f.ControlToken = "secret" }, "control_token is set but control_url"},
		{"unknown fault", func(f *Fixture) { f.Faults = []FaultStep{{ID: "pubsub.order"}} }, "not a fault scenario"},
		{"repeated fault", func(f *Fixture) { f.Faults = append(Faults(), Faults()[0]) }, "twice"},
		{"changed step", func(f *Fixture) {
			f.Faults = Faults()
			f.Faults[2].HoldMS = 1
		}, "differs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := validFixture()
			c.edit(&f)
			err := f.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatalf("valid fixture refused: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalidFixture) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrInvalidFixture mentioning %q", err, c.want)
			}
		})
	}
}

func TestFixtureFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	f := validFixture()
	f.ControlURL, f.ControlToken, f.QuorumStream, f.Faults = "http://127.0.0.1:1", "secret", "q", Faults()
	path := filepath.Join(dir, "f.json")
	if err := os.WriteFile(path, nil, 0o644); err != nil { // an older, world-readable file
		t.Fatal(err)
	}
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the fixture file holds tokens: want mode 0600, got %v (%v)", fi.Mode(), err)
	}
	got, err := LoadFixture(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, f) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v", *got, f)
	}

	// A relative ca_file is relative to the fixture file; unknown members
	// are ignored.
	os.WriteFile(path, []byte(`{"addrs":["127.0.0.1:1"],"tenant_id":"t","namespace":"n","token":"a",
		"unauthorized_token":"b","ca_file":"ca.pem","durable_stream":"d","cache":"c",
		"single_shard_cache":"s","missing_stream":"m","future_member":[1,2]}`), 0o644)
	got, err = LoadFixture(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.CAFile != filepath.Join(dir, "ca.pem") {
		t.Fatalf("ca_file = %q", got.CAFile)
	}

	bad := validFixture()
	bad.Token = ""
	if err := bad.WriteFile(filepath.Join(dir, "bad.json")); !errors.Is(err, ErrInvalidFixture) {
		t.Fatalf("WriteFile of an invalid fixture: %v", err)
	}
	os.WriteFile(path, []byte(`{"addrs":`), 0o644)
	if _, err := LoadFixture(path); !errors.Is(err, ErrInvalidFixture) {
		t.Fatalf("truncated JSON: %v", err)
	}
	os.WriteFile(path, []byte(`{"addrs":["127.0.0.1:1"]}`), 0o644)
	if _, err := LoadFixture(path); !errors.Is(err, ErrInvalidFixture) || !strings.Contains(err.Error(), "tenant_id") {
		t.Fatalf("incomplete fixture: %v", err)
	}
	if _, err := LoadFixture(filepath.Join(dir, "absent.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("absent file: %v", err)
	}
}
