package crosslayer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/vectors"
)

// Outcome is what RoundTrip saw of one frame.
type Outcome struct {
	// Layout is the layout the header selected (meaningful when the
	// header parsed).
	Layout felix.Layout
	// Err is the classed error that refused the frame, nil when it decoded.
	Err error
	// Canonical is the frame re-encoded from its decoded value (nil when
	// refused).
	Canonical []byte
}

// RoundTrip checks one whole frame across the layers and returns what it
// saw, or an error describing the first broken property:
//
//   - a refusal carries an error class (felix.ErrorClass);
//   - the root codec of the frame's layout and the vector codec of the same
//     kind agree on accepting or refusing it, and on its re-encoding;
//   - the re-encoding decodes, and re-encoding that gives the same bytes
//     (one round reaches the canonical form);
//   - a frame that is its own canonical form decodes to the same value
//     twice;
//   - the vector description of the frame (its members) encodes back to the
//     canonical frame (decode → describe → encode).
//
// maxPayload is the frame limit; 0 means felix.DefaultMaxFrameBytes.
func RoundTrip(frame []byte, maxPayload uint32) (Outcome, error) {
	var out Outcome
	f, err := felix.DecodeFrame(frame, maxPayload)
	if err != nil {
		out.Err = err
		return out, classed("frame", err)
	}
	out.Layout = f.Flags.Layout()
	v1, canon, err := decodeEncode(f)
	kind := out.Layout.String()
	codec, hasCodec := vectors.Lookup(kind)
	var members []vectors.Member
	var vreenc []byte
	var verr error
	if hasCodec {
		members, vreenc, verr = safeDecode(codec, frame, maxPayload)
	}
	if err != nil {
		out.Err = err
		if cerr := classed(kind, err); cerr != nil {
			return out, cerr
		}
		if hasCodec && verr == nil {
			return out, fmt.Errorf("%s: the root codec refuses the frame (%v) but the vector codec accepts it", kind, err)
		}
		return out, nil
	}
	out.Canonical = canon
	if !hasCodec {
		return out, fmt.Errorf("%s: the root codec accepts the frame but no vector codec is registered", kind)
	}
	if verr != nil {
		return out, fmt.Errorf("%s: the root codec accepts the frame but the vector codec refuses it: %v", kind, verr)
	}
	if !bytes.Equal(vreenc, canon) {
		return out, fmt.Errorf("%s: vector codec re-encodes to %x, root codec to %x", kind, vreenc, canon)
	}

	f2, err := felix.DecodeFrame(canon, 0)
	if err != nil {
		return out, fmt.Errorf("%s: re-encoding %x is not a frame: %v", kind, canon, err)
	}
	if f2.Flags.Layout() != out.Layout {
		return out, fmt.Errorf("%s: re-encoding %x has layout %v", kind, canon, f2.Flags.Layout())
	}
	v2, canon2, err := decodeEncode(f2)
	if err != nil {
		return out, fmt.Errorf("%s: re-encoding %x does not decode: %v", kind, canon, err)
	}
	if !bytes.Equal(canon2, canon) {
		return out, fmt.Errorf("%s: not canonical after one round:\n  first  %x\n  second %x", kind, canon, canon2)
	}
	if bytes.Equal(canon, frame) && !sameValue(v1, v2) {
		return out, fmt.Errorf("%s: canonical frame %x decodes to %#v, then to %#v", kind, frame, v1, v2)
	}

	if !describable(out.Layout, f.Payload) {
		return out, nil
	}
	desc := make(map[string]json.RawMessage, len(members))
	for _, m := range members {
		raw, err := json.Marshal(m.Value)
		if err != nil {
			return out, fmt.Errorf("%s: member %s: %v", kind, m.Name, err)
		}
		desc[m.Name] = raw
	}
	enc, err := safeEncode(codec, desc, f.Flags)
	if err != nil {
		return out, fmt.Errorf("%s: encoding the description of %x: %v", kind, frame, err)
	}
	if !bytes.Equal(enc, canon) {
		return out, fmt.Errorf("%s: description encodes to %x, canonical frame is %x", kind, enc, canon)
	}
	return out, nil
}

// describable reports whether the vector description can carry the frame:
// payload_json is JSON text, so a JSON payload that is not UTF-8 has no
// description.
func describable(l felix.Layout, payload []byte) bool {
	return l != felix.LayoutJSON || utf8.Valid(payload)
}

// decodeEncode decodes f's payload with the root codec of its layout and
// re-encodes the value as a whole frame.
func decodeEncode(f felix.Frame) (value any, frame []byte, err error) {
	l := f.Flags.Layout()
	if err := f.Flags.CheckLayout(l); err != nil {
		return nil, nil, err
	}
	switch l {
	case felix.LayoutJSON:
		m, err := felix.DecodeMessage(f.Payload)
		if err != nil {
			return nil, nil, err
		}
		b, err := felix.AppendMessageFrame(nil, m)
		return m, b, wrapEnc(err)
	case felix.LayoutPublishBatch, felix.LayoutAckedPublishBatch:
		v, err := felix.DecodePublishBatch(f.Flags, f.Payload)
		if err != nil {
			return nil, nil, err
		}
		b, err := felix.AppendPublishBatch(nil, &v)
		return v, b, wrapEnc(err)
	case felix.LayoutPublishAck:
		v, err := felix.DecodePublishAck(f.Flags, f.Payload)
		if err != nil {
			return nil, nil, err
		}
		b, err := felix.AppendPublishAck(nil, &v)
		return v, b, wrapEnc(err)
	case felix.LayoutEventBatch:
		v, err := felix.DecodeEventBatch(f.Flags, f.Payload)
		if err != nil {
			return nil, nil, err
		}
		b, err := felix.AppendEventBatch(nil, &v, felix.EventModifierMask)
		return v, b, wrapEnc(err)
	}
	return nil, nil, fmt.Errorf("layout %v has no codec", l)
}

// errEncode marks a failure to re-encode a decoded value: never a
// legitimate refusal of the input.
var errEncode = errors.New("re-encoding a decoded value failed")

func wrapEnc(err error) error {
	if err != nil {
		return fmt.Errorf("%w: %v", errEncode, err)
	}
	return nil
}

// classed reports an error that is not a classed felix error (or is an
// encoder failure after a successful decode).
func classed(what string, err error) error {
	if errors.Is(err, errEncode) {
		return fmt.Errorf("%s: %v", what, err)
	}
	if felix.ErrorClass(err) == "" {
		return fmt.Errorf("%s: refusal without an error class: %v", what, err)
	}
	return nil
}

// sameValue reports whether two decoded values are deeply equal.
func sameValue(a, b any) bool { return reflect.DeepEqual(a, b) }

func safeDecode(c vectors.Codec, frame []byte, max uint32) (ms []vectors.Member, re []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("vector codec %s panicked: %v", c.Kind, p)
		}
	}()
	return c.Decode(frame, max)
}

func safeEncode(c vectors.Codec, v map[string]json.RawMessage, flags felix.Flags) (b []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("vector codec %s panicked: %v", c.Kind, p)
		}
	}()
	return c.Encode(v, flags)
}
