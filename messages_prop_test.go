package felix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// Random values of every message type, drawn by walking the struct with
// reflection. Values respect the conventions the codec relies on (an unset
// Opt holds the zero value; tagged variants only carry their own data), so
// every drawn value has exactly one encoding.

var (
	optPrefix   = "Opt["
	typeAck     = reflect.TypeFor[AckMode]()
	typeRetry   = reflect.TypeFor[RetryClass]()
	typeCode    = reflect.TypeFor[ErrorCode]()
	typeCursor  = reflect.TypeFor[CursorErrorReason]()
	typeKind    = reflect.TypeFor[ShardKind]()
	typeRouting = reflect.TypeFor[Routing]()
	typeStart   = reflect.TypeFor[StartPosition]()
	typeCond    = reflect.TypeFor[CacheCondition]()
	typeChange  = reflect.TypeFor[StateChange]()
	typeRefusal = reflect.TypeFor[PublishRefusalReason]()
	typeRaw     = reflect.TypeFor[RawJSON]()
)

// genText draws strings that exercise the escaping rules.
var genText = rapid.OneOf(
	rapid.StringMatching(`[a-z0-9_.-]{0,12}`),
	rapid.String(),
	rapid.SampledFrom([]string{"", "<&>", "\u2028\u2029", "\"\\/", "\b\f\n\r\t\x00\x1f\x7f", "é😀", "\ufffd"}),
)

var genRaw = rapid.SampledFrom([]string{
	`0`, `-1`, `12345678901234567890123`, `1.5e-7`, `true`, `false`, `"s<&>\u0000"`, `[]`, `{}`,
	`{"a":[1,{"b":null}],"c":"d"}`, `[null,1,"x",{"k":false}]`,
})

func drawValue(t *rapid.T, v reflect.Value, label string) {
	typ := v.Type()
	switch typ {
	case typeAck:
		v.SetUint(uint64(rapid.IntRange(0, 2).Draw(t, label)))
		return
	case typeRetry:
		v.SetUint(uint64(rapid.IntRange(1, 5).Draw(t, label)))
		return
	case typeCode:
		v.SetString(rapid.OneOf(rapid.SampledFrom([]string{"not_found", "stale_claim", "revoked", "code_99"}), genText).Draw(t, label))
		return
	case typeCursor:
		v.SetString(string(rapid.SampledFrom([]CursorErrorReason{CursorTooOld, CursorInFuture}).Draw(t, label)))
		return
	case typeKind:
		v.SetString(string(rapid.SampledFrom([]ShardKind{ShardKindStream, ShardKindCache}).Draw(t, label)))
		return
	case typeRouting:
		v.SetUint(uint64(rapid.SampledFrom([]Routing{RoutingJumpHash, RoutingModulo}).Draw(t, label)))
		return
	case typeStart:
		p := StartPosition{Kind: StartKind(rapid.IntRange(0, 2).Draw(t, label+".kind"))}
		if p.Kind == StartOffset {
			p.Offset = rapid.Uint64().Draw(t, label+".offset")
		}
		v.Set(reflect.ValueOf(p))
		return
	case typeCond:
		c := CacheCondition{Kind: CacheConditionKind(rapid.IntRange(0, 1).Draw(t, label+".kind"))}
		if c.Kind == CondVersion {
			c.Version = rapid.Uint64().Draw(t, label+".version")
		}
		v.Set(reflect.ValueOf(c))
		return
	case typeChange:
		c := StateChange{Op: StateOp(rapid.IntRange(0, 1).Draw(t, label+".op")), Key: genText.Draw(t, label+".key")}
		if c.Op == StatePut {
			c.Value = rapid.SliceOf(rapid.Byte()).Draw(t, label+".value")
		}
		v.Set(reflect.ValueOf(c))
		return
	case typeRefusal:
		r := PublishRefusalReason{Kind: RefusalKind(rapid.IntRange(0, 5).Draw(t, label+".kind"))}
		switch r.Kind {
		case RefusalSequenceGap:
			r.Expected = rapid.Uint64().Draw(t, label+".expected")
		case RefusalOffsetMismatch:
			r.Tail = rapid.Uint64().Draw(t, label+".tail")
		case RefusalNotLeader:
			r.NodeID = genText.Draw(t, label+".node_id")
			if rapid.Bool().Draw(t, label+".addr?") {
				r.Addr = Some(genText.Draw(t, label+".addr"))
			}
		}
		v.Set(reflect.ValueOf(r))
		return
	case typeRaw:
		if rapid.Bool().Draw(t, label+"?") {
			v.Set(reflect.ValueOf(RawJSON(genRaw.Draw(t, label))))
		}
		return
	}
	if typ.Kind() == reflect.Struct && strings.HasPrefix(typ.Name(), optPrefix) {
		if rapid.Bool().Draw(t, label+"?") {
			v.FieldByName("Set").SetBool(true)
			drawValue(t, v.FieldByName("V"), label)
		}
		return
	}
	switch typ.Kind() {
	case reflect.String:
		v.SetString(genText.Draw(t, label))
	case reflect.Bool:
		v.SetBool(rapid.Bool().Draw(t, label))
	case reflect.Uint16:
		v.SetUint(uint64(rapid.Uint16().Draw(t, label)))
	case reflect.Uint32:
		v.SetUint(uint64(rapid.Uint32().Draw(t, label)))
	case reflect.Uint64:
		v.SetUint(rapid.Uint64().Draw(t, label))
	case reflect.Int64:
		v.SetInt(rapid.Int64().Draw(t, label))
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.Uint8 {
			v.SetBytes(rapid.SliceOf(rapid.Byte()).Draw(t, label))
			return
		}
		n := rapid.IntRange(0, 3).Draw(t, label+".len")
		s := reflect.MakeSlice(typ, n, n)
		for i := range n {
			drawValue(t, s.Index(i), fmt.Sprintf("%s[%d]", label, i))
		}
		v.Set(s)
	case reflect.Struct:
		for i := range typ.NumField() {
			drawValue(t, v.Field(i), label+"."+typ.Field(i).Name)
		}
	default:
		t.Fatalf("no generator for %v (%s)", typ, label)
	}
}

// drawMessage draws a random value of the message type typ.
func drawMessage(t *rapid.T, typ string) Message {
	m := NewMessage(typ)
	drawValue(t, reflect.ValueOf(m).Elem(), typ)
	return m
}

// TestPropMessageRoundTrip checks, for random values of every message
// type, that decode(encode(v)) == v, that the encoding is valid JSON for
// encoding/json with "type" first and no duplicate member, and that the
// members encoding/json reads back (re-marshalled by it, with its own order
// and escaping) decode to the same value.
func TestPropMessageRoundTrip(t *testing.T) {
	for _, typ := range MessageTypes() {
		t.Run(typ, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				m := drawMessage(t, typ)
				buf := m.AppendJSON(nil)
				got, err := DecodeMessage(buf)
				if err != nil {
					t.Fatalf("decode %s: %v", buf, err)
				}
				if diff := cmp.Diff(m, got, cmpMsg); diff != "" {
					t.Fatalf("round trip of %s (-want +got):\n%s", buf, diff)
				}
				if again := got.AppendJSON(nil); !bytes.Equal(again, buf) {
					t.Fatalf("re-encoding differs:\n%s\n%s", buf, again)
				}
				checkStdJSON(t, buf, m)
			})
		})
	}
}

func checkStdJSON(t *rapid.T, buf []byte, m Message) {
	if !json.Valid(buf) {
		t.Fatalf("encoding/json refuses %s", buf)
	}
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", buf)
	}
	names := map[string]bool{}
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%v in %s", err, buf)
		}
		name := tok.(string)
		if names[name] {
			t.Fatalf("duplicate member %q in %s", name, buf)
		}
		names[name] = true
		var val any
		if err := dec.Decode(&val); err != nil {
			t.Fatalf("%v in %s", err, buf)
		}
		if first && (name != "type" || val != m.MessageType()) {
			t.Fatalf("first member is %q=%v, want type=%q", name, val, m.MessageType())
		}
		first = false
	}
	var generic map[string]any
	dec = json.NewDecoder(bytes.NewReader(buf))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		t.Fatalf("%v", err)
	}
	std, err := json.Marshal(generic)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	back, err := DecodeMessage(std)
	if err != nil {
		t.Fatalf("decode of encoding/json's form %s: %v", std, err)
	}
	if diff := cmp.Diff(m, back, cmpMsg); diff != "" {
		t.Fatalf("encoding/json's form %s decodes differently:\n%s", std, diff)
	}
}

// TestPropStringEscaping compares the string escaper with encoding/json
// (HTML escaping off): both must decode to the same text, and ours must
// differ only where serde differs (U+2028/U+2029, \b, \f, invalid UTF-8).
func TestPropStringEscaping(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genText.Draw(t, "s")
		ours := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(ours, &back); err != nil {
			t.Fatalf("encoding/json refuses %q: %v", ours, err)
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if back != want {
			t.Fatalf("%q -> %s -> %q", s, ours, back)
		}
		d := jsonDecoder{buf: ours}
		raw, ok := d.rawString("s")
		if !ok || string(raw) != want || d.pos != len(ours) {
			t.Fatalf("own decoder: %q ok=%v err=%v", raw, ok, d.err)
		}
		for _, c := range []byte(ours) {
			if c < 0x20 {
				t.Fatalf("raw control byte in %q", ours)
			}
		}
	})
}

// TestPropMessageNonCanonical re-arranges the encoding of random values of
// every type (members shuffled with "type" anywhere, unknown members added,
// indentation) and checks that it decodes to the same value and re-encodes
// to the canonical bytes.
func TestPropMessageNonCanonical(t *testing.T) {
	unknown := []string{`null`, `1e400`, `-0.5`, `"<\u2028>"`, `[{"a":[]}]`, `{"type":"x","request_id":1}`, `true`}
	for _, typ := range MessageTypes() {
		t.Run(typ, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				m := drawMessage(t, typ)
				canonical := m.AppendJSON(nil)
				type member struct {
					key string
					val json.RawMessage
				}
				var members []member
				dec := json.NewDecoder(bytes.NewReader(canonical))
				dec.Token()
				for dec.More() {
					k, _ := dec.Token()
					var v json.RawMessage
					if err := dec.Decode(&v); err != nil {
						t.Fatal(err)
					}
					members = append(members, member{k.(string), v})
				}
				for i := rapid.IntRange(0, 3).Draw(t, "unknown"); i > 0; i-- {
					members = append(members, member{fmt.Sprintf("zz_unknown_%d", i), json.RawMessage(rapid.SampledFrom(unknown).Draw(t, "value"))})
				}
				perm := rapid.Permutation(members).Draw(t, "order")
				var b bytes.Buffer
				b.WriteString("{")
				for i, mb := range perm {
					if i > 0 {
						b.WriteString(",")
					}
					key, _ := json.Marshal(mb.key)
					b.Write(key)
					b.WriteString(":")
					b.Write(mb.val)
				}
				b.WriteString("}")
				in := b.Bytes()
				if rapid.Bool().Draw(t, "indent") {
					var ind bytes.Buffer
					if err := json.Indent(&ind, in, " ", "\t"); err != nil {
						t.Fatal(err)
					}
					in = append(ind.Bytes(), "\r\n"...)
				}
				got, err := DecodeMessage(in)
				if err != nil {
					t.Fatalf("decode %s: %v", in, err)
				}
				if diff := cmp.Diff(m, got, cmpMsg); diff != "" {
					t.Fatalf("%s decodes differently:\n%s", in, diff)
				}
				if out := got.AppendJSON(nil); !bytes.Equal(out, canonical) {
					t.Fatalf("re-encoding of %s:\n got %s\nwant %s", in, out, canonical)
				}
			})
		})
	}
}
