package main

import (
	"bytes"
	"go/format"
	"os"
	"strings"
	"testing"
)

// TestGeneratedFileUpToDate regenerates messages_gen.go in memory and
// compares it with the committed file (go generate ./... must be a no-op).
func TestGeneratedFileUpToDate(t *testing.T) {
	defs, err := parse("messages.txt")
	if err != nil {
		t.Fatal(err)
	}
	want, err := format.Source(generate(defs))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../messages_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("messages_gen.go is stale: run go generate ./...")
	}
}

func TestTable(t *testing.T) {
	defs, err := parse("messages.txt")
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]bool{}
	for _, d := range defs {
		if d.message {
			if tags[d.tag] {
				t.Errorf("type %q listed twice", d.tag)
			}
			tags[d.tag] = true
		}
		names := map[string]bool{}
		for _, f := range d.fields {
			if names[f.json] {
				t.Errorf("%s: member %q listed twice", d.goN, f.json)
			}
			names[f.json] = true
		}
		if len(d.fields) > 64 {
			t.Errorf("%s: more than 64 members", d.goN)
		}
	}
	if len(tags) != 77 {
		t.Errorf("%d message types, want 77", len(tags))
	}
}

func TestCamel(t *testing.T) {
	for in, want := range map[string]string{
		"auth_ok": "AuthOK", "request_id": "RequestID", "ttl_ms": "TTLMs", "client_features_hi": "ClientFeaturesHi",
		"publish_batch": "PublishBatch", "ok": "OK",
	} {
		if got := camel(in); got != want {
			t.Errorf("camel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []string{
		"message x C>B\n\tfield string sometimes\n",
		"message x C>B\n\tjust two\n",
		"nonsense line here\n",
	} {
		p := dir + "/t.txt"
		if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := parse(p); err == nil || !strings.Contains(err.Error(), "t.txt:") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}
