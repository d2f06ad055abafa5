package felix

import (
	"slices"
	"strconv"
	"strings"
)

// Shared value types of the JSON control messages (docs/messages.md §2)
// that are not plain objects: enumerations and tagged variants. The plain
// objects (BrokerEndpoint, ErrorDetail, GroupRecord, ...) are generated
// with the messages.

// stringMember reads a member whose value must be a JSON string and
// returns its unescaped bytes (valid until the next read); ok is false
// after any failure, which is recorded in d.
func (d *jsonDecoder) stringMember(field string) ([]byte, bool) {
	if d.err != nil {
		return nil, false
	}
	if d.ws() != '"' {
		d.wrongType(field, "string")
		return nil, false
	}
	return d.rawString(field)
}

// decodeWord reads a member that must be one of the words of a closed
// enumeration into *dst, refusing any other word.
func decodeWord[T ~string](d *jsonDecoder, field, what string, dst *T, words ...T) {
	s, ok := d.stringMember(field)
	if !ok {
		return
	}
	for _, w := range words {
		if string(w) == string(s) {
			*dst = w
			return
		}
	}
	d.fail(field, "unknown "+what+" "+strconv.Quote(string(s)))
}

// ---------------------------------------------------------------------------
// Enumerations from codes.go

func (m AckMode) appendJSON(dst []byte) []byte { return appendJSONString(dst, m.String()) }

func (m *AckMode) decodeJSON(d *jsonDecoder, field string) {
	s, ok := d.stringMember(field)
	if !ok {
		return
	}
	if v, known := ParseAckMode(string(s)); known {
		*m = v
		return
	}
	d.fail(field, "unknown ack mode "+strconv.Quote(string(s)))
}

func (c ErrorCode) appendJSON(dst []byte) []byte { return appendJSONString(dst, string(c)) }

// decodeJSON keeps any string: an unknown code stays as received. A known
// code is returned as its constant, without allocating.
func (c *ErrorCode) decodeJSON(d *jsonDecoder, field string) {
	s, ok := d.stringMember(field)
	if !ok {
		return
	}
	for i := 1; i < len(codeTable); i++ {
		if string(codeTable[i].code) == string(s) {
			*c = codeTable[i].code
			return
		}
	}
	switch string(s) {
	case string(CodeRevoked):
		*c = CodeRevoked
	case string(CodeStaleWidth):
		*c = CodeStaleWidth
	default:
		*c = ErrorCode(s)
	}
}

func (r RetryClass) appendJSON(dst []byte) []byte { return appendJSONString(dst, r.String()) }

// decodeJSON reads a retry word; an unknown word reads as RetryFatal.
func (r *RetryClass) decodeJSON(d *jsonDecoder, field string) {
	s, ok := d.stringMember(field)
	if ok {
		*r = ParseRetryClass(string(s))
	}
}

// ---------------------------------------------------------------------------
// Closed word sets

// CursorErrorReason is the reason of a subscribe_cursor_error.
type CursorErrorReason string

// Cursor error reasons.
const (
	// CursorTooOld: the requested offset is no longer retained; available
	// is the oldest retained offset.
	CursorTooOld CursorErrorReason = "too_old"
	// CursorInFuture: the requested offset is past the tail; available is
	// the current tail.
	CursorInFuture CursorErrorReason = "in_future"
)

func (r CursorErrorReason) appendJSON(dst []byte) []byte { return appendJSONString(dst, string(r)) }

func (r *CursorErrorReason) decodeJSON(d *jsonDecoder, field string) {
	decodeWord(d, field, "cursor error reason", r, CursorTooOld, CursorInFuture)
}

// ShardKind says whether a shard query names a stream or a cache.
type ShardKind string

// Shard kinds.
const (
	ShardKindStream ShardKind = "stream" // a stream's shards
	ShardKindCache  ShardKind = "cache"  // a cache's shards
)

func (k ShardKind) appendJSON(dst []byte) []byte { return appendJSONString(dst, string(k)) }

func (k *ShardKind) decodeJSON(d *jsonDecoder, field string) {
	decodeWord(d, field, "shard kind", k, ShardKindStream, ShardKindCache)
}

// ---------------------------------------------------------------------------
// Tagged variants

// unitOrSingle reads an externally tagged enum value: a string names a unit
// variant (returned in unit), a one-member object names a variant with data
// (its name returned in tag, the cursor left on its value). After reading
// the value the caller must call endSingle.
func (d *jsonDecoder) unitOrSingle(field string) (unit, tag string) {
	if d.err != nil {
		return "", ""
	}
	switch d.ws() {
	case '"':
		s, ok := d.rawString(field)
		if ok {
			return string(s), ""
		}
		return "", ""
	case '{':
		if !d.beginObject(field) {
			return "", ""
		}
		key, ok := d.member(0, field)
		if !ok {
			d.fail(field, "expected an object with a single member, found {}")
			return "", ""
		}
		return "", string(key)
	}
	d.wrongType(field, "string or object")
	return "", ""
}

// unitNull accepts the one-member object form of a unit variant, as serde
// does: {"latest":null} reads as "latest". The cursor is on the value.
func (d *jsonDecoder) unitNull(field string) {
	if !d.null() {
		d.wrongType(field, "null for a unit variant")
		return
	}
	d.endSingle(field)
}

// endSingle closes the one-member object opened by unitOrSingle.
func (d *jsonDecoder) endSingle(field string) {
	if _, more := d.member(1, field); more {
		d.fail(field, "expected an object with a single member")
	}
}

// StartKind selects the variant of a StartPosition.
type StartKind uint8

// Start position kinds.
const (
	StartLatest   StartKind = iota // "latest": only records published from now on
	StartEarliest                  // "earliest": the oldest retained record
	StartOffset                    // {"offset":N}: from offset N
)

// String returns "latest", "earliest", "offset", or "start_kind(n)" for an
// undefined value.
func (k StartKind) String() string {
	switch k {
	case StartLatest:
		return "latest"
	case StartEarliest:
		return "earliest"
	case StartOffset:
		return "offset"
	}
	return "start_kind(" + strconv.Itoa(int(k)) + ")"
}

// StartPosition is where a subscription or group cursor starts: "latest",
// "earliest" or {"offset":N}. The zero value is latest.
type StartPosition struct {
	// Kind selects the variant.
	Kind StartKind
	// Offset is the offset of a StartOffset position.
	Offset uint64
}

// StartAt returns the position {"offset":off}.
func StartAt(off uint64) StartPosition { return StartPosition{Kind: StartOffset, Offset: off} }

func (p StartPosition) appendJSON(dst []byte) []byte {
	switch p.Kind {
	case StartLatest:
		return append(dst, `"latest"`...)
	case StartEarliest:
		return append(dst, `"earliest"`...)
	case StartOffset:
		dst = append(dst, `{"offset":`...)
		dst = appendJSONUint(dst, p.Offset)
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

func (p *StartPosition) decodeJSON(d *jsonDecoder, field string) {
	unit, tag := d.unitOrSingle(field)
	if d.err != nil {
		return
	}
	switch {
	case tag == "latest" || tag == "earliest":
		d.unitNull(field)
		unit = tag
	}
	switch {
	case unit == "latest":
		*p = StartPosition{Kind: StartLatest}
	case unit == "earliest":
		*p = StartPosition{Kind: StartEarliest}
	case tag == "offset":
		off := d.u64(field)
		d.endSingle(field)
		*p = StartAt(off)
	default:
		d.fail(field, "unknown start position "+strconv.Quote(unit+tag))
	}
}

// CacheConditionKind selects the variant of a CacheCondition.
type CacheConditionKind uint8

// Cache condition kinds.
const (
	CondAbsent  CacheConditionKind = iota // "absent": the key has no live entry
	CondVersion                           // {"version":N}: the entry's version is N
)

// CacheCondition is the condition of a cache_put_if: "absent" or
// {"version":N}. The zero value is absent.
type CacheCondition struct {
	// Kind selects the variant.
	Kind CacheConditionKind
	// Version is the expected version of a CondVersion condition.
	Version uint64
}

func (c CacheCondition) appendJSON(dst []byte) []byte {
	switch c.Kind {
	case CondAbsent:
		return append(dst, `"absent"`...)
	case CondVersion:
		dst = append(dst, `{"version":`...)
		dst = appendJSONUint(dst, c.Version)
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

func (c *CacheCondition) decodeJSON(d *jsonDecoder, field string) {
	unit, tag := d.unitOrSingle(field)
	if d.err != nil {
		return
	}
	if tag == "absent" {
		d.unitNull(field)
		unit = tag
	}
	switch {
	case unit == "absent":
		*c = CacheCondition{Kind: CondAbsent}
	case tag == "version":
		v := d.u64(field)
		d.endSingle(field)
		*c = CacheCondition{Kind: CondVersion, Version: v}
	default:
		d.fail(field, "unknown cache condition "+strconv.Quote(unit+tag))
	}
}

// StateOp selects the variant of a StateChange.
type StateOp uint8

// State change operations.
const (
	StatePut    StateOp = iota // "put": set key to value
	StateDelete                // "delete": remove key
)

// StateChange is one change of a commit, tagged by "op":
// {"op":"put","key":K,"value":B64} or {"op":"delete","key":K}.
type StateChange struct {
	// Op selects the variant.
	Op StateOp
	// Key is the state key.
	Key string
	// Value is the new value of a StatePut (base64 on the wire); a
	// StateDelete carries none.
	Value []byte
}

func (c StateChange) appendJSON(dst []byte) []byte {
	switch c.Op {
	case StatePut:
		dst = append(dst, `{"op":"put","key":`...)
		dst = appendJSONString(dst, c.Key)
		dst = append(dst, `,"value":`...)
		dst = appendJSONBytes(dst, c.Value)
		return append(dst, '}')
	case StateDelete:
		dst = append(dst, `{"op":"delete","key":`...)
		dst = appendJSONString(dst, c.Key)
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

func (c *StateChange) decodeJSON(d *jsonDecoder, field string) {
	if !d.beginObject(field) {
		return
	}
	var seen uint64
	op, valueAt := "", -1
	for i := 0; ; i++ {
		key, ok := d.member(i, field)
		if !ok {
			break
		}
		switch string(key) {
		case "op":
			d.dup(&seen, 0, "op")
			op = d.str("op")
		case "key":
			d.dup(&seen, 1, "key")
			c.Key = d.str("key")
		case "value":
			// Only the put variant has a value; read it once the op is known.
			d.dup(&seen, 2, "value")
			valueAt = d.pos
			d.skip("value")
		default:
			d.skipMember(key)
		}
	}
	if d.err != nil {
		return
	}
	switch op {
	case "put":
		c.Op = StatePut
		if valueAt < 0 {
			d.fail("value", "missing required member")
			return
		}
		sub := jsonDecoder{buf: d.buf, pos: valueAt}
		c.Value = sub.bytes("value")
		if sub.err != nil {
			d.err = sub.err
			return
		}
	case "delete":
		c.Op = StateDelete
		c.Value = nil
	case "":
		d.fail("op", "missing required member")
		return
	default:
		d.fail("op", "unknown state change op "+strconv.Quote(op))
		return
	}
	if seen&2 == 0 {
		d.fail("key", "missing required member")
	}
}

// RefusalKind selects the variant of a PublishRefusalReason.
type RefusalKind uint8

// Publish refusal kinds (docs/errors.md §5).
const (
	RefusalUnknownProducer RefusalKind = iota // "unknown_producer"
	RefusalSequenceExpired                    // "sequence_expired"
	RefusalSequenceReused                     // "sequence_reused"
	RefusalSequenceGap                        // {"sequence_gap":{"expected":N}}
	RefusalOffsetMismatch                     // {"offset_mismatch":{"tail":N}}
	RefusalNotLeader                          // {"not_leader":{"node_id":...,"addr":...}}
)

// PublishRefusalReason is the reason of a publish_refused.
type PublishRefusalReason struct {
	// Kind selects the variant.
	Kind RefusalKind
	// Expected is the sequence the leader would append (RefusalSequenceGap).
	Expected uint64
	// Tail is the shard's next offset as checked (RefusalOffsetMismatch).
	Tail uint64
	// NodeID is the shard leader (RefusalNotLeader).
	NodeID string
	// Addr is the leader's client address, when known (RefusalNotLeader).
	Addr Opt[string]
}

func (r PublishRefusalReason) appendJSON(dst []byte) []byte {
	switch r.Kind {
	case RefusalUnknownProducer:
		return append(dst, `"unknown_producer"`...)
	case RefusalSequenceExpired:
		return append(dst, `"sequence_expired"`...)
	case RefusalSequenceReused:
		return append(dst, `"sequence_reused"`...)
	case RefusalSequenceGap:
		dst = append(dst, `{"sequence_gap":{"expected":`...)
		dst = appendJSONUint(dst, r.Expected)
		return append(dst, '}', '}')
	case RefusalOffsetMismatch:
		dst = append(dst, `{"offset_mismatch":{"tail":`...)
		dst = appendJSONUint(dst, r.Tail)
		return append(dst, '}', '}')
	case RefusalNotLeader:
		dst = append(dst, `{"not_leader":{"node_id":`...)
		dst = appendJSONString(dst, r.NodeID)
		if r.Addr.Set {
			dst = append(dst, `,"addr":`...)
			dst = appendJSONString(dst, r.Addr.V)
		}
		return append(dst, '}', '}')
	}
	return append(dst, "null"...)
}

func (r *PublishRefusalReason) decodeJSON(d *jsonDecoder, field string) {
	unit, tag := d.unitOrSingle(field)
	if d.err != nil {
		return
	}
	*r = PublishRefusalReason{}
	switch tag {
	case "unknown_producer", "sequence_expired", "sequence_reused":
		d.unitNull(field)
		unit, tag = tag, ""
	}
	switch {
	case unit == "unknown_producer":
		r.Kind = RefusalUnknownProducer
		return
	case unit == "sequence_expired":
		r.Kind = RefusalSequenceExpired
		return
	case unit == "sequence_reused":
		r.Kind = RefusalSequenceReused
		return
	case tag == "sequence_gap":
		r.Kind = RefusalSequenceGap
	case tag == "offset_mismatch":
		r.Kind = RefusalOffsetMismatch
	case tag == "not_leader":
		r.Kind = RefusalNotLeader
	default:
		d.fail(field, "unknown refusal reason "+strconv.Quote(unit+tag))
		return
	}
	// The variant's data is an object with named members.
	if d.beginObject(tag) {
		var seen uint64
		for i := 0; ; i++ {
			key, ok := d.member(i, tag)
			if !ok {
				break
			}
			switch {
			case r.Kind == RefusalSequenceGap && string(key) == "expected":
				d.dup(&seen, 0, "expected")
				r.Expected = d.u64("expected")
			case r.Kind == RefusalOffsetMismatch && string(key) == "tail":
				d.dup(&seen, 0, "tail")
				r.Tail = d.u64("tail")
			case r.Kind == RefusalNotLeader && string(key) == "node_id":
				d.dup(&seen, 0, "node_id")
				r.NodeID = d.str("node_id")
			case r.Kind == RefusalNotLeader && string(key) == "addr":
				d.dup(&seen, 1, "addr")
				if d.null() {
					r.Addr = Opt[string]{}
				} else {
					r.Addr = Some(d.str("addr"))
				}
			default:
				d.skipMember(key)
			}
		}
		if d.err == nil && seen&1 == 0 {
			d.fail(refusalRequired[r.Kind], "missing required member")
		}
	}
	d.endSingle(field)
}

var refusalRequired = [...]string{RefusalSequenceGap: "expected", RefusalOffsetMismatch: "tail", RefusalNotLeader: "node_id"}

// ---------------------------------------------------------------------------
// Raw JSON

// RawJSON is an arbitrary JSON value carried verbatim (extension.body).
// Decoding stores it in the form upstream's serde_json Value re-encodes it
// to: compact (no whitespace), strings re-escaped the way the encoder
// escapes them, numbers exactly as written (arbitrary precision), object
// members sorted by key with the last of duplicate keys kept. nil means
// absent. An encoder writes it as is, so it must hold one valid JSON value.
type RawJSON []byte

// rawJSON reads any JSON value into its canonical form; null reads as nil.
func (d *jsonDecoder) rawJSON(field string) RawJSON {
	if d.null() || d.err != nil {
		return nil
	}
	out := d.canonicalJSON(nil, field)
	if d.err != nil {
		return nil
	}
	return RawJSON(out)
}

// canonicalJSON appends the canonical form of the value at the cursor.
func (d *jsonDecoder) canonicalJSON(dst []byte, field string) []byte {
	if d.err != nil {
		return dst
	}
	switch c := d.ws(); {
	case c == '"':
		s, ok := d.rawString(field)
		if ok {
			dst = appendJSONString(dst, string(s))
		}
	case c == '{':
		if !d.beginObject(field) {
			return dst
		}
		type member struct {
			key string
			val []byte
		}
		var members []member
		var index map[string]int // built once the object is large
		for i := 0; ; i++ {
			key, ok := d.member(i, field)
			if !ok {
				break
			}
			k := string(key)
			v := d.canonicalJSON(nil, field)
			j := -1
			if index != nil {
				if x, ok := index[k]; ok {
					j = x
				}
			} else {
				j = slices.IndexFunc(members, func(m member) bool { return m.key == k })
			}
			if j >= 0 {
				members[j].val = v
				continue
			}
			members = append(members, member{k, v})
			if index != nil {
				index[k] = len(members) - 1
			} else if len(members) > 16 {
				index = make(map[string]int, 2*len(members))
				for x, m := range members {
					index[m.key] = x
				}
			}
		}
		slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
		dst = append(dst, '{')
		for i, m := range members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, m.key)
			dst = append(dst, ':')
			dst = append(dst, m.val...)
		}
		dst = append(dst, '}')
	case c == '[':
		if !d.beginArray(field) {
			return dst
		}
		dst = append(dst, '[')
		for i := 0; d.elem(i, field); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = d.canonicalJSON(dst, field)
		}
		dst = append(dst, ']')
	default:
		at := d.pos
		d.skip(field)
		if d.err == nil {
			dst = append(dst, d.buf[at:d.pos]...)
		}
	}
	return dst
}

func (v RawJSON) appendJSON(dst []byte) []byte { return append(dst, v...) }
