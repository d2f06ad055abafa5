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
		// @request lines
		"message x B>C\n\t@request gate=- answers=x route=any safe=yes\n",
		"message x C>B\n\tf string req\n",
		"message y B>C\nmessage x C>B\n\t@request gate=- answers=z route=any safe=yes\n",
		"message y B>C\nmessage x C>B\n\t@request gate=- answers=y route=anywhere safe=yes\n",
		"message y B>C\nmessage x C>B\n\t@request gate=- answers=y route=any safe=maybe\n",
		"message y B>C\nmessage x C>B\n\t@request gate=- answers=y route=any\n",
		"message y B>C\nmessage x C>B\n\t@request gate=- gate=- answers=y route=any safe=yes\n",
		"message y B>C\nmessage x C>B\n\t@request gate=- answers=y route=any safe=yes color=red\n",
		"message y B>C\nmessage x C>B\n\t@request gate=cache_delete answers=y route=any safe=yes\n",
		"message y B>C\nmessage x C>B\n\t@request gate=- answers=y route=any safe=yes\n\t@request gate=- answers=y route=any safe=yes\n",
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

// TestRequestLine checks what an @request line turns into, in the table
// and in the generated code.
func TestRequestLine(t *testing.T) {
	p := t.TempDir() + "/t.txt"
	src := "message y_ok B>C\nmessage z B>C\nmessage x C>B\n\t@request gate=FEATURE_CACHE_DELETE answers=y_ok,z route=cache safe=no\n" +
		"message w C>B\n\t@request safe=yes route=stream answers=z gate=-\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	defs, err := parse(p)
	if err != nil {
		t.Fatal(err)
	}
	r := defs[2].req
	if r.gate != "FEATURE_CACHE_DELETE" || strings.Join(r.answers, ",") != "y_ok,z" || r.route != "cache" || r.safe {
		t.Fatalf("x: %+v", r)
	}
	if w := defs[3].req; w.gate != "" || w.route != "stream" || !w.safe {
		t.Fatalf("w: %+v", w)
	}
	out := string(generate(defs))
	for _, want := range []string{
		`{Type: "x", Gate: FeatureCacheDelete, Route: RouteCacheShard, Safe: false, answers: []string{"y_ok", "z"}},`,
		`{Type: "w", Gate: 0, Route: RouteStreamShard, Safe: true, answers: []string{"z"}},`,
		"case \"x\":\nreturn 0\ncase \"w\":\nreturn 1\n}\nreturn -1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("generated code lacks %s", want)
		}
	}
	if strings.Contains(out, `Type: "y_ok"`) {
		t.Error("a B>C message is in the request table")
	}
}
