package vectors

import (
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/flxproto/felix"
)

func jsonFrame(t *testing.T, payload string, flags felix.Flags) []byte {
	t.Helper()
	f, err := felix.AppendFrame(nil, flags, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestJSONMessageCodec(t *testing.T) {
	c, ok := Lookup("json_message")
	if !ok {
		t.Fatal("json_message codec not registered")
	}
	in := `{"request_id":7,"type":"publish_ok" , "x":1}`
	members, re, err := c.Decode(jsonFrame(t, in, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 || members[0].Name != "payload_json" || members[0].Value != in ||
		members[1].Name != "message_type" || members[1].Value != "publish_ok" {
		t.Fatalf("members %+v", members)
	}
	canonical := jsonFrame(t, `{"type":"publish_ok","request_id":7}`, 0)
	if hex.EncodeToString(re) != hex.EncodeToString(canonical) {
		t.Fatalf("re-encoded %x, want %x", re, canonical)
	}

	// Encode builds the canonical frame from payload_json.
	payload, _ := json.Marshal(in)
	v := map[string]json.RawMessage{"payload_json": payload, "message_type": json.RawMessage(`"publish_ok"`)}
	enc, err := c.Encode(v, 0)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(enc) != hex.EncodeToString(canonical) {
		t.Fatalf("encoded %x, want %x", enc, canonical)
	}
	// payload_json given as raw JSON rather than a string is accepted too.
	enc, err = c.Encode(map[string]json.RawMessage{"payload_json": json.RawMessage(in)}, 0)
	if err != nil || hex.EncodeToString(enc) != hex.EncodeToString(canonical) {
		t.Fatalf("raw payload_json: %x, %v", enc, err)
	}

	for name, bad := range map[string]func() error{
		"flags on encode": func() error { _, err := c.Encode(v, 1); return err },
		"type mismatch": func() error {
			_, err := c.Encode(map[string]json.RawMessage{"payload_json": payload, "message_type": json.RawMessage(`"ok"`)}, 0)
			return err
		},
		"no payload_json": func() error { _, err := c.Encode(map[string]json.RawMessage{}, 0); return err },
		"invalid payload": func() error {
			_, err := c.Encode(map[string]json.RawMessage{"payload_json": json.RawMessage(`"{\"type\":1}"`)}, 0)
			return err
		},
	} {
		if bad() == nil {
			t.Errorf("%s: no error", name)
		}
	}

	for _, tc := range []struct {
		name  string
		frame []byte
		class string
	}{
		{"flags", jsonFrame(t, `{"type":"ok"}`, 0x0001), "bad_flag_combination"},
		{"truncated", jsonFrame(t, `{"type":"ok"}`, 0)[:14], "truncated"},
		{"too large", jsonFrame(t, `{"type":"ok"}`, 0), "frame_too_large"},
		{"json", jsonFrame(t, `{"type":"ok"`, 0), "invalid_json"},
		{"utf8", jsonFrame(t, "{\"type\":\"\xff\"}", 0), "invalid_utf8"},
	} {
		max := uint32(0)
		if tc.name == "too large" {
			max = 4
		}
		_, _, err := c.Decode(tc.frame, max)
		if got := felix.ErrorClass(err); got != tc.class {
			t.Errorf("%s: class %q (%v), want %q", tc.name, got, err, tc.class)
		}
	}
}
