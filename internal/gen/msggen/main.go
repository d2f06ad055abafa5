// Command msggen generates messages_gen.go in the root felix package from
// the declarative table messages.txt in this directory. Run it from the
// module root (go generate ./... does so through the //go:generate line in
// messages.go):
//
//	go run ./internal/gen/msggen
//
// The output is deterministic, so CI can check that the committed file is
// up to date with go generate ./... && git diff --exit-code.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"strconv"
	"strings"
)

type field struct {
	json string // member name
	goN  string // Go field name
	typ  string // table type: string, u64, [b64], Named, [Named], ...
	enc  string // req omit null null! dflt omit0 omitempty omitnull
	// needs is the feature (FEATURE_X) a broker must advertise before a
	// client sends the member set, or "" (the needs= annotation).
	needs string
	doc   string
}

type def struct {
	message bool
	tag     string // JSON type tag (messages only)
	goN     string
	dir     string
	doc     string
	fields  []field
	req     *request // the facts of a C>B message (@request)
}

// request is the @request line of a C>B message.
type request struct {
	gate    string   // FEATURE_X, or "" for none
	answers []string // B>C tags
	route   string   // any, stream or cache
	safe    bool
}

// routes maps the table's route words to the felix.Route constants.
var routes = map[string]string{"any": "RouteAny", "stream": "RouteStreamShard", "cache": "RouteCacheShard"}

func main() {
	in := flag.String("in", "internal/gen/msggen/messages.txt", "table to read")
	out := flag.String("out", "messages_gen.go", "Go file to write")
	flag.Parse()
	defs, err := parse(*in)
	if err != nil {
		log.Fatal(err)
	}
	src := generate(defs)
	formatted, err := format.Source(src)
	if err != nil {
		os.WriteFile(*out+".broken", src, 0o644)
		log.Fatalf("format: %v", err)
	}
	if err := os.WriteFile(*out, formatted, 0o644); err != nil {
		log.Fatal(err)
	}
}

var groupTarget = []field{
	{json: "tenant_id", typ: "string", enc: "req"},
	{json: "namespace", typ: "string", enc: "req"},
	{json: "stream", typ: "string", enc: "req"},
	{json: "shard", typ: "u32", enc: "req"},
	{json: "group", typ: "string", enc: "req"},
}

func parse(path string) ([]*def, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var defs []*def
	var cur *def
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		raw := sc.Text()
		text, doc, _ := strings.Cut(raw, "--")
		doc = strings.TrimSpace(doc)
		text = strings.TrimSpace(text)
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		words := strings.Fields(text)
		indented := raw[0] == '\t' || raw[0] == ' '
		switch {
		case !indented && words[0] == "object" && len(words) == 2:
			cur = &def{goN: words[1], doc: doc}
			defs = append(defs, cur)
		case !indented && words[0] == "message" && len(words) == 3:
			if words[2] != "C>B" && words[2] != "B>C" {
				return nil, fmt.Errorf("%s:%d: direction %q is not C>B or B>C", path, line, words[2])
			}
			tag, goN, ok := strings.Cut(words[1], "=")
			if !ok {
				goN = camel(tag)
			}
			cur = &def{message: true, tag: tag, goN: goN, dir: words[2], doc: doc}
			defs = append(defs, cur)
		case indented && words[0] == "@group" && cur != nil:
			for _, g := range groupTarget {
				g.goN = camel(g.json)
				cur.fields = append(cur.fields, g)
			}
		case indented && words[0] == "@request" && cur != nil:
			if cur.req != nil {
				return nil, fmt.Errorf("%s:%d: second @request for %s", path, line, cur.tag)
			}
			r, err := parseRequest(words[1:])
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %v", path, line, err)
			}
			cur.req = r
		case indented && (len(words) == 3 || len(words) == 4) && cur != nil:
			name, goN, ok := strings.Cut(words[0], "=")
			if !ok {
				goN = camel(name)
			}
			switch words[2] {
			case "req", "omit", "null", "null!", "dflt", "omit0", "omitempty", "omitnull":
			default:
				return nil, fmt.Errorf("%s:%d: unknown encoding %q", path, line, words[2])
			}
			f := field{json: name, goN: goN, typ: words[1], enc: words[2], doc: doc}
			if len(words) == 4 {
				needs, err := parseNeeds(cur, f, words[3])
				if err != nil {
					return nil, fmt.Errorf("%s:%d: %v", path, line, err)
				}
				f.needs = needs
			}
			cur.fields = append(cur.fields, f)
		default:
			return nil, fmt.Errorf("%s:%d: cannot parse %q", path, line, raw)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := check(defs); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return defs, nil
}

// parseNeeds reads the needs=FEATURE_X annotation of member f of d. Only a
// client → broker member that can be left out has one: the gate applies
// when the member is set, and a member always written would always need it
// (that is the @request gate).
func parseNeeds(d *def, f field, w string) (string, error) {
	v, ok := strings.CutPrefix(w, "needs=")
	if !ok || !isFeature(v) {
		return "", fmt.Errorf("member %s: %q is not needs=FEATURE_NAME", f.json, w)
	}
	if !d.message || d.dir != "C>B" {
		return "", fmt.Errorf("member %s: needs= on %s, not a C>B message", f.json, d.goN)
	}
	switch f.enc {
	case "omit", "omit0", "omitempty", "omitnull":
	default:
		return "", fmt.Errorf("member %s: needs= on an always-written member (%s)", f.json, f.enc)
	}
	return v, nil
}

func isFeature(v string) bool {
	return strings.HasPrefix(v, "FEATURE_") && len(v) > len("FEATURE_") && strings.ToUpper(v) == v
}

// parseRequest reads the key=value words of an @request line; every key
// must be given once.
func parseRequest(words []string) (*request, error) {
	r := &request{}
	seen := map[string]bool{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok || v == "" || seen[k] {
			return nil, fmt.Errorf("@request: %q is not a new key=value", w)
		}
		seen[k] = true
		switch k {
		case "gate":
			if v != "-" {
				if !isFeature(v) {
					return nil, fmt.Errorf("@request: gate %q is not - or FEATURE_NAME", v)
				}
				r.gate = v
			}
		case "answers":
			r.answers = strings.Split(v, ",")
		case "route":
			if routes[v] == "" {
				return nil, fmt.Errorf("@request: route %q is not any, stream or cache", v)
			}
			r.route = v
		case "safe":
			if v != "yes" && v != "no" {
				return nil, fmt.Errorf("@request: safe %q is not yes or no", v)
			}
			r.safe = v == "yes"
		default:
			return nil, fmt.Errorf("@request: unknown key %q", k)
		}
	}
	for _, k := range []string{"gate", "answers", "route", "safe"} {
		if !seen[k] {
			return nil, fmt.Errorf("@request: %s missing", k)
		}
	}
	return r, nil
}

// check enforces what the line-by-line parse cannot: every C>B message has
// its request facts, no B>C message has any, and answers name B>C messages.
func check(defs []*def) error {
	toClient := map[string]bool{}
	for _, d := range defs {
		if d.message && d.dir == "B>C" {
			toClient[d.tag] = true
		}
	}
	for _, d := range defs {
		switch {
		case !d.message:
			if d.req != nil {
				return fmt.Errorf("object %s has @request", d.goN)
			}
		case d.dir == "B>C" && d.req != nil:
			return fmt.Errorf("%s is B>C but has @request", d.tag)
		case d.dir == "C>B" && d.req == nil:
			return fmt.Errorf("%s is C>B but has no @request", d.tag)
		case d.dir == "C>B":
			for _, a := range d.req.answers {
				if !toClient[a] {
					return fmt.Errorf("%s: answer %q is not a B>C message", d.tag, a)
				}
			}
			if d.req.route != "any" {
				if _, err := routeOf(d); err != nil {
					return err
				}
			}
		}
		if f := member(d, "request_id"); f != nil && d.message && (f.typ != "u64" || (f.enc != "req" && f.enc != "omit")) {
			return fmt.Errorf("%s: request_id is %s %s, not u64 req or u64 omit", d.tag, f.typ, f.enc)
		}
	}
	return nil
}

// member returns the member of d named json, or nil.
func member(d *def, json string) *field {
	for i := range d.fields {
		if d.fields[i].json == json {
			return &d.fields[i]
		}
	}
	return nil
}

// target is what a routed request names, read off its members.
type target struct {
	kind  string // ShardKindStream or ShardKindCache
	name  *field // stream or cache
	shard *field // u32 req or omit, or nil
	key   *field // b64 omit (key) or b64 req (entity_key), or nil
}

// routeOf finds the members that route a request whose route is stream or
// cache: tenant_id, namespace and the stream (or cache) name, all string
// req, and a shard member or a routing key (key b64 omit, entity_key b64
// req). A request lacking them is an error naming it, so that a new routed
// request cannot be given a wrong target in silence. A key member of
// another type (state_get's state key, cache_watch's key) is no routing key.
func routeOf(d *def) (target, error) {
	t := target{kind: "ShardKindStream"}
	nameMember := "stream"
	if d.req.route == "cache" {
		t.kind, nameMember = "ShardKindCache", "cache"
	}
	for _, n := range []string{"tenant_id", "namespace", nameMember} {
		f := member(d, n)
		if f == nil || f.typ != "string" || f.enc != "req" {
			return t, fmt.Errorf("%s: route=%s but no %s string req member", d.tag, d.req.route, n)
		}
	}
	t.name = member(d, nameMember)
	if f := member(d, "shard"); f != nil {
		if f.typ != "u32" || (f.enc != "req" && f.enc != "omit") {
			return t, fmt.Errorf("%s: shard is %s %s, not u32 req or u32 omit", d.tag, f.typ, f.enc)
		}
		t.shard = f
	}
	if f := member(d, "key"); f != nil && f.typ == "b64" {
		if f.enc != "omit" {
			return t, fmt.Errorf("%s: routing key is b64 %s, not b64 omit", d.tag, f.enc)
		}
		t.key = f
	}
	if f := member(d, "entity_key"); f != nil {
		if f.typ != "b64" || f.enc != "req" {
			return t, fmt.Errorf("%s: entity_key is %s %s, not b64 req", d.tag, f.typ, f.enc)
		}
		if t.key != nil {
			return t, fmt.Errorf("%s: both key and entity_key route it", d.tag)
		}
		t.key = f
	}
	if t.shard == nil && t.key == nil {
		return t, fmt.Errorf("%s: route=%s but neither a shard member nor a routing key (key b64 omit, entity_key b64 req)", d.tag, d.req.route)
	}
	return t, nil
}

// namesOf returns the names a RouteAny request carries: tenant_id,
// namespace and stream or cache (all string req); false when it has not
// all of them.
func namesOf(d *def) (target, bool) {
	for _, c := range []struct{ kind, member string }{{"ShardKindStream", "stream"}, {"ShardKindCache", "cache"}} {
		t := target{kind: c.kind, name: member(d, c.member)}
		ok := t.name != nil
		for _, n := range []string{"tenant_id", "namespace", c.member} {
			if f := member(d, n); f == nil || f.typ != "string" || f.enc != "req" {
				ok = false
			}
		}
		if ok {
			return t, true
		}
	}
	return target{}, false
}

var initialisms = map[string]string{"id": "ID", "ok": "OK", "ttl": "TTL"}

func camel(s string) string {
	var b strings.Builder
	for _, p := range strings.Split(s, "_") {
		if u, ok := initialisms[p]; ok {
			b.WriteString(u)
			continue
		}
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}

// ---------------------------------------------------------------------------

type gen struct {
	b       bytes.Buffer
	pending strings.Builder // constant JSON text not yet appended
}

func (g *gen) p(format string, args ...any) {
	fmt.Fprintf(&g.b, format, args...)
	g.b.WriteByte('\n')
}

func (g *gen) lit(s string) { g.pending.WriteString(s) }

func (g *gen) flush() {
	if g.pending.Len() == 0 {
		return
	}
	s := g.pending.String()
	g.pending.Reset()
	if len(s) == 1 {
		g.p("dst = append(dst, %s)", strconv.QuoteRune(rune(s[0])))
		return
	}
	g.p("dst = append(dst, %s...)", goString(s))
}

func goString(s string) string {
	if !strings.Contains(s, "`") {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

var scalarGo = map[string]string{
	"string": "string", "u16": "uint16", "u32": "uint32", "u64": "uint64", "i64": "int64",
	"bool": "bool", "b64": "[]byte",
}

var typeDesc = map[string]string{
	"string": "string", "u16": "u16", "u32": "u32", "u64": "u64", "i64": "i64",
	"bool": "bool", "b64": "base64 bytes",
}

func elemOf(t string) (string, bool) {
	if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
		return t[1 : len(t)-1], true
	}
	return t, false
}

func goType(t string) string {
	if e, ok := elemOf(t); ok {
		return "[]" + goType(e)
	}
	if s, ok := scalarGo[t]; ok {
		return s
	}
	return t
}

func fieldGoType(f field) string {
	t := goType(f.typ)
	switch f.enc {
	case "omit", "null", "null!":
		return "Opt[" + t + "]"
	}
	return t
}

// appendValue emits code appending the value expression v of table type t.
func (g *gen) appendValue(t, v string) {
	g.flush()
	if e, ok := elemOf(t); ok {
		switch e {
		case "b64":
			g.p("dst = appendJSONBytesList(dst, %s)", v)
		case "string":
			g.p("dst = appendJSONStringList(dst, %s)", v)
		case "u16", "u32", "u64":
			g.p("dst = appendJSONUintList(dst, %s)", v)
		default:
			g.p("dst = append(dst, '[')")
			g.p("for i := range %s {", v)
			g.p("if i > 0 { dst = append(dst, ',') }")
			g.p("dst = %s[i].appendJSON(dst)", v)
			g.p("}")
			g.p("dst = append(dst, ']')")
		}
		return
	}
	switch t {
	case "string":
		g.p("dst = appendJSONString(dst, %s)", v)
	case "u16", "u32", "u64":
		if t == "u64" {
			g.p("dst = appendJSONUint(dst, %s)", v)
		} else {
			g.p("dst = appendJSONUint(dst, uint64(%s))", v)
		}
	case "i64":
		g.p("dst = appendJSONInt(dst, %s)", v)
	case "bool":
		g.p("dst = appendJSONBool(dst, %s)", v)
	case "b64":
		g.p("dst = appendJSONBytes(dst, %s)", v)
	default:
		g.p("dst = %s.appendJSON(dst)", v)
	}
}

// readExpr returns an expression reading a value of scalar or scalar-list
// type t, or "" for named types.
func readExpr(t, name string) string {
	q := strconv.Quote(name)
	if e, ok := elemOf(t); ok {
		switch e {
		case "b64":
			return "d.bytesList(" + q + ")"
		case "string":
			return "d.stringList(" + q + ")"
		case "u16":
			return "d.u16List(" + q + ")"
		case "u64":
			return "d.u64List(" + q + ")"
		}
		return ""
	}
	switch t {
	case "string":
		return "d.str(" + q + ")"
	case "u16", "u32", "u64", "i64":
		return "d." + t + "(" + q + ")"
	case "bool":
		return "d.boolean(" + q + ")"
	case "b64":
		return "d.bytes(" + q + ")"
	}
	return ""
}

// readInto emits code reading a value of type t into the variable v.
func (g *gen) readInto(t, v, name string) {
	if x := readExpr(t, name); x != "" {
		g.p("%s = %s", v, x)
		return
	}
	q := strconv.Quote(name)
	if e, ok := elemOf(t); ok {
		g.p("%s = nil", v)
		g.p("if d.beginArray(%s) {", q)
		g.p("for j := 0; d.elem(j, %s); j++ {", q)
		g.p("var e %s", goType(e))
		g.p("e.decodeJSON(d, %s)", q)
		g.p("%s = append(%s, e)", v, v)
		g.p("}")
		g.p("}")
		return
	}
	g.p("%s.decodeJSON(d, %s)", v, q)
}

func encDoc(f field) string {
	switch f.enc {
	case "req":
		return "required"
	case "omit":
		return "optional: left out when unset; null reads as unset"
	case "null":
		return "optional: written as null when unset; missing or null reads as unset"
	case "null!":
		return "nullable: written as null when unset; the member must be present, null reads as unset"
	case "dflt":
		return "always written; a missing member reads as the zero value"
	case "omit0":
		return "written only when not zero/false; a missing member reads as the zero value"
	case "omitempty":
		return "left out when empty"
	case "omitnull":
		return "left out when nil; null reads as nil"
	}
	return f.enc
}

func describe(t string) string {
	if e, ok := elemOf(t); ok {
		return "list of " + describe(e)
	}
	if d, ok := typeDesc[t]; ok {
		return d
	}
	return t
}

func (g *gen) typeDecl(d *def) {
	if d.message {
		dir := map[string]string{"C>B": "client → broker", "B>C": "broker → client"}[d.dir]
		g.p("// %s is the %q control message (%s). It %s", d.goN, d.tag, dir, d.doc)
	} else {
		g.p("// %s %s", d.goN, d.doc)
	}
	g.p("type %s struct {", d.goN)
	for _, f := range d.fields {
		doc := fmt.Sprintf("%s is %q (%s, %s)", f.goN, f.json, describe(f.typ), encDoc(f))
		var notes []string
		if f.needs != "" {
			notes = append(notes, "only with "+f.needs)
		}
		if f.doc != "" {
			notes = append(notes, f.doc)
		}
		if len(notes) > 0 {
			doc += ": " + strings.Join(notes, "; ")
		}
		g.p("// %s.", strings.TrimSuffix(doc, "."))
		g.p("%s %s", f.goN, fieldGoType(f))
	}
	g.p("}")
	g.p("")
}

func (g *gen) encoder(d *def) {
	if d.message {
		g.p("// MessageType returns %q.", d.tag)
		g.p("func (*%s) MessageType() string { return %q }", d.goN, d.tag)
		g.p("")
		g.p("// MarshalJSON returns the message's wire encoding (json.Marshaler).")
		g.p("func (m *%s) MarshalJSON() ([]byte, error) { return m.AppendJSON(nil), nil }", d.goN)
		g.p("")
		g.p("// UnmarshalJSON decodes the wire encoding of a %q message", d.tag)
		g.p("// (json.Unmarshaler) with the rules of DecodeMessage.")
		g.p("func (m *%s) UnmarshalJSON(b []byte) error { return unmarshalMessage(b, m) }", d.goN)
		g.p("")
		g.p("// AppendJSON appends the message's canonical JSON encoding to dst.")
		g.p("func (m *%s) AppendJSON(dst []byte) []byte {", d.goN)
		g.lit(`{"type":` + strconv.Quote(d.tag))
	} else {
		g.p("func (m *%s) appendJSON(dst []byte) []byte {", d.goN)
		g.lit("{")
	}
	// Before the first always-written member, a separator is only needed
	// when an optional member was written.
	static := d.message
	sep := func() {
		if static {
			g.lit(",")
		} else {
			g.flush()
			g.p("dst = appendMemberSep(dst)")
		}
	}
	for _, f := range d.fields {
		v := "m." + f.goN
		key := strconv.Quote(f.json) + ":"
		switch f.enc {
		case "req", "dflt":
			sep()
			g.lit(key)
			g.appendValue(f.typ, v)
			static = true
		case "null", "null!":
			sep()
			g.lit(key)
			g.flush()
			g.p("if %s.Set {", v)
			g.appendValue(f.typ, v+".V")
			g.p("} else {")
			g.p("dst = append(dst, `null`...)")
			g.p("}")
			static = true
		case "omit", "omit0", "omitempty", "omitnull":
			g.flush()
			val := v
			if f.enc == "omit" {
				val = v + ".V"
			}
			g.p("if %s {", presentCond(f, v))
			sep()
			g.lit(key)
			g.appendValue(f.typ, val)
			g.p("}")
		}
	}
	g.lit("}")
	g.flush()
	g.p("return dst")
	g.p("}")
	g.p("")
}

// presentCond returns the condition under which the member f, read as the
// expression v, is written by an encoding that may leave it out (omit,
// omit0, omitempty, omitnull): Opt set, not zero or false, not empty.
func presentCond(f field, v string) string {
	switch f.enc {
	case "omit":
		return v + ".Set"
	case "omit0":
		if f.typ == "bool" {
			return v
		}
		return v + " != 0"
	}
	return "len(" + v + ") > 0"
}

func (g *gen) decoder(d *def) {
	names := fmt.Sprintf("%sMembers", lowerFirst(d.goN))
	var required uint64
	var list []string
	for i, f := range d.fields {
		list = append(list, strconv.Quote(f.json))
		if f.enc == "req" || f.enc == "null!" {
			required |= 1 << uint(i)
		}
	}
	if len(d.fields) > 0 {
		g.p("var %s = [...]string{%s}", names, strings.Join(list, ", "))
		g.p("")
	}
	if d.message {
		g.p("func (m *%s) decodeJSON(d *jsonDecoder, i0 int) {", d.goN)
		g.p("field := \"\"")
	} else {
		g.p("func (m *%s) decodeJSON(d *jsonDecoder, field string) {", d.goN)
		g.p("if !d.beginObject(field) { return }")
		g.p("i0 := 0")
	}
	if len(d.fields) > 0 {
		g.p("var seen uint64")
	}
	g.p("for i := i0; ; i++ {")
	g.p("key, ok := d.member(i, field)")
	g.p("if !ok { break }")
	g.p("switch string(key) {")
	if d.message {
		g.p("case \"type\":")
		g.p("d.typeMember()")
	}
	for i, f := range d.fields {
		q := strconv.Quote(f.json)
		g.p("case %s:", q)
		g.p("d.dup(&seen, %d, %s)", i, q)
		v := "m." + f.goN
		switch f.enc {
		case "omit", "null", "null!":
			g.p("if d.null() {")
			g.p("%s = Opt[%s]{}", v, goType(f.typ))
			g.p("} else {")
			g.p("%s.Set = true", v)
			g.readInto(f.typ, v+".V", f.json)
			g.p("}")
		case "omitnull":
			g.p("%s = d.rawJSON(%s)", v, q)
		default:
			g.readInto(f.typ, v, f.json)
		}
	}
	g.p("default:")
	g.p("d.skipMember(key)")
	g.p("}")
	g.p("}")
	if required != 0 {
		g.p("d.missing(seen, %#x, %s[:])", required, names)
	}
	g.p("}")
	g.p("")
}

// requests emits the request facts table and its index.
func (g *gen) requests(msgs []*def) {
	var reqs []*def
	for _, d := range msgs {
		if d.dir == "C>B" {
			reqs = append(reqs, d)
		}
	}
	g.p("// requestFacts holds the facts of the %d client → broker requests in", len(reqs))
	g.p("// table order.")
	g.p("var requestFacts = [...]RequestFacts{")
	for _, d := range reqs {
		gate := "0"
		if d.req.gate != "" {
			gate = camel(strings.ToLower(d.req.gate))
		}
		var answers []string
		for _, a := range d.req.answers {
			answers = append(answers, strconv.Quote(a))
		}
		g.p("{Type: %q, Gate: %s, Route: %s, Safe: %t, answers: []string{%s}},",
			d.tag, gate, routes[d.req.route], d.req.safe, strings.Join(answers, ", "))
	}
	g.p("}")
	g.p("")
	g.p("// requestIndex returns the index of typ in requestFacts, or -1 when typ")
	g.p("// is not a client → broker request.")
	g.p("func requestIndex(typ string) int {")
	g.p("switch typ {")
	for i, d := range reqs {
		g.p("case %q:", d.tag)
		g.p("return %d", i)
	}
	g.p("}")
	g.p("return -1")
	g.p("}")
	g.p("")
}

// requestIDs emits RequestIDOf and SetRequestID over every message with a
// request_id member (u64 req or u64 omit, as check ensures).
func (g *gen) requestIDs(msgs []*def) {
	var with []*def
	for _, d := range msgs {
		if member(d, "request_id") != nil {
			with = append(with, d)
		}
	}
	g.p("// RequestIDOf returns the request_id member of m, for the %d message", len(with))
	g.p("// types of either direction that have one. ok is false when m's type has")
	g.p("// no request_id member, or has an optional one that is absent.")
	g.p("func RequestIDOf(m Message) (id uint64, ok bool) {")
	g.p("switch m := m.(type) {")
	for _, d := range with {
		g.p("case *%s:", d.goN)
		if member(d, "request_id").enc == "omit" {
			g.p("return m.RequestID.V, m.RequestID.Set")
		} else {
			g.p("return m.RequestID, true")
		}
	}
	g.p("}")
	g.p("return 0, false")
	g.p("}")
	g.p("")
	g.p("// SetRequestID sets the request_id member of m to id (an optional one")
	g.p("// becomes present) and reports true, or reports false and changes")
	g.p("// nothing when m's type has no request_id member. m is a pointer")
	g.p("// message, as DecodeMessage returns them (e.g. *CacheGet).")
	g.p("func SetRequestID(m Message, id uint64) bool {")
	g.p("switch m := m.(type) {")
	for _, d := range with {
		g.p("case *%s:", d.goN)
		if member(d, "request_id").enc == "omit" {
			g.p("m.RequestID = Opt[uint64]{V: id, Set: true}")
		} else {
			g.p("m.RequestID = id")
		}
	}
	g.p("default:")
	g.p("return false")
	g.p("}")
	g.p("return true")
	g.p("}")
	g.p("")
}

// routeTargets emits RouteTargetOf over every request routed to a stream
// or cache shard.
func (g *gen) routeTargets(reqs []*def) {
	g.p("// RouteTargetOf returns the shard a request routed to a stream shard or a")
	g.p("// cache shard (RouteStreamShard, RouteCacheShard) names. For a RouteAny")
	g.p("// request that names a stream or a cache (cache_get, stream_shards, ...)")
	g.p("// it returns only the names (Kind, TenantID, Namespace, Name): such a")
	g.p("// request goes to any broker. It returns false for a RouteAny request")
	g.p("// naming neither, a broker → client message or an unknown type. See")
	g.p("// RouteTarget for how its members are filled.")
	g.p("func RouteTargetOf(m Message) (RouteTarget, bool) {")
	g.p("switch m := m.(type) {")
	for _, d := range reqs {
		if d.req.route == "any" {
			if t, ok := namesOf(d); ok {
				g.p("case *%s:", d.goN)
				g.p("return RouteTarget{Kind: %s, TenantID: m.TenantID, Namespace: m.Namespace, Name: m.%s}, true", t.kind, t.name.goN)
			}
			continue
		}
		t, _ := routeOf(d) // check has refused every error
		g.p("case *%s:", d.goN)
		g.p("t := RouteTarget{Kind: %s, TenantID: m.TenantID, Namespace: m.Namespace, Name: m.%s}", t.kind, t.name.goN)
		if t.shard != nil {
			if t.shard.enc == "req" {
				g.p("t.Shard = Opt[uint32]{V: m.%s, Set: true}", t.shard.goN)
			} else {
				g.p("t.Shard = m.%s", t.shard.goN)
			}
		}
		if t.key != nil {
			if t.key.enc == "req" {
				g.p("t.Key, t.Keyed = routingKey(m.%s), true", t.key.goN)
			} else {
				g.p("if m.%s.Set {", t.key.goN)
				g.p("t.Key, t.Keyed = routingKey(m.%s.V), true", t.key.goN)
				g.p("}")
			}
		}
		g.p("return t, true")
	}
	g.p("}")
	g.p("return RouteTarget{}, false")
	g.p("}")
	g.p("")
}

// unadvertised emits Capabilities.Unadvertised: the @request gate, then
// the needs= gate of every member that is set, in table order.
func (g *gen) unadvertised(reqs []*def) {
	g.p("// Unadvertised returns \"\" when the broker advertised everything the")
	g.p("// request m needs: its request gate (as CanRequest) and the feature of")
	g.p("// every member m sets that needs one (Opt set, number not zero, bool")
	g.p("// true, string or list not empty, by the member's encoding). Otherwise it")
	g.p("// describes the first missing thing, e.g. \"cache_delete")
	g.p("// (FEATURE_CACHE_DELETE)\" or \"group_poll visibility_ms")
	g.p("// (FEATURE_GROUP_CLAIM_CONTROL)\"; for a type that is not a client →")
	g.p("// broker request, typ + \" (not a known request)\". Member gates are")
	g.p("// read from this package's message types; a Message of another")
	g.p("// implementation has its request gate checked only.")
	g.p("func (c Capabilities) Unadvertised(m Message) string {")
	g.p("if m == nil {")
	g.p("return \"nil message (not a known request)\"")
	g.p("}")
	g.p("typ := m.MessageType()")
	g.p("i := requestIndex(typ)")
	g.p("if i < 0 {")
	g.p("return typ + \" (not a known request)\"")
	g.p("}")
	g.p("if gate := requestFacts[i].Gate; !c.Features.Has(gate) {")
	g.p("return typ + \" (\" + featureName(gate) + \")\"")
	g.p("}")
	g.p("switch m := m.(type) {")
	for _, d := range reqs {
		var gated []field
		for _, f := range d.fields {
			if f.needs != "" {
				gated = append(gated, f)
			}
		}
		if len(gated) == 0 {
			continue
		}
		g.p("case *%s:", d.goN)
		for _, f := range gated {
			gate := camel(strings.ToLower(f.needs))
			g.p("if %s && !c.Features.Has(%s) {", presentCond(f, "m."+f.goN), gate)
			g.p("return %q + featureName(%s) + \")\"", d.tag+" "+f.json+" (", gate)
			g.p("}")
		}
	}
	g.p("}")
	g.p("return \"\"")
	g.p("}")
	g.p("")
}

func lowerFirst(s string) string {
	return strings.ToLower(s[:1]) + s[1:]
}

func generate(defs []*def) []byte {
	g := &gen{}
	g.p("// Code generated by internal/gen/msggen from internal/gen/msggen/messages.txt; DO NOT EDIT.")
	g.p("")
	g.p("package felix")
	g.p("")
	var msgs []*def
	for _, d := range defs {
		if d.message {
			msgs = append(msgs, d)
		}
	}
	g.p("// messageTypes lists the %d control message types in table order.", len(msgs))
	g.p("var messageTypes = [...]string{")
	for _, d := range msgs {
		g.p("%q,", d.tag)
	}
	g.p("}")
	g.p("")
	g.p("// decodeKnown decodes the members of a message of the given type, or")
	g.p("// returns nil without reading anything when the type is unknown. The")
	g.p("// direct calls let the decoder stay on the caller's stack.")
	g.p("func decodeKnown(typ string, d *jsonDecoder, i0 int) Message {")
	g.p("switch typ {")
	for _, d := range msgs {
		g.p("case %q:", d.tag)
		g.p("m := new(%s)", d.goN)
		g.p("m.decodeJSON(d, i0)")
		g.p("return m")
	}
	g.p("}")
	g.p("return nil")
	g.p("}")
	g.p("")
	g.requests(msgs)
	var reqs []*def
	for _, d := range msgs {
		if d.dir == "C>B" {
			reqs = append(reqs, d)
		}
	}
	g.requestIDs(msgs)
	g.routeTargets(reqs)
	g.unadvertised(reqs)
	g.p("// newMessage returns a zero message of the given type, or nil.")
	g.p("func newMessage(typ string) decodableMessage {")
	g.p("switch typ {")
	for _, d := range msgs {
		g.p("case %q:", d.tag)
		g.p("return new(%s)", d.goN)
	}
	g.p("}")
	g.p("return nil")
	g.p("}")
	g.p("")
	for _, d := range defs {
		g.typeDecl(d)
		g.encoder(d)
		g.decoder(d)
	}
	return g.b.Bytes()
}
