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
		"\ttenant_id string req\n\tnamespace string req\n\tcache string req\n\tshard u32 omit\n" +
		"message w C>B\n\t@request safe=yes route=stream answers=z gate=-\n" +
		"\ttenant_id string req\n\tnamespace string req\n\tstream string req\n\tentity_key b64 req\n"
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
		"case *X:\nt := RouteTarget{Kind: ShardKindCache, TenantID: m.TenantID, Namespace: m.Namespace, Name: m.Cache}\nt.Shard = m.Shard\nreturn t, true\n",
		"case *W:\nt := RouteTarget{Kind: ShardKindStream, TenantID: m.TenantID, Namespace: m.Namespace, Name: m.Stream}\nt.Key, t.Keyed = routingKey(m.EntityKey), true\nreturn t, true\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("generated code lacks %s", want)
		}
	}
	if strings.Contains(out, `Type: "y_ok"`) {
		t.Error("a B>C message is in the request table")
	}
}

// routed is the head of a C>B message routed to a stream, to which the
// cases below add members.
const routed = "message y B>C\nmessage x C>B\n\t@request gate=- answers=y route=stream safe=yes\n"

// TestRouteErrors checks that msggen refuses a request routed to a stream
// or cache shard whose members do not say which shard: the error names the
// message, so a new request cannot be given a wrong route in silence.
func TestRouteErrors(t *testing.T) {
	target := "\ttenant_id string req\n\tnamespace string req\n\tstream string req\n"
	for _, c := range []struct{ src, want string }{
		{routed + target, "x: route=stream but neither a shard member nor a routing key"},
		// a key that is not bytes is no routing key (state_get's key)
		{routed + target + "\tkey string req\n", "x: route=stream but neither"},
		{routed + "\tnamespace string req\n\tstream string req\n\tshard u32 req\n", "x: route=stream but no tenant_id string req member"},
		{routed + "\ttenant_id string req\n\tstream string req\n\tshard u32 req\n", "x: route=stream but no namespace"},
		{routed + "\ttenant_id string req\n\tnamespace string req\n\tshard u32 req\n", "x: route=stream but no stream"},
		{routed + "\ttenant_id string req\n\tnamespace string req\n\tstream string omit\n\tshard u32 req\n", "x: route=stream but no stream"},
		// a cache request names its cache, not a stream
		{strings.Replace(routed, "route=stream", "route=cache", 1) + target + "\tshard u32 omit\n", "x: route=cache but no cache"},
		{routed + target + "\tshard u64 req\n", "x: shard is u64 req"},
		{routed + target + "\tkey b64 req\n", "x: routing key is b64 req"},
		{routed + target + "\tentity_key b64 omit\n", "x: entity_key is b64 omit"},
		{routed + target + "\tkey b64 omit\n\tentity_key b64 req\n", "x: both key and entity_key"},
		// request_id is what RequestIDOf reads, on either direction
		{"message y B>C\n\trequest_id u32 req\n", "y: request_id is u32 req"},
		{routed + target + "\tshard u32 req\n\trequest_id u64 dflt\n", "x: request_id is u64 dflt"},
	} {
		p := t.TempDir() + "/t.txt"
		if err := os.WriteFile(p, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := parse(p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.src, err, c.want)
		}
	}
	// Any route needs none of it; a shard alone, a key alone do.
	for _, ok := range []string{
		strings.Replace(routed, "route=stream", "route=any", 1),
		routed + target + "\tshard u32 omit\n",
		routed + target + "\tkey b64 omit\n",
		routed + target + "\tentity_key b64 req\n\tkey string req\n",
	} {
		p := t.TempDir() + "/t.txt"
		if err := os.WriteFile(p, []byte(ok), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := parse(p); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}

// TestNeedsAnnotation checks the needs= member annotation: where it is
// allowed, and what Capabilities.Unadvertised checks for it.
func TestNeedsAnnotation(t *testing.T) {
	dir := t.TempDir()
	head := "message y B>C\nmessage x C>B\n\t@request gate=- answers=y route=any safe=yes\n"
	for _, c := range []struct{ src, want string }{
		{head + "\tf u64 omit FEATURE_X\n", `"FEATURE_X" is not needs=FEATURE_NAME`},
		{head + "\tf u64 omit needs=feature_x\n", "not needs=FEATURE_NAME"},
		{head + "\tf u64 omit needs=FEATURE_\n", "not needs=FEATURE_NAME"},
		{head + "\tf u64 req needs=FEATURE_X\n", "needs= on an always-written member (req)"},
		{head + "\tf u64 dflt needs=FEATURE_X\n", "(dflt)"},
		{head + "\tf b64 null needs=FEATURE_X\n", "(null)"},
		{"message y B>C\n\tf u64 omit needs=FEATURE_X\n", "needs= on Y, not a C>B message"},
		{"object O\n\tf u64 omit needs=FEATURE_X\n", "needs= on O"},
		{head + "\tf u64 omit needs=FEATURE_X extra\n", "cannot parse"},
	} {
		p := dir + "/t.txt"
		if err := os.WriteFile(p, []byte(c.src), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := parse(p); err == nil || !strings.Contains(err.Error(), "t.txt:") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.src, err, c.want)
		}
	}
	p := dir + "/t.txt"
	src := head + "\ta u64 omit needs=FEATURE_CACHE_DELETE -- doc\n\tb bool omit0 needs=FEATURE_TOPOLOGY\n" +
		"\tc [string] omitempty needs=FEATURE_INSPECT\n\td u32 omit0\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	defs, err := parse(p)
	if err != nil {
		t.Fatal(err)
	}
	if f := defs[1].fields; f[0].needs != "FEATURE_CACHE_DELETE" || f[0].doc != "doc" || f[1].needs != "FEATURE_TOPOLOGY" || f[3].needs != "" {
		t.Fatalf("fields %+v", f)
	}
	out := string(generate(defs))
	for _, want := range []string{
		"case *X:\nif m.A.Set && !c.Features.Has(FeatureCacheDelete) {\nreturn \"x a (\" + featureName(FeatureCacheDelete) + \")\"\n}\n" +
			"if m.B && !c.Features.Has(FeatureTopology) {\nreturn \"x b (\" + featureName(FeatureTopology) + \")\"\n}\n" +
			"if len(m.C) > 0 && !c.Features.Has(FeatureInspect) {\nreturn \"x c (\" + featureName(FeatureInspect) + \")\"\n}\n}",
		"// A is \"a\" (u64, optional: left out when unset; null reads as unset): only with FEATURE_CACHE_DELETE; doc.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("generated code lacks %s", want)
		}
	}
}
