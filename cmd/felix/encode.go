package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/vectors"
)

func init() {
	register(command{
		name:    "encode",
		usage:   "encode [FILE]",
		summary: "print the frame hex of a vector JSON object (from FILE or stdin)",
		run:     runEncode,
	})
}

func runEncode(_ context.Context, args []string, stdin io.Reader, stdout, _ io.Writer) error {
	fs := newFlagSet("encode")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var in []byte
	var err error
	switch fs.NArg() {
	case 0:
		in, err = io.ReadAll(stdin)
	case 1:
		in, err = os.ReadFile(fs.Arg(0))
	default:
		return usagef("at most one FILE")
	}
	if err != nil {
		return err
	}
	frame, err := encodeVector(in)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, hex.EncodeToString(frame))
	return err
}

// encodeVector builds the frame a vector JSON object describes, with the
// codec of its kind.
func encodeVector(in []byte) ([]byte, error) {
	var v map[string]json.RawMessage
	if err := json.Unmarshal(in, &v); err != nil || v == nil {
		return nil, fmt.Errorf("input is not a vector JSON object: %v", errOrNull(err))
	}
	kind := "json_message"
	if _, ok := v["kind"]; !ok {
		if _, ok := v["payload_json"]; !ok {
			return nil, fmt.Errorf("not a vector object: no kind (absent means json_message, which needs payload_json); kinds: %s", strings.Join(vectors.Kinds(), ", "))
		}
	}
	if raw, ok := v["kind"]; ok {
		if err := json.Unmarshal(raw, &kind); err != nil {
			return nil, fmt.Errorf("kind is not a string")
		}
	}
	var flags uint16
	if raw, ok := v["flags"]; ok {
		if err := json.Unmarshal(raw, &flags); err != nil {
			return nil, fmt.Errorf("flags is not a number in 0..65535")
		}
	}
	if kind == "invalid" {
		return nil, fmt.Errorf("an invalid vector describes no value to encode (its frame is frame_hex)")
	}
	c, ok := vectors.Lookup(kind)
	if !ok {
		return nil, fmt.Errorf("unknown kind %q; kinds: %s", kind, strings.Join(vectors.Kinds(), ", "))
	}
	var frame []byte
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("codec %s panicked: %v", kind, p)
			}
		}()
		frame, err = c.Encode(v, felix.Flags(flags))
		return err
	}()
	return frame, err
}

func errOrNull(err error) any {
	if err == nil {
		return "null"
	}
	return err
}
