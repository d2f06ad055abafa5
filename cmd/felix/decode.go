package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/vectors"
)

func init() {
	register(command{
		name:    "decode",
		usage:   "decode [-raw] [-max N] [HEX]",
		summary: "describe a frame (hex argument or stdin) as a vector JSON object; -raw: every frame of a raw byte stream, stopping at the first bad one (shown by its first 256 bytes)",
		run:     runDecode,
	})
}

// maxInput bounds what decode reads from stdin: the largest frame plus its
// hex encoding overhead.
const maxInput = 2*(felix.HeaderLen+felix.MaxPayloadLen) + 1

func runDecode(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("decode")
	raw := fs.Bool("raw", false, "read raw frame bytes from stdin instead of hex")
	maxPayload := fs.Uint64("max", felix.DefaultMaxFrameBytes, "payload limit in bytes")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *maxPayload == 0 || *maxPayload > felix.MaxPayloadLen {
		return usagef("-max must be in 1..%d", uint64(felix.MaxPayloadLen))
	}
	if *raw {
		if fs.NArg() > 0 {
			return usagef("-raw reads stdin; it takes no HEX argument")
		}
		return decodeStream(stdin, stdout, uint32(*maxPayload), *maxPayload != felix.DefaultMaxFrameBytes)
	}
	frame, err := readFrameInput(fs.Args(), false, stdin)
	if err != nil {
		return err
	}
	desc, decErr := describe(frame, uint32(*maxPayload), *maxPayload != felix.DefaultMaxFrameBytes)
	if desc != nil {
		if err := writeObject(stdout, desc); err != nil {
			return err
		}
	}
	return decErr
}

// decodeStream describes every frame of a raw byte stream (a capture of one
// QUIC stream, say), one JSON object per frame, and stops at the first frame
// that does not decode. A bad header is shown by its 12 bytes alone: the
// rest of the input is not echoed, since where the next frame would start
// is unknown.
func decodeStream(stdin io.Reader, stdout io.Writer, maxPayload uint32, showMax bool) error {
	in := bufio.NewReaderSize(stdin, 64<<10)
	head := make([]byte, felix.HeaderLen)
	for n := 0; ; n++ {
		got, err := io.ReadFull(in, head)
		switch {
		case err == io.EOF:
			if n == 0 {
				return errors.New("stdin is empty: no frame to decode")
			}
			return nil
		case err == io.ErrUnexpectedEOF:
			return describeAndStop(stdout, head[:got], maxPayload, showMax)
		case err != nil:
			return fmt.Errorf("reading stdin: %v", err)
		}
		h, herr := felix.ParseHeader(head)
		if herr == nil && h.Length > maxPayload {
			herr = felix.ErrFrameTooLarge
		}
		if herr != nil {
			return describeAndStop(stdout, head, maxPayload, showMax)
		}
		frame := make([]byte, felix.HeaderLen+int(h.Length))
		copy(frame, head)
		got, err = io.ReadFull(in, frame[felix.HeaderLen:])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return fmt.Errorf("reading stdin: %v", err)
		}
		frame = frame[:felix.HeaderLen+got]
		desc, decErr := describe(frame, maxPayload, showMax)
		if desc != nil {
			if err := writeObject(stdout, desc); err != nil {
				return err
			}
		}
		if decErr != nil {
			return fmt.Errorf("frame %d: %w", n+1, decErr)
		}
	}
}

// describeAndStop prints the description of a frame that cannot be decoded
// and returns its error.
func describeAndStop(stdout io.Writer, frame []byte, maxPayload uint32, showMax bool) error {
	desc, err := describe(frame, maxPayload, showMax)
	if desc != nil {
		if werr := writeObject(stdout, desc); werr != nil {
			return werr
		}
	}
	if err == nil {
		err = errors.New("frame does not decode")
	}
	return fmt.Errorf("stopped at the first frame that does not decode: %w", err)
}

// readFrameInput returns the frame bytes from the hex argument or stdin.
func readFrameInput(args []string, raw bool, stdin io.Reader) ([]byte, error) {
	switch {
	case len(args) > 1:
		return nil, usagef("at most one HEX argument")
	case len(args) == 1 && raw:
		return nil, usagef("-raw reads stdin; it takes no HEX argument")
	case len(args) == 1:
		return decodeHex(args[0])
	}
	in, err := io.ReadAll(io.LimitReader(stdin, maxInput))
	if err != nil {
		return nil, fmt.Errorf("reading stdin: %v", err)
	}
	if raw {
		return in, nil
	}
	return decodeHex(string(in))
}

// decodeHex decodes hex text, ignoring whitespace anywhere in it.
func decodeHex(s string) ([]byte, error) {
	s = strings.Join(strings.Fields(s), "")
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("input is not hex: %v", err)
	}
	return b, nil
}

// describe returns the vector description of frame. For a frame that does
// not decode it returns an `invalid` description and the decoding error.
func describe(frame []byte, maxPayload uint32, showMax bool) ([]vectors.Member, error) {
	f, err := felix.DecodeFrame(frame, maxPayload)
	if err != nil {
		return invalid(frame, nil, vectors.FrameLayout, maxPayload, showMax, err), err
	}
	layout := f.Flags.Layout()
	if layout == felix.LayoutUnknown {
		// No base bit: receivers hand such a frame to the JSON decoder,
		// which refuses the flags.
		layout = felix.LayoutJSON
	}
	kind := layout.String()
	c, ok := vectors.Lookup(kind)
	if !ok {
		return nil, fmt.Errorf("flags %v select kind %s, which has no codec registered yet", f.Flags, kind)
	}
	members, reenc, err := decodeSafely(c, frame, maxPayload)
	if err != nil {
		return invalid(frame, f.Payload, kind, maxPayload, showMax, err), err
	}
	out := []vectors.Member{
		{Name: "name", Value: "decoded"},
		{Name: "kind", Value: kind},
		{Name: "flags", Value: uint16(f.Flags)},
		{Name: "flag_names", Value: f.Flags.String()},
		{Name: "frame_hex", Value: hex.EncodeToString(frame)},
		{Name: "payload_hex", Value: hex.EncodeToString(f.Payload)},
	}
	if !bytes.Equal(reenc, frame) {
		// Valid but not canonical: say what an encoder produces instead.
		out = append(out, vectors.Member{Name: "canonical_frame_hex", Value: hex.EncodeToString(reenc)})
	}
	for _, m := range members {
		if m.Name == "payload_json" {
			text, err := jsonText(m.Value)
			if err != nil {
				return nil, fmt.Errorf("codec %s: payload_json: %v", kind, err)
			}
			m.Value = text
		}
		out = append(out, m)
	}
	return out, nil
}

// invalid describes a frame that failed to decode with layout. payload is
// the frame's payload when the frame itself decoded, else nil.
func invalid(frame, payload []byte, layout string, maxPayload uint32, showMax bool, err error) []vectors.Member {
	class := felix.ErrorClass(err)
	if class == "" {
		class = "unclassified"
	}
	out := []vectors.Member{
		{Name: "name", Value: "decoded"},
		{Name: "kind", Value: "invalid"},
		{Name: "layout", Value: layout},
		{Name: "error", Value: class},
	}
	if len(frame) >= 8 {
		fl := uint16(frame[6])<<8 | uint16(frame[7])
		out = append(out, vectors.Member{Name: "flags", Value: fl})
		if bytes.HasPrefix(frame, []byte("FLX1")) {
			// Name the bits only when the header is a Felix header at all.
			out = append(out, vectors.Member{Name: "flag_names", Value: felix.Flags(fl).String()})
		}
	}
	if showMax {
		out = append(out, vectors.Member{Name: "max_frame_bytes", Value: maxPayload})
	}
	if len(frame) > maxInvalidEcho {
		// A bad frame is shown by its head: echoing megabytes of hex
		// helps nobody (frame_bytes says how long it was).
		out = append(out,
			vectors.Member{Name: "frame_hex", Value: hex.EncodeToString(frame[:maxInvalidEcho])},
			vectors.Member{Name: "frame_bytes", Value: len(frame)},
			vectors.Member{Name: "frame_hex_truncated", Value: true},
		)
		return append(out, vectors.Member{Name: "note", Value: err.Error()})
	}
	out = append(out,
		vectors.Member{Name: "frame_hex", Value: hex.EncodeToString(frame)},
	)
	if payload != nil {
		out = append(out, vectors.Member{Name: "payload_hex", Value: hex.EncodeToString(payload)})
	}
	return append(out, vectors.Member{Name: "note", Value: err.Error()})
}

// maxInvalidEcho is how many bytes of a frame that does not decode the
// view echoes as hex; the rest is cut (frame_hex_truncated).
const maxInvalidEcho = 256

// decodeSafely runs a codec's Decode, turning a panic into an error.
func decodeSafely(c vectors.Codec, frame []byte, maxPayload uint32) (members []vectors.Member, reenc []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("codec %s panicked: %v", c.Kind, p)
		}
	}()
	return c.Decode(frame, maxPayload)
}

// jsonText turns a payload_json value (string or raw JSON) into its text.
func jsonText(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.RawMessage:
		return vectors.JSONText(x)
	case []byte:
		return string(x), nil
	}
	return "", errors.New("unexpected type")
}

// writeObject writes members as one JSON object, in order, two-space
// indented, with a trailing newline.
func writeObject(w io.Writer, members []vectors.Member) error {
	var buf bytes.Buffer
	buf.WriteString("{\n")
	for i, m := range members {
		key, err := json.Marshal(m.Name)
		if err != nil {
			return err
		}
		var val bytes.Buffer
		enc := json.NewEncoder(&val)
		enc.SetEscapeHTML(false)
		enc.SetIndent("  ", "  ")
		if err := enc.Encode(m.Value); err != nil {
			return fmt.Errorf("member %s: %v", m.Name, err)
		}
		buf.WriteString("  ")
		buf.Write(key)
		buf.WriteString(": ")
		buf.Write(bytes.TrimRight(val.Bytes(), "\n"))
		if i < len(members)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("}\n")
	_, err := w.Write(buf.Bytes())
	return err
}
