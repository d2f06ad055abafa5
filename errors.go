package felix

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors, one per error class of the conformance vector contract
// (vectors/FORMAT.md). Every decoding error returned by this package wraps
// exactly one of them, so callers can test the class with errors.Is and read
// the location from the *Error returned by errors.As.
var (
	// ErrTruncated: fewer bytes than the header or a length/count field requires.
	ErrTruncated = errors.New("truncated")
	// ErrBadMagic: the header magic is not "FLX1".
	ErrBadMagic = errors.New("bad magic")
	// ErrBadVersion: the header version is not 1.
	ErrBadVersion = errors.New("bad version")
	// ErrUnknownFlags: a flag bit outside KnownFlags is set.
	ErrUnknownFlags = errors.New("unknown flags")
	// ErrBadFlagCombination: known flag bits in a combination the layout refuses.
	ErrBadFlagCombination = errors.New("bad flag combination")
	// ErrFrameTooLarge: a length above the configured maximum, or a value
	// too large for its length field when encoding.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrTrailingBytes: bytes left over after a layout was fully read.
	ErrTrailingBytes = errors.New("trailing bytes")
	// ErrInvalidUTF8: a text field that must be UTF-8 is not.
	ErrInvalidUTF8 = errors.New("invalid utf-8")
	// ErrInvalidValue: a field holds a value outside its allowed set.
	ErrInvalidValue = errors.New("invalid value")
	// ErrInvalidJSON: a JSON control payload is malformed or has the wrong shape.
	ErrInvalidJSON = errors.New("invalid json")
)

// classNames maps each sentinel to its class name in vectors/FORMAT.md.
var classNames = []struct {
	err  error
	name string
}{
	{ErrTruncated, "truncated"},
	{ErrBadMagic, "bad_magic"},
	{ErrBadVersion, "bad_version"},
	{ErrUnknownFlags, "unknown_flags"},
	{ErrBadFlagCombination, "bad_flag_combination"},
	{ErrFrameTooLarge, "frame_too_large"},
	{ErrTrailingBytes, "trailing_bytes"},
	{ErrInvalidUTF8, "invalid_utf8"},
	{ErrInvalidValue, "invalid_value"},
	{ErrInvalidJSON, "invalid_json"},
}

// ErrorClass returns the vectors/FORMAT.md class name of err ("truncated",
// "bad_magic", ...), or "" when err is nil or belongs to no class.
func ErrorClass(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range classNames {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return ""
}

// ClassError returns the sentinel error for a vectors/FORMAT.md class name,
// or nil if the name is not a class.
func ClassError(name string) error {
	for _, c := range classNames {
		if c.name == name {
			return c.err
		}
	}
	return nil
}

// Error is the error type returned by every decoder and encoder in this
// package. It names the error class (one of the Err* sentinels, reachable
// with errors.Is) and where the problem was.
type Error struct {
	// Class is one of the Err* sentinels.
	Class error
	// Layout names the layout being decoded or encoded, e.g. "frame",
	// "binary_publish_batch", "json_message".
	Layout string
	// Field names the field at fault, e.g. "magic", "count", "tenant_id".
	Field string
	// Offset is the byte offset of the field within the decoded input
	// (frame or payload, as Layout says), or -1 when not meaningful.
	Offset int
	// Flags is the offending flag bit or word, when the error is about flags.
	Flags Flags
	// Detail is a short human-readable elaboration.
	Detail string
	// Err is an optional underlying cause (for example a strconv error).
	Err error
}

// Error formats the error as "felix: <layout>: <class>: <field> at offset N: <detail>".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("felix: ")
	if e.Layout != "" {
		b.WriteString(e.Layout)
		b.WriteString(": ")
	}
	if e.Class != nil {
		b.WriteString(e.Class.Error())
	} else {
		b.WriteString("error")
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	if e.Offset >= 0 {
		b.WriteString(" at offset ")
		b.WriteString(strconv.Itoa(e.Offset))
	}
	if e.Flags != 0 {
		b.WriteString(" (flags ")
		b.WriteString(e.Flags.String())
		b.WriteString(")")
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the class sentinel and, if set, the underlying cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Class, e.Err}
	}
	return []error{e.Class}
}
