package vectors

import (
	"encoding/json"
	"fmt"

	"github.com/flxproto/felix"
)

// The json_message kind: a JSON control message in a frame with flags 0.
// Its members are payload_json (the exact payload text, as a JSON string)
// and message_type (the decoded "type" tag).
func init() {
	Register(Codec{Kind: "json_message", Decode: decodeJSONMessage, Encode: encodeJSONMessage})
}

func decodeJSONMessage(frame []byte, maxPayload uint32) ([]Member, []byte, error) {
	f, err := felix.DecodeFrame(frame, maxPayload)
	if err != nil {
		return nil, nil, err
	}
	if err := f.Flags.CheckLayout(felix.LayoutJSON); err != nil {
		return nil, nil, err
	}
	m, err := felix.DecodeMessage(f.Payload)
	if err != nil {
		return nil, nil, err
	}
	re, err := felix.AppendMessageFrame(nil, m)
	if err != nil {
		return nil, nil, err
	}
	members := []Member{
		{Name: "payload_json", Value: string(f.Payload)},
		{Name: "message_type", Value: m.MessageType()},
	}
	return members, re, nil
}

// encodeJSONMessage builds the canonical frame of payload_json: the payload
// is decoded and re-encoded, so a non-canonical payload yields the frame a
// vector gives as canonical_frame_hex.
func encodeJSONMessage(v map[string]json.RawMessage, flags felix.Flags) ([]byte, error) {
	if err := flags.CheckLayout(felix.LayoutJSON); err != nil {
		return nil, err
	}
	raw, ok := v["payload_json"]
	if !ok {
		return nil, fmt.Errorf("json_message: payload_json missing")
	}
	text, err := JSONText(raw)
	if err != nil {
		return nil, fmt.Errorf("json_message: payload_json: %w", err)
	}
	m, err := felix.DecodeMessage([]byte(text))
	if err != nil {
		return nil, err
	}
	if mt, ok := v["message_type"]; ok {
		var want string
		if err := json.Unmarshal(mt, &want); err != nil {
			return nil, fmt.Errorf("json_message: message_type is not a string")
		}
		if want != m.MessageType() {
			return nil, fmt.Errorf("json_message: payload type %q, message_type %q", m.MessageType(), want)
		}
	}
	return felix.AppendMessageFrame(nil, m)
}
