package conn

import (
	"reflect"

	"github.com/flxproto/felix"
)

// This file bounds the size of a JSON answer before it is encoded, so that
// an answer's bytes are counted against the answer budgets (framing.go)
// before the encoding exists: answers waiting for room hold no encoding,
// and the answers being encoded at once never exceed the budgets (issue
// 35: one connection with 64 cache_get answers of 16 MiB in flight held
// 64 encodings, ≈ 1 GiB, when each was encoded before the budget was
// asked).

// messageFrameBound returns an upper bound of the size of m's JSON frame
// (header included), computed from m's fields without encoding it: a byte
// slice costs its base64 length, a string six bytes per byte (the longest
// JSON escape), a number 24 bytes, and each field or element a fixed
// allowance for its name and punctuation.
func messageFrameBound(m felix.Message) int {
	if m == nil {
		return felix.HeaderLen
	}
	return felix.HeaderLen + 256 + jsonBound(reflect.ValueOf(m), 0)
}

// fieldAllowance is what each struct field's name, quotes, colon and comma
// may cost (JSON names are short snake_case words).
const fieldAllowance = 64

func jsonBound(v reflect.Value, depth int) int {
	if depth > 16 {
		return 0 // no Felix message nests this deep
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return 4
		}
		return jsonBound(v.Elem(), depth+1)
	case reflect.String:
		return 2 + 6*v.Len()
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return 2 + 4*((v.Len()+2)/3)
		}
		n := 2
		for i := range v.Len() {
			n += 1 + jsonBound(v.Index(i), depth+1)
		}
		return n
	case reflect.Struct:
		n := 2
		for i := range v.NumField() {
			n += fieldAllowance + jsonBound(v.Field(i), depth+1)
		}
		return n
	case reflect.Map:
		n := 2
		it := v.MapRange()
		for it.Next() {
			n += 4 + jsonBound(it.Key(), depth+1) + jsonBound(it.Value(), depth+1)
		}
		return n
	default: // numbers and booleans
		return 24
	}
}
