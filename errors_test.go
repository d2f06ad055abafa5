package felix_test

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/flxproto/felix"
)

func TestErrorClassNames(t *testing.T) {
	classes := []struct {
		err  error
		name string
	}{
		{felix.ErrTruncated, "truncated"},
		{felix.ErrBadMagic, "bad_magic"},
		{felix.ErrBadVersion, "bad_version"},
		{felix.ErrUnknownFlags, "unknown_flags"},
		{felix.ErrBadFlagCombination, "bad_flag_combination"},
		{felix.ErrFrameTooLarge, "frame_too_large"},
		{felix.ErrTrailingBytes, "trailing_bytes"},
		{felix.ErrInvalidUTF8, "invalid_utf8"},
		{felix.ErrInvalidValue, "invalid_value"},
		{felix.ErrInvalidJSON, "invalid_json"},
	}
	for _, c := range classes {
		if got := felix.ErrorClass(c.err); got != c.name {
			t.Errorf("ErrorClass(%v) = %q, want %q", c.err, got, c.name)
		}
		if got := felix.ClassError(c.name); got != c.err {
			t.Errorf("ClassError(%q) = %v", c.name, got)
		}
		wrapped := &felix.Error{Class: c.err, Layout: "frame", Offset: -1}
		if got := felix.ErrorClass(wrapped); got != c.name {
			t.Errorf("ErrorClass(*Error{%v}) = %q", c.err, got)
		}
		// Each wrapped error belongs to exactly one class.
		for _, o := range classes {
			if o.err != c.err && errors.Is(wrapped, o.err) {
				t.Errorf("%v also matches %v", wrapped, o.err)
			}
		}
	}
	if felix.ErrorClass(nil) != "" || felix.ErrorClass(io.EOF) != "" {
		t.Error("ErrorClass of nil / foreign error should be empty")
	}
	if felix.ClassError("nope") != nil || felix.ClassError("") != nil {
		t.Error("ClassError of an unknown name should be nil")
	}
}

func TestErrorFormatAndUnwrap(t *testing.T) {
	cause := strconv.ErrRange
	e := &felix.Error{Class: felix.ErrInvalidJSON, Layout: "json_message", Field: "ttl_ms", Offset: 17, Detail: "out of range", Err: cause}
	if got, want := e.Error(), "felix: json_message: invalid json: ttl_ms at offset 17: out of range: value out of range"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, felix.ErrInvalidJSON) || !errors.Is(e, cause) {
		t.Error("errors.Is must reach both the class and the cause")
	}
	var fe *felix.Error
	if !errors.As(error(e), &fe) || fe.Field != "ttl_ms" {
		t.Error("errors.As")
	}

	flagErr := &felix.Error{Class: felix.ErrUnknownFlags, Layout: "frame", Field: "flags", Offset: 6, Flags: 0x8000}
	if got, want := flagErr.Error(), "felix: frame: unknown flags: flags at offset 6 (flags 0x8000(0x8000))"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := (&felix.Error{Offset: -1}).Error(); got != "felix: error" {
		t.Errorf("empty Error() = %q", got)
	}
	if got := (&felix.Error{Class: felix.ErrTruncated, Offset: -1}).Unwrap(); len(got) != 1 || got[0] != felix.ErrTruncated {
		t.Errorf("Unwrap = %v", got)
	}

	// Errors returned by the frame layer carry their class and location.
	_, err := felix.ParseHeader([]byte("FLX2\x00\x01\x00\x00\x00\x00\x00\x00"))
	if !errors.As(err, &fe) || fe.Class != felix.ErrBadMagic || fe.Field != "magic" || fe.Offset != 0 {
		t.Errorf("ParseHeader error = %#v", err)
	}
	if got := err.Error(); got != "felix: frame: bad magic: magic at offset 0: got 0x464c5832" {
		t.Errorf("bad magic message %q", got)
	}
}

// A cursor error says what to do: where to start instead, and why the
// offset is not there.
func TestCursorErrorSaysWhatToDo(t *testing.T) {
	old := (&felix.CursorError{Reason: "too_old", Requested: 3, Available: 10}).Error()
	for _, w := range []string{"subscribe cursor too_old: requested 3, available 10", "trimmed by retention", "start at 10 (or earliest)"} {
		if !strings.Contains(old, w) {
			t.Errorf("%q lacks %q", old, w)
		}
	}
	fut := (&felix.CursorError{Reason: "in_future", Requested: 2645, Available: 1}).Error()
	for _, w := range []string{"subscribe cursor in_future: requested 2645, available 1", "start at latest or earliest", "restarted"} {
		if !strings.Contains(fut, w) {
			t.Errorf("%q lacks %q", fut, w)
		}
	}
}
