package felix

//go:generate go run ./internal/gen/msggen

import "bytes"

// Message is a JSON control message. Every *T generated for the 77 message
// types implements it, and so does *UnknownMessage.
//
// Every one of the 77 control messages of the protocol (docs/messages.md) is
// a struct type in this package, named after its "type" tag in Go CamelCase
// with initialisms: auth → Auth, auth_ok → AuthOK, cache_value →
// CacheValue, publish_ok → PublishOK. Four names take a Message suffix
// because the name is taken by another type of this package: error →
// ErrorMessage (Error), publish_batch → PublishBatchMessage (the binary
// PublishBatch), event → EventMessage and event_batch → EventBatchMessage
// (the binary Event and EventBatch). A *T implements Message. The types, their
// encoders and decoders are generated (messages_gen.go) from the table
// internal/gen/msggen/messages.txt; go generate ./... rebuilds them.
//
// Field conventions (the same for every message and shared value type):
//
//   - A required member (encoding "req" of docs/messages.md §1) is a plain Go value: string,
//     uint16/uint32/uint64, int64, bool, []byte (base64 on the wire), a
//     list, or a shared value type.
//   - A member that can be absent (encodings "omit", "null", "null!") is an
//     Opt[T]: Set false means absent. On the wire an unset "omit" member is
//     left out, an unset "null"/"null!" member is written as null. On
//     decode a missing member and an explicit null both read as unset; a
//     "null!" member must still be present. Absent and zero stay distinct:
//     Opt[uint64]{} is absent, Some[uint64](0) is a present 0.
//   - A member with a default ("dflt": always written; "omit0": written only
//     when non-zero / true) is a plain value; a missing member reads as the
//     zero value, null is refused.
//   - A list that docs/messages.md leaves out when empty is a plain slice.
//   - extension.body is RawJSON: nil when absent (or null).
//
// Decoding is strict where upstream is strict and lenient where it is
// lenient: unknown members are ignored (their values must still be valid
// JSON, and like serde a repeated unknown member is not an error); a
// duplicate known member, a wrong JSON type, a number with a
// fraction or exponent or outside the field's range (including -1 or -0 for
// an unsigned field), bad base64, a missing "type" or required member, and
// anything but whitespace after the object fail with an *Error of class
// ErrInvalidJSON whose Field names the member. Invalid UTF-8 inside a
// string fails with ErrInvalidUTF8 (the payload must be UTF-8 JSON text). A
// message whose "type" is not one of the 77 decodes to *UnknownMessage,
// which keeps the tag and the raw payload.
//
// Encoding is byte-identical to upstream (serde_json, compact): "type"
// first, members in the order of docs/messages.md, integers in plain decimal, base64 with
// padding, and serde's string escaping (only '"', '\\' and control
// characters are escaped; '<', '>', '&', U+2028 and U+2029 are written
// raw). Encoders append to a caller's buffer and do not allocate.
type Message interface {
	// MessageType returns the message's JSON "type" tag.
	MessageType() string
	// AppendJSON appends the message's JSON payload (no frame header) to dst.
	AppendJSON(dst []byte) []byte
}

// decodableMessage is implemented by the generated message types.
type decodableMessage interface {
	Message
	// decodeJSON reads the members of the top-level object, the decoder
	// being positioned before member number i0.
	decodeJSON(d *jsonDecoder, i0 int)
}

// Opt is an optional message member: Set reports whether it is present and
// V holds its value when it is. The zero Opt is absent.
type Opt[T any] struct {
	// V is the value; it is the zero value when Set is false.
	V T
	// Set reports whether the member is present.
	Set bool
}

// Some returns a present Opt holding v.
//
// The type argument is inferred from v alone: Go does not infer type
// arguments from the type a result is assigned to (here the Opt field), so
// an untyped constant takes its default type. felix.Some(1) is an Opt[int]
// and does not fit an Opt[uint64] field; write felix.Some[uint64](1), or
// pass a typed value (felix.Some(uint64(n)), felix.Some(rid) with rid a
// uint64). Typed variables, the usual case, need no type argument.
func Some[T any](v T) Opt[T] { return Opt[T]{V: v, Set: true} }

// Get returns the value and whether it is present.
func (o Opt[T]) Get() (T, bool) { return o.V, o.Set }

// Or returns the value when present, else def.
func (o Opt[T]) Or(def T) T {
	if o.Set {
		return o.V
	}
	return def
}

// UnknownMessage is a control message whose "type" this package does not
// know. A proxy can forward it unchanged (AppendJSON reproduces Raw) and a
// broker can answer it with Unsupported.
type UnknownMessage struct {
	// Type is the message's "type" tag.
	Type string
	// Raw is the whole payload as received (a copy, not an alias of the
	// decoded buffer).
	Raw []byte
}

// MessageType returns the unknown "type" tag.
func (m *UnknownMessage) MessageType() string { return m.Type }

// AppendJSON appends the raw payload to dst.
func (m *UnknownMessage) AppendJSON(dst []byte) []byte { return append(dst, m.Raw...) }

// RequestID returns the top-level "request_id" member when it is a JSON
// unsigned integer, the way a broker reads an unknown request to echo it in
// Unsupported; any other value (or none) is absent.
func (m *UnknownMessage) RequestID() Opt[uint64] {
	d := jsonDecoder{buf: m.Raw}
	if !d.beginObject("") {
		return Opt[uint64]{}
	}
	for i := 0; ; i++ {
		key, ok := d.member(i, "")
		if !ok {
			return Opt[uint64]{}
		}
		if string(key) == "request_id" {
			if c := d.ws(); c >= '0' && c <= '9' {
				if v := d.u64("request_id"); d.err == nil {
					return Some(v)
				}
			}
			return Opt[uint64]{}
		}
		d.skip("")
	}
}

// MessageTypes returns the "type" tags of the 77 known control messages.
func MessageTypes() []string {
	out := make([]string, len(messageTypes))
	copy(out, messageTypes[:])
	return out
}

// NewMessage returns a new zero message of the given type, or nil when the
// type is not one of the known control messages.
func NewMessage(typ string) Message {
	if m := newMessage(typ); m != nil {
		return m
	}
	return nil
}

// DecodeMessage decodes one JSON control payload (the payload of a frame
// with flags 0) into its message type. An unknown "type" yields an
// *UnknownMessage. Errors are *Error values of class ErrInvalidJSON (or
// ErrInvalidUTF8) naming the member at fault. The returned message does not
// alias payload.
func DecodeMessage(payload []byte) (Message, error) {
	d := jsonDecoder{buf: payload}
	raw, i0 := d.head()
	if d.err != nil {
		return nil, d.err
	}
	m := decodeKnown(string(raw), &d, i0)
	if m == nil {
		typ := string(raw) // before the members below reuse the scratch it may be in
		for i := i0; ; i++ {
			key, ok := d.member(i, "")
			if !ok {
				break
			}
			if string(key) == "type" {
				d.typeMember()
			} else {
				d.skipMember(key)
			}
		}
		d.end()
		if d.err != nil {
			return nil, d.err
		}
		return &UnknownMessage{Type: typ, Raw: bytes.Clone(payload)}, nil
	}
	d.end()
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// unmarshalMessage decodes b into m, which must be of the decoded type.
func unmarshalMessage[T any, P interface {
	*T
	Message
}](b []byte, m P) error {
	got, err := DecodeMessage(b)
	if err != nil {
		return err
	}
	g, ok := got.(P)
	if !ok {
		return &Error{Class: ErrInvalidJSON, Layout: jsonLayout, Field: "type", Offset: -1,
			Detail: "message type " + got.MessageType() + ", want " + m.MessageType()}
	}
	*m = *g
	return nil
}

// head reads a control payload up to its type: the "type" value and the
// index of the member the message's decodeJSON reads first. When "type"
// is the first member, as every encoder writes it, the cursor is left
// after it (i0 1); else the whole object is scanned for it and the cursor
// is back on the first member (i0 0).
func (d *jsonDecoder) head() (typ []byte, i0 int) {
	if !d.beginObject("") {
		return nil, 0
	}
	body := d.pos
	key, ok := d.member(0, "")
	if d.err != nil {
		return nil, 0
	}
	if !ok {
		d.fail("type", "missing member \"type\"")
		return nil, 0
	}
	if string(key) == "type" {
		typ = d.typeValue()
		d.typeSeen = true
		return typ, 1
	}
	d.pos, d.depth = body, 1
	typ = []byte(d.findType())
	d.pos, d.depth = body, 1
	return typ, 0
}

// typeValue reads the value of a "type" member: a string.
func (d *jsonDecoder) typeValue() []byte {
	if d.err != nil {
		return nil
	}
	if d.ws() != '"' {
		d.wrongType("type", "string")
		return nil
	}
	s, _ := d.rawString("type")
	return s
}

// typeMember consumes a top-level "type" member met while decoding the
// other members: the first one was already read, a second is a duplicate.
func (d *jsonDecoder) typeMember() {
	if d.typeSeen {
		d.fail("type", "duplicate member")
		return
	}
	d.typeSeen = true
	d.typeValue()
}

// findType scans the whole top-level object (the cursor after its '{') for
// its "type" member, validating the JSON on the way, and checks that only
// whitespace follows the object.
func (d *jsonDecoder) findType() string {
	typ, found := "", false
	for i := 0; ; i++ {
		key, ok := d.member(i, "")
		if !ok {
			break
		}
		if string(key) == "type" {
			if found {
				d.fail("type", "duplicate member")
				return ""
			}
			found = true
			typ = string(d.typeValue())
			continue
		}
		d.skipMember(key)
	}
	d.end()
	if d.err == nil && !found {
		d.fail("type", "missing member \"type\"")
	}
	return typ
}

// skipMember skips the value of an unknown member, naming the member in
// the error if the value is not valid JSON.
func (d *jsonDecoder) skipMember(key []byte) {
	if d.err != nil {
		return
	}
	name := key
	if d.escaped {
		name = bytes.Clone(key)
	}
	d.skip("")
	if d.err != nil && d.err.Field == "" {
		d.err.Field = string(name)
	}
}

// AppendMessage appends m's JSON payload (no frame header) to dst. It fails
// only for a nil message or an UnknownMessage without a payload.
func AppendMessage(dst []byte, m Message) ([]byte, error) {
	if err := checkAppendable(m); err != nil {
		return dst, err
	}
	return m.AppendJSON(dst), nil
}

// AppendMessageFrame appends a whole control frame (12-byte header with
// flags 0, then m's JSON payload) to dst.
func AppendMessageFrame(dst []byte, m Message) ([]byte, error) {
	if err := checkAppendable(m); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = BeginFrame(dst, 0)
	dst = m.AppendJSON(dst)
	return FinishFrame(dst, start)
}

func checkAppendable(m Message) error {
	if m == nil {
		return &Error{Class: ErrInvalidValue, Layout: jsonLayout, Field: "type", Offset: -1, Detail: "nil message"}
	}
	if u, ok := m.(*UnknownMessage); ok && (u == nil || len(u.Raw) == 0) {
		return &Error{Class: ErrInvalidValue, Layout: jsonLayout, Field: "type", Offset: -1, Detail: "unknown message without a payload"}
	}
	return nil
}

// DecodeMessageFrame decodes b as exactly one control frame: the header
// (DecodeFrame's checks, maxPayload 0 meaning DefaultMaxFrameBytes), flags
// that must be 0 (ErrBadFlagCombination otherwise), and the JSON payload.
func DecodeMessageFrame(b []byte, maxPayload uint32) (Message, error) {
	f, err := DecodeFrame(b, maxPayload)
	if err != nil {
		return nil, err
	}
	if err := f.Flags.CheckLayout(LayoutJSON); err != nil {
		return nil, err
	}
	return DecodeMessage(f.Payload)
}
