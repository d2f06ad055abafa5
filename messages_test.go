package felix

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upstreamVectorsDir holds the reference implementation's vectors,
// committed in the repository.
var upstreamVectorsDir = filepath.Join("vectors", "upstream")

// TestMessageUpstreamVectors decodes and re-encodes every JSON vector of
// the upstream set (the ones without "kind").
func TestMessageUpstreamVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(upstreamVectorsDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no upstream vectors in %s", upstreamVectorsDir)
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var v struct {
			Name        string  `json:"name"`
			Kind        *string `json:"kind"`
			PayloadJSON string  `json:"payload_json"`
			FrameHex    string  `json:"frame_hex"`
		}
		require.NoError(t, json.Unmarshal(raw, &v), f)
		if v.Kind != nil {
			continue
		}
		n++
		t.Run(v.Name, func(t *testing.T) {
			frame, err := hex.DecodeString(v.FrameHex)
			require.NoError(t, err)
			fr, err := DecodeFrame(frame, 0)
			require.NoError(t, err)
			require.Equal(t, Flags(0), fr.Flags)
			require.Equal(t, v.PayloadJSON, string(fr.Payload))
			m, err := DecodeMessage(fr.Payload)
			require.NoError(t, err)
			_, unknown := m.(*UnknownMessage)
			require.False(t, unknown, "type %q unknown", m.MessageType())
			out, err := AppendMessageFrame(nil, m)
			require.NoError(t, err)
			assert.Equal(t, v.FrameHex, hex.EncodeToString(out))
		})
	}
	require.Equal(t, 12, n, "JSON vectors in the upstream set")
}

// pinned lists the exact JSON strings docs/messages.md pins, with the value they
// decode to.
var pinned = []struct {
	json string
	msg  Message
}{
	{`{"type":"auth","tenant_id":"t1","token":"demo-token","client_flags":25,"client_features":4095}`,
		&Auth{TenantID: "t1", Token: "demo-token", ClientFlags: Some[uint16](25), ClientFeatures: Some[uint32](4095)}},
	{`{"type":"auth_ok","server_flags":25}`, &AuthOK{ServerFlags: 25}},
	{`{"type":"ok"}`, &OK{}},
	{`{"type":"error","message":"oops"}`, &ErrorMessage{Message: "oops"}},
	{`{"type":"unsupported","request_type":"frobnicate"}`, &Unsupported{RequestType: "frobnicate"}},
	{`{"type":"extension","name":"acme.ping"}`, &Extension{Name: "acme.ping"}},
	{`{"type":"not_leader","node_id":"broker-b","addr":"10.0.0.5:5000","generation":7}`,
		&NotLeader{NodeID: "broker-b", Addr: Some("10.0.0.5:5000"), Generation: 7}},
	{`{"type":"group_records","records":[{"offset":7,"payload":"dg==","attempts":1}],"request_id":1}`,
		&GroupRecords{Records: []GroupRecord{{Offset: 7, Payload: []byte("v"), Attempts: 1}}, RequestID: 1}},
	{`{"type":"shard_moved","subscription_id":7,"resume_from":1234,"node_id":"broker-b","addr":"10.0.0.5:5000","generation":9}`,
		&ShardMoved{SubscriptionID: 7, ResumeFrom: Some[uint64](1234), NodeID: Some("broker-b"), Addr: Some("10.0.0.5:5000"), Generation: 9}},
	{`{"type":"shard_moved","subscription_id":7,"generation":9}`, &ShardMoved{SubscriptionID: 7, Generation: 9}},
	{`{"type":"subscription_lagged","subscription_id":7,"resume_from":1234}`, &SubscriptionLagged{SubscriptionID: 7, ResumeFrom: 1234}},
	{`{"type":"offset_value","request_id":4}`, &OffsetValue{RequestID: 4}},
	{`{"type":"stream_read","tenant_id":"t1","namespace":"ns","stream":"s","shard":0,"from":3,"request_id":1}`,
		&StreamRead{TenantID: "t1", Namespace: "ns", Stream: "s", From: 3, RequestID: 1}},
	{`{"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"primary","key":"demo-key","value":"Y2FjaGVk","ttl_ms":1000}`,
		&CachePut{TenantID: "t1", Namespace: "default", Cache: "primary", Key: "demo-key", Value: []byte("cached"), TTLMs: Some[uint64](1000)}},
	{`{"type":"cache_value","tenant_id":"t1","namespace":"default","cache":"primary","key":"demo-key","value":"Y2FjaGVk"}`,
		&CacheValue{TenantID: "t1", Namespace: "default", Cache: "primary", Key: "demo-key", Value: Some([]byte("cached"))}},
	{`{"type":"group_nack","tenant_id":"t1","namespace":"ns","stream":"jobs","shard":0,"group":"g","offset":1,"request_id":1}`,
		&GroupNack{TenantID: "t1", Namespace: "ns", Stream: "jobs", Group: "g", Offset: 1, RequestID: 1}},
	{`{"type":"subscribe","tenant_id":"t1","namespace":"default","stream":"demo"}`,
		&Subscribe{TenantID: "t1", Namespace: "default", Stream: "demo"}},
	{`{"type":"subscribed","subscription_id":42}`, &Subscribed{SubscriptionID: 42}},
	{`{"type":"publish_ok","request_id":7,"offset":42}`, &PublishOK{RequestID: 7, Offset: Some[uint64](42)}},
	{`{"type":"group_seek","tenant_id":"t","namespace":"n","stream":"s","shard":1,"group":"g","start":"latest","request_id":3}`,
		&GroupSeek{TenantID: "t", Namespace: "n", Stream: "s", Shard: 1, Group: "g", RequestID: 3}},
	{`{"type":"subscriptions_list","filter":{},"request_id":5}`, &SubscriptionsList{RequestID: 5}},
}

var cmpMsg = cmp.Options{cmpopts.EquateEmpty()}

func TestMessagePinned(t *testing.T) {
	for _, tc := range pinned {
		t.Run(tc.msg.MessageType(), func(t *testing.T) {
			assert.Equal(t, tc.json, string(tc.msg.AppendJSON(nil)))
			got, err := DecodeMessage([]byte(tc.json))
			require.NoError(t, err)
			if diff := cmp.Diff(tc.msg, got, cmpMsg); diff != "" {
				t.Errorf("decode mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func mustDecode(t *testing.T, s string) Message {
	t.Helper()
	m, err := DecodeMessage([]byte(s))
	require.NoError(t, err, s)
	return m
}

// TestMessageRejections checks every decode rejection rule, with the class
// and the member the error names.
func TestMessageRejections(t *testing.T) {
	cases := []struct {
		name, json, field string
		class             error
	}{
		{"not an object", `[]`, "", ErrInvalidJSON},
		{"array tagged form", `["ok"]`, "", ErrInvalidJSON},
		{"empty", ``, "", ErrInvalidJSON},
		{"whitespace only", "  \n", "", ErrInvalidJSON},
		{"string", `"ok"`, "", ErrInvalidJSON},
		{"missing type", `{}`, "type", ErrInvalidJSON},
		{"missing type with members", `{"request_id":1}`, "type", ErrInvalidJSON},
		{"type not a string", `{"type":1}`, "type", ErrInvalidJSON},
		{"type null", `{"type":null}`, "type", ErrInvalidJSON},
		{"duplicate type", `{"type":"ok","type":"ok"}`, "type", ErrInvalidJSON},
		{"duplicate type late", `{"a":1,"type":"ok","type":"ok"}`, "type", ErrInvalidJSON},
		{"duplicate type unknown", `{"type":"frob","type":"frob"}`, "type", ErrInvalidJSON},
		{"trailing text", `{"type":"ok"}x`, "", ErrInvalidJSON},
		{"trailing object", `{"type":"ok"}{}`, "", ErrInvalidJSON},
		{"trailing NUL", "{\"type\":\"ok\"}\x00", "", ErrInvalidJSON},
		{"trailing text slow path", `{"a":1,"type":"ok"} 1`, "", ErrInvalidJSON},
		{"trailing text unknown", `{"type":"frob"},`, "", ErrInvalidJSON},
		{"unterminated", `{"type":"ok"`, "", ErrInvalidJSON},
		{"trailing comma", `{"type":"ok",}`, "", ErrInvalidJSON},
		{"missing required", `{"type":"event_stream_hello"}`, "subscription_id", ErrInvalidJSON},
		{"missing second required", `{"type":"auth","tenant_id":"t"}`, "token", ErrInvalidJSON},
		{"null required", `{"type":"event_stream_hello","subscription_id":null}`, "subscription_id", ErrInvalidJSON},
		{"duplicate member", `{"type":"publish_ok","request_id":1,"request_id":1}`, "request_id", ErrInvalidJSON},
		{"duplicate optional", `{"type":"publish_ok","request_id":1,"offset":null,"offset":2}`, "offset", ErrInvalidJSON},
		{"duplicate nested", `{"type":"error","message":"m","detail":{"reason":"a","reason":"b"}}`, "reason", ErrInvalidJSON},
		{"wrong type string", `{"type":"event_stream_hello","subscription_id":"1"}`, "subscription_id", ErrInvalidJSON},
		{"wrong type bool", `{"type":"group_deleted","existed":1,"request_id":1}`, "existed", ErrInvalidJSON},
		{"wrong type for string", `{"type":"error","message":5}`, "message", ErrInvalidJSON},
		{"wrong type list", `{"type":"publish_batch","tenant_id":"t","namespace":"n","stream":"s","payloads":"aA=="}`, "payloads", ErrInvalidJSON},
		{"fraction", `{"type":"event_stream_hello","subscription_id":1.0}`, "subscription_id", ErrInvalidJSON},
		{"exponent", `{"type":"event_stream_hello","subscription_id":1e2}`, "subscription_id", ErrInvalidJSON},
		{"exponent upper", `{"type":"event_stream_hello","subscription_id":1E0}`, "subscription_id", ErrInvalidJSON},
		{"negative unsigned", `{"type":"event_stream_hello","subscription_id":-1}`, "subscription_id", ErrInvalidJSON},
		{"minus zero unsigned", `{"type":"event_stream_hello","subscription_id":-0}`, "subscription_id", ErrInvalidJSON},
		{"minus zero signed", `{"type":"counter_value","value":-0,"request_id":1}`, "value", ErrInvalidJSON},
		{"lone minus", `{"type":"event_stream_hello","subscription_id":-}`, "subscription_id", ErrInvalidJSON},
		{"plus", `{"type":"event_stream_hello","subscription_id":+1}`, "subscription_id", ErrInvalidJSON},
		{"leading zero", `{"type":"event_stream_hello","subscription_id":01}`, "subscription_id", ErrInvalidJSON},
		{"u64 overflow", `{"type":"event_stream_hello","subscription_id":18446744073709551616}`, "subscription_id", ErrInvalidJSON},
		{"u32 overflow", `{"type":"cache_shards_view","shards":4294967296,"request_id":1}`, "shards", ErrInvalidJSON},
		{"u16 overflow", `{"type":"auth_ok","server_flags":65536}`, "server_flags", ErrInvalidJSON},
		{"i64 overflow", `{"type":"counter_value","value":9223372036854775808,"request_id":1}`, "value", ErrInvalidJSON},
		{"i64 underflow", `{"type":"counter_value","value":-9223372036854775809,"request_id":1}`, "value", ErrInvalidJSON},
		{"bad base64 alphabet", `{"type":"event","tenant_id":"t","namespace":"n","stream":"s","payload":"a-8="}`, "payload", ErrInvalidJSON},
		{"base64 url-safe", `{"type":"event","tenant_id":"t","namespace":"n","stream":"s","payload":"__8="}`, "payload", ErrInvalidJSON},
		{"base64 unpadded", `{"type":"event","tenant_id":"t","namespace":"n","stream":"s","payload":"aGk"}`, "payload", ErrInvalidJSON},
		{"base64 trailing bits", `{"type":"event","tenant_id":"t","namespace":"n","stream":"s","payload":"aGl="}`, "payload", ErrInvalidJSON},
		{"base64 newline", `{"type":"event","tenant_id":"t","namespace":"n","stream":"s","payload":"aGk9\naGk9"}`, "payload", ErrInvalidJSON},
		{"base64 escaped newline", `{"type":"event","tenant_id":"t","namespace":"n","stream":"s","payload":"aGk9\naGk9"}`, "payload", ErrInvalidJSON},
		{"base64 space", `{"type":"event","tenant_id":"t","namespace":"n","stream":"s","payload":"aG k="}`, "payload", ErrInvalidJSON},
		{"base64 in list", `{"type":"publish_batch","tenant_id":"t","namespace":"n","stream":"s","payloads":["aA==","a"]}`, "payloads", ErrInvalidJSON},
		{"null! missing", `{"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k"}`, "value", ErrInvalidJSON},
		{"dflt null", `{"type":"cache_event","key":"k","offset":1,"expires_at_millis":null}`, "expires_at_millis", ErrInvalidJSON},
		{"omit0 null", `{"type":"stream_read","tenant_id":"t","namespace":"n","stream":"s","shard":0,"from":0,"max_records":null,"request_id":1}`, "max_records", ErrInvalidJSON},
		{"dflt object null", `{"type":"subscriptions_list","filter":null,"request_id":1}`, "filter", ErrInvalidJSON},
		{"unknown ack", `{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"","ack":"always"}`, "ack", ErrInvalidJSON},
		{"unknown start", `{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":"middle"}`, "start", ErrInvalidJSON},
		{"start two members", `{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":{"offset":1,"x":2}}`, "start", ErrInvalidJSON},
		{"start empty object", `{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":{}}`, "start", ErrInvalidJSON},
		{"start negative", `{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":{"offset":-1}}`, "start", ErrInvalidJSON},
		{"unknown cursor reason", `{"type":"subscribe_cursor_error","reason":"gone","requested":1,"available":2}`, "reason", ErrInvalidJSON},
		{"unknown shard kind", `{"type":"shard_owners","tenant_id":"t","namespace":"n","name":"x","kind":"queue","request_id":1}`, "kind", ErrInvalidJSON},
		{"unknown routing", `{"type":"stream_shards_view","shards":2,"request_id":1,"routing":"random"}`, "routing", ErrInvalidJSON},
		{"unknown refusal", `{"type":"publish_refused","request_id":1,"reason":"nope","message":"m"}`, "reason", ErrInvalidJSON},
		{"refusal missing data", `{"type":"publish_refused","request_id":1,"reason":{"sequence_gap":{}},"message":"m"}`, "expected", ErrInvalidJSON},
		{"refusal two members", `{"type":"publish_refused","request_id":1,"reason":{"sequence_gap":{"expected":1},"x":1},"message":"m"}`, "reason", ErrInvalidJSON},
		{"unit variant with data", `{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":{"latest":1}}`, "start", ErrInvalidJSON},
		{"data variant as string", `{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":"offset"}`, "start", ErrInvalidJSON},
		{"refusal data variant as string", `{"type":"publish_refused","request_id":1,"reason":"sequence_gap","message":"m"}`, "reason", ErrInvalidJSON},
		{"refusal data null", `{"type":"publish_refused","request_id":1,"reason":{"sequence_gap":null},"message":"m"}`, "sequence_gap", ErrInvalidJSON},
		{"unknown condition", `{"type":"cache_put_if","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"","condition":"present","request_id":1}`, "condition", ErrInvalidJSON},
		{"state change no op", `{"type":"commit","tenant_id":"t","namespace":"n","stream":"s","entity_key":"","event":"","changes":[{"key":"k"}],"request_id":1}`, "op", ErrInvalidJSON},
		{"state put no value", `{"type":"commit","tenant_id":"t","namespace":"n","stream":"s","entity_key":"","event":"","changes":[{"op":"put","key":"k"}],"request_id":1}`, "value", ErrInvalidJSON},
		{"state bad value", `{"type":"commit","tenant_id":"t","namespace":"n","stream":"s","entity_key":"","event":"","changes":[{"op":"put","key":"k","value":"!"}],"request_id":1}`, "value", ErrInvalidJSON},
		{"state unknown op", `{"type":"commit","tenant_id":"t","namespace":"n","stream":"s","entity_key":"","event":"","changes":[{"op":"merge","key":"k"}],"request_id":1}`, "op", ErrInvalidJSON},
		{"control char in string", "{\"type\":\"error\",\"message\":\"a\x01b\"}", "message", ErrInvalidJSON},
		{"bad escape", `{"type":"error","message":"\x"}`, "message", ErrInvalidJSON},
		{"short unicode escape", `{"type":"error","message":"\u12"}`, "message", ErrInvalidJSON},
		{"lone high surrogate", `{"type":"error","message":"\ud800"}`, "message", ErrInvalidJSON},
		{"lone low surrogate", `{"type":"error","message":"\udc00"}`, "message", ErrInvalidJSON},
		{"invalid utf-8", "{\"type\":\"error\",\"message\":\"\xff\"}", "message", ErrInvalidUTF8},
		{"invalid utf-8 in unknown member", "{\"type\":\"ok\",\"x\":\"\xc3\"}", "x", ErrInvalidUTF8},
		{"invalid utf-8 in type", "{\"type\":\"o\xffk\"}", "type", ErrInvalidUTF8},
		{"invalid json in unknown member", `{"type":"ok","x":[1,}`, "x", ErrInvalidJSON},
		{"bad literal in unknown member", `{"type":"ok","x":nul}`, "x", ErrInvalidJSON},
		{"bad number in unknown member", `{"type":"ok","x":1.}`, "x", ErrInvalidJSON},
		{"single quotes", `{'type':'ok'}`, "", ErrInvalidJSON},
		{"missing colon", `{"type" "ok"}`, "", ErrInvalidJSON},
		{"deep nesting", `{"type":"ok","x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, "x", ErrInvalidJSON},
		{"nesting one too deep", `{"type":"ok","x":` + strings.Repeat("[", 127) + strings.Repeat("]", 127) + `}`, "x", ErrInvalidJSON},
		{"wrong element type", `{"type":"group_dead_letter_list","offsets":[1,"2"],"request_id":1}`, "offsets", ErrInvalidJSON},
		{"missing member in list element", `{"type":"topology_view","brokers":[{"node_id":"a"}]}`, "addr", ErrInvalidJSON},
		{"nested wrong type", `{"type":"topology_view","brokers":[1]}`, "brokers", ErrInvalidJSON},
		{"listener port overflow", `{"type":"auth_ok","server_flags":1,"listener_ports":[70000]}`, "listener_ports", ErrInvalidJSON},
		{"retry not a string", `{"type":"error","message":"m","retry":5}`, "retry", ErrInvalidJSON},
		{"code not a string", `{"type":"error","message":"m","code":5}`, "code", ErrInvalidJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeMessage([]byte(tc.json))
			require.Error(t, err, "decoded %#v", m)
			assert.Nil(t, m)
			assert.True(t, errors.Is(err, tc.class), "class: %v", err)
			var fe *Error
			require.True(t, errors.As(err, &fe))
			assert.Equal(t, tc.field, fe.Field, "field: %v", err)
			assert.Equal(t, jsonLayout, fe.Layout)
		})
	}
}

// TestMessageOmissionRules checks each optional-member encoding both ways:
// what the encoder writes for an unset / zero / set member, and what the
// decoder reads from a missing member, null and a value.
func TestMessageOmissionRules(t *testing.T) {
	cases := []struct {
		name string
		msg  Message
		json string
	}{
		// omit: left out when unset, written when set (even when zero).
		{"omit unset", &PublishOK{RequestID: 7}, `{"type":"publish_ok","request_id":7}`},
		{"omit set zero", &PublishOK{RequestID: 7, Offset: Some[uint64](0)}, `{"type":"publish_ok","request_id":7,"offset":0}`},
		{"omit i64 zero", &CounterValue{Value: Some[int64](0), RequestID: 1}, `{"type":"counter_value","value":0,"request_id":1}`},
		{"omit i64 negative", &CounterValue{Value: Some[int64](-9223372036854775808), RequestID: 1}, `{"type":"counter_value","value":-9223372036854775808,"request_id":1}`},
		{"omit i64 unset", &CounterValue{RequestID: 1}, `{"type":"counter_value","request_id":1}`},
		{"omit empty string", &NotLeader{NodeID: "a", Addr: Some(""), Generation: 1}, `{"type":"not_leader","node_id":"a","addr":"","generation":1}`},
		{"omit empty bytes", &Publish{TenantID: "t", Namespace: "n", Stream: "s", Payload: []byte{}, Key: Some([]byte{})}, `{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"","key":""}`},
		{"omit object", &ErrorMessage{Message: "m", Code: Some(CodeOverloaded), Retry: Some(RetryAfter), Detail: Some(ErrorDetail{Reason: Some(ReasonTenantQuota), RetryAfterMs: Some[uint64](250)})},
			`{"type":"error","message":"m","code":"overloaded","retry":"retry_after","detail":{"reason":"tenant_quota","retry_after_ms":250}}`},
		{"omit empty object", &ErrorMessage{Message: "m", Detail: Some(ErrorDetail{})}, `{"type":"error","message":"m","detail":{}}`},
		{"omit list", &AuthOK{ServerFlags: 1, ListenerPorts: Some([]uint16{5000, 5001})}, `{"type":"auth_ok","server_flags":1,"listener_ports":[5000,5001]}`},
		{"omit empty list", &AuthOK{ServerFlags: 1, ListenerPorts: Some([]uint16{})}, `{"type":"auth_ok","server_flags":1,"listener_ports":[]}`},
		// null: always written, null when unset.
		{"null unset", &CachePut{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: []byte("v")}, `{"type":"cache_put","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"dg==","ttl_ms":null}`},
		{"null set", &CachePut{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: []byte("v"), RequestID: Some[uint64](3), TTLMs: Some[uint64](0)}, `{"type":"cache_put","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"dg==","request_id":3,"ttl_ms":0}`},
		{"null bytes unset", &StateValue{RequestID: 2}, `{"type":"state_value","value":null,"request_id":2}`},
		// null!: always written, null when unset.
		{"null! unset", &CacheValue{TenantID: "t", Namespace: "n", Cache: "c", Key: "k"}, `{"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":null}`},
		{"null! empty", &CacheValue{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: Some([]byte{}), Version: Some[uint64](4)}, `{"type":"cache_value","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"","version":4}`},
		// dflt: always written, even at the zero value.
		{"dflt zero", &CacheEvent{Key: "k", Offset: 1}, `{"type":"cache_event","key":"k","offset":1,"expires_at_millis":0}`},
		{"dflt bool", &CacheWatchStarted{SubscriptionID: 1, ResumeOffset: 2}, `{"type":"cache_watch_started","subscription_id":1,"resume_offset":2,"resnapshot":false}`},
		{"dflt object", &SubscriptionsList{RequestID: 1}, `{"type":"subscriptions_list","filter":{},"request_id":1}`},
		{"dflt in object", &GroupRecords{Records: []GroupRecord{{Offset: 1, Payload: []byte{}}}, RequestID: 2}, `{"type":"group_records","records":[{"offset":1,"payload":"","attempts":0}],"request_id":2}`},
		// omit0: written only when non-zero / true.
		{"omit0 zero", &StreamRead{TenantID: "t", Namespace: "n", Stream: "s", RequestID: 1}, `{"type":"stream_read","tenant_id":"t","namespace":"n","stream":"s","shard":0,"from":0,"request_id":1}`},
		{"omit0 set", &StreamRead{TenantID: "t", Namespace: "n", Stream: "s", Shard: 2, From: 3, End: Some[uint64](9), MaxRecords: 10, MaxBytes: 11, RequestID: 1},
			`{"type":"stream_read","tenant_id":"t","namespace":"n","stream":"s","shard":2,"from":3,"end":9,"max_records":10,"max_bytes":11,"request_id":1}`},
		{"omit0 bool", &GroupSeek{TenantID: "t", Namespace: "n", Stream: "s", Group: "g", Start: StartPosition{Kind: StartEarliest}, IfNew: true, RequestID: 1},
			`{"type":"group_seek","tenant_id":"t","namespace":"n","stream":"s","shard":0,"group":"g","start":"earliest","if_new":true,"request_id":1}`},
		{"omit0 first member of object", &SubscriptionsList{Filter: SubscriptionsFilter{Dropping: true}, Limit: Some[uint32](5), RequestID: 1},
			`{"type":"subscriptions_list","filter":{"dropping":true},"limit":5,"request_id":1}`},
		{"filter all", &SubscriptionsList{Filter: SubscriptionsFilter{TenantID: Some("t"), Namespace: Some("n"), Stream: Some("s"), Shard: Some[uint32](0), Principal: Some("p"), Dropping: true}, Cursor: Some(SubscriptionsCursor{TenantID: "t", Namespace: "n", Stream: "s", Shard: 1, SubscriberID: 2}), RequestID: 1},
			`{"type":"subscriptions_list","filter":{"tenant_id":"t","namespace":"n","stream":"s","shard":0,"principal":"p","dropping":true},"cursor":{"tenant_id":"t","namespace":"n","stream":"s","shard":1,"subscriber_id":2},"request_id":1}`},
		// omitempty list and nested optional objects.
		{"inspection minimal", &ShardInspectInfo{View: ShardInspection{NodeID: "", Shards: 1, Role: "none", Phase: "unassigned"}, RequestID: 1},
			`{"type":"shard_inspect_info","view":{"node_id":"","shards":1,"role":"none","phase":"unassigned","serving":false},"request_id":1}`},
		{"inspection full", &ShardInspectInfo{View: ShardInspection{NodeID: "a", Shards: 2, Role: "leader", Phase: "active", Serving: true, Reason: Some("r"), Detail: Some("d"), Generation: Some[uint64](3),
			Assignment: Some(ShardAssignment{Generation: 3, Leader: "a", Replicas: []string{"b"}, Draining: true, Successor: Some("b")}),
			Fence:      Some(ShardFence{Took: []string{"a"}, Pending: []string{}, Attempts: 1, RetryInMs: Some[uint64](5)}),
			Lease:      Some(ShardLease{Held: true, RemainingMs: 9}), Tail: Some[uint64](10), Committed: Some[uint64](9), AcceptedGeneration: Some[uint64](3),
			Replicas: []ShardReplica{{NodeID: "b", Role: "follower", NextOffset: Some[uint64](10), Lag: Some[uint64](0), Fence: Some(false), State: "shipping", Halted: Some("x")}}}, RequestID: 1},
			`{"type":"shard_inspect_info","view":{"node_id":"a","shards":2,"role":"leader","phase":"active","serving":true,"reason":"r","detail":"d","generation":3,"assignment":{"generation":3,"leader":"a","replicas":["b"],"draining":true,"successor":"b"},"fence":{"took":["a"],"pending":[],"attempts":1,"retry_in_ms":5},"lease":{"held":true,"remaining_ms":9},"tail":10,"committed":9,"accepted_generation":3,"replicas":[{"node_id":"b","role":"follower","next_offset":10,"lag":0,"fence":false,"state":"shipping","halted":"x"}]},"request_id":1}`},
		// omitnull raw JSON.
		{"raw body", &Extension{Name: "x", RequestID: Some[uint64](1), Body: RawJSON(`{"a":[1,2.50,-3e7,"<&>"],"b":null}`)}, `{"type":"extension","name":"x","request_id":1,"body":{"a":[1,2.50,-3e7,"<&>"],"b":null}}`},
		// tagged variants.
		{"start offset", &Subscribe{TenantID: "t", Namespace: "n", Stream: "s", SubscriptionID: Some[uint64](1), Start: Some(StartAt(42)), Shard: Some[uint32](3), QueueCapacity: Some[uint32](64)},
			`{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","subscription_id":1,"start":{"offset":42},"shard":3,"queue_capacity":64}`},
		{"condition absent", &CachePutIf{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: []byte{1}, Condition: CacheCondition{Kind: CondAbsent}, RequestID: 1},
			`{"type":"cache_put_if","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"AQ==","condition":"absent","request_id":1}`},
		{"condition version", &CachePutIf{TenantID: "t", Namespace: "n", Cache: "c", Key: "k", Value: []byte{1}, TTLMs: Some[uint64](5), Condition: CacheCondition{Kind: CondVersion, Version: 7}, RequestID: 1},
			`{"type":"cache_put_if","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"AQ==","ttl_ms":5,"condition":{"version":7},"request_id":1}`},
		{"state changes", &Commit{TenantID: "t", Namespace: "n", Stream: "s", EntityKey: []byte("e"), Event: []byte("v"), Changes: []StateChange{{Op: StatePut, Key: "a", Value: []byte("x")}, {Op: StateDelete, Key: "b"}}, RequestID: 1, ExpectedOffset: Some[uint64](4)},
			`{"type":"commit","tenant_id":"t","namespace":"n","stream":"s","entity_key":"ZQ==","event":"dg==","changes":[{"op":"put","key":"a","value":"eA=="},{"op":"delete","key":"b"}],"request_id":1,"expected_offset":4}`},
		{"refusal unit", &PublishRefused{RequestID: 1, Reason: PublishRefusalReason{Kind: RefusalSequenceReused}, Message: "m"}, `{"type":"publish_refused","request_id":1,"reason":"sequence_reused","message":"m"}`},
		{"refusal gap", &PublishRefused{RequestID: 1, Reason: PublishRefusalReason{Kind: RefusalSequenceGap, Expected: 5}, Message: "m"}, `{"type":"publish_refused","request_id":1,"reason":{"sequence_gap":{"expected":5}},"message":"m"}`},
		{"refusal mismatch", &PublishRefused{RequestID: 1, Reason: PublishRefusalReason{Kind: RefusalOffsetMismatch, Tail: 6}, Message: "m"}, `{"type":"publish_refused","request_id":1,"reason":{"offset_mismatch":{"tail":6}},"message":"m"}`},
		{"refusal not leader", &PublishRefused{RequestID: 1, Reason: PublishRefusalReason{Kind: RefusalNotLeader, NodeID: "b"}, Message: "m"}, `{"type":"publish_refused","request_id":1,"reason":{"not_leader":{"node_id":"b"}},"message":"m"}`},
		{"refusal not leader addr", &PublishRefused{RequestID: 1, Reason: PublishRefusalReason{Kind: RefusalNotLeader, NodeID: "b", Addr: Some("h:1")}, Message: "m"}, `{"type":"publish_refused","request_id":1,"reason":{"not_leader":{"node_id":"b","addr":"h:1"}},"message":"m"}`},
		{"ack mode", &PublishBatchMessage{TenantID: "t", Namespace: "n", Stream: "s", Payloads: [][]byte{[]byte("a"), {}}, Key: Some([]byte("k")), RequestID: Some[uint64](9), Ack: Some(AckPerMessage), Shard: Some[uint32](1)},
			`{"type":"publish_batch","tenant_id":"t","namespace":"n","stream":"s","payloads":["YQ==",""],"key":"aw==","request_id":9,"ack":"per_message","shard":1}`},
		{"ack none", &Publish{TenantID: "t", Namespace: "n", Stream: "s", Payload: []byte("a"), Ack: Some(AckNone)}, `{"type":"publish","tenant_id":"t","namespace":"n","stream":"s","payload":"YQ==","ack":"none"}`},
		{"routing", &StreamShardsView{Shards: 4, RequestID: 1, Routing: Some(RoutingModulo)}, `{"type":"stream_shards_view","shards":4,"request_id":1,"routing":"modulo"}`},
		{"unknown code kept", &PublishError{RequestID: 1, Message: "m", Code: Some(ErrorCode("brand_new")), Retry: Some(RetryOutcomeUnknown)}, `{"type":"publish_error","request_id":1,"message":"m","code":"brand_new","retry":"outcome_unknown"}`},
		{"u64 max", &EventStreamHello{SubscriptionID: 18446744073709551615}, `{"type":"event_stream_hello","subscription_id":18446744073709551615}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.json, string(tc.msg.AppendJSON(nil)))
			got, err := DecodeMessage([]byte(tc.json))
			require.NoError(t, err)
			if diff := cmp.Diff(tc.msg, got, cmpMsg); diff != "" {
				t.Errorf("decode mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMessageNonCanonical decodes valid but non-canonical payloads and
// checks the canonical re-encoding.
func TestMessageNonCanonical(t *testing.T) {
	cases := []struct{ name, in, canonical string }{
		{"reordered", `{"request_id":7,"type":"publish_ok","offset":1}`, `{"type":"publish_ok","request_id":7,"offset":1}`},
		{"type last", `{"tenant_id":"t","token":"x","type":"auth"}`, `{"type":"auth","tenant_id":"t","token":"x"}`},
		{"whitespace", " \t\r\n{ \"type\" : \"ok\" \n} \r\n\t", `{"type":"ok"}`},
		{"unknown members", `{"type":"publish_ok","future":{"a":[1,2,{"b":null}]},"request_id":7,"x":-1.5e-3,"y":true,"z":"\u00e9"}`, `{"type":"publish_ok","request_id":7}`},
		{"unknown members duplicate", `{"type":"ok","x":1,"x":2}`, `{"type":"ok"}`},
		{"null for omitted", `{"type":"publish_ok","request_id":7,"offset":null}`, `{"type":"publish_ok","request_id":7}`},
		{"null nested", `{"type":"error","message":"m","code":null,"retry":null,"detail":{"reason":null,"retry_after_ms":null}}`, `{"type":"error","message":"m","detail":{}}`},
		{"null body", `{"type":"extension","name":"n","body":null}`, `{"type":"extension","name":"n"}`},
		{"missing null member", `{"type":"cache_put","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":""}`, `{"type":"cache_put","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"","ttl_ms":null}`},
		{"missing dflt", `{"type":"cache_watch_started","subscription_id":1,"resume_offset":2}`, `{"type":"cache_watch_started","subscription_id":1,"resume_offset":2,"resnapshot":false}`},
		{"missing dflt object", `{"type":"subscriptions_list","request_id":1}`, `{"type":"subscriptions_list","filter":{},"request_id":1}`},
		{"omit0 explicit zero", `{"type":"group_nack","tenant_id":"t","namespace":"n","stream":"s","shard":0,"group":"g","offset":1,"request_id":1,"delay_ms":0,"attempts":0}`, `{"type":"group_nack","tenant_id":"t","namespace":"n","stream":"s","shard":0,"group":"g","offset":1,"request_id":1}`},
		{"omit0 false", `{"type":"cache_watch","tenant_id":"t","namespace":"n","cache":"c","prefix":"","retained":false}`, `{"type":"cache_watch","tenant_id":"t","namespace":"n","cache":"c","prefix":""}`},
		{"omitempty list", `{"type":"shard_inspect_info","request_id":1,"view":{"node_id":"","shards":0,"role":"r","phase":"p","serving":false,"replicas":[]}}`, `{"type":"shard_inspect_info","view":{"node_id":"","shards":0,"role":"r","phase":"p","serving":false},"request_id":1}`},
		{"escaped key", `{"t\u0079pe":"ok"}`, `{"type":"ok"}`},
		{"escaped type value", `{"type":"publish\u005fok","request\u005fid":1}`, `{"type":"publish_ok","request_id":1}`},
		{"escapes re-escaped", `{"type":"error","message":"\/\u003c\u003e\u0026\u2028\u2029\u007f\u0008\u000c\u001F\"\\"}`, "{\"type\":\"error\",\"message\":\"/<>&\u2028\u2029\u007f\\b\\f\\u001f\\\"\\\\\"}"},
		{"surrogate pair", `{"type":"error","message":"\ud83d\ude00"}`, `{"type":"error","message":"😀"}`},
		{"retry unknown reads fatal", `{"type":"error","message":"m","retry":"later"}`, `{"type":"error","message":"m","retry":"fatal"}`},
		{"start in object order", `{"type":"group_seek","request_id":1,"start":{ "offset" : 5 },"group":"g","shard":1,"stream":"s","namespace":"n","tenant_id":"t"}`, `{"type":"group_seek","tenant_id":"t","namespace":"n","stream":"s","shard":1,"group":"g","start":{"offset":5},"request_id":1}`},
		{"state change order", `{"type":"commit","tenant_id":"t","namespace":"n","stream":"s","entity_key":"","event":"","changes":[{"value":"AA==","key":"k","op":"put"},{"key":"d","op":"delete","value":"not base64"}],"request_id":1}`,
			`{"type":"commit","tenant_id":"t","namespace":"n","stream":"s","entity_key":"","event":"","changes":[{"op":"put","key":"k","value":"AA=="},{"op":"delete","key":"d"}],"request_id":1}`},
		{"refusal inner unknown", `{"type":"publish_refused","request_id":1,"reason":{"not_leader":{"addr":null,"x":1,"node_id":"b"}},"message":"m"}`, `{"type":"publish_refused","request_id":1,"reason":{"not_leader":{"node_id":"b"}},"message":"m"}`},
		{"body compacted", `{"type":"extension","name":"n","body": { "k" : [ 1 , "\u0041\/" , 1.0E+2, 1e400 ] } }`, `{"type":"extension","name":"n","body":{"k":[1,"A/",1.0E+2,1e400]}}`},
		{"body sorted, last duplicate kept", `{"type":"extension","name":"n","body":{"b":1,"a":{"y":2,"x":[{"d":1,"c":2}]},"b":3}}`, `{"type":"extension","name":"n","body":{"a":{"x":[{"c":2,"d":1}],"y":2},"b":3}}`},
		{"deepest nesting", `{"type":"ok","x":` + strings.Repeat("[", 126) + strings.Repeat("]", 126) + `}`, `{"type":"ok"}`},
		{"huge numbers in unknown members", `{"type":"ok","x":1e400,"y":-123456789012345678901234567890}`, `{"type":"ok"}`},
		{"unit variant as object", `{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":{"earliest":null}}`, `{"type":"subscribe","tenant_id":"t","namespace":"n","stream":"s","start":"earliest"}`},
		{"unit condition as object", `{"type":"cache_put_if","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"","condition":{"absent":null},"request_id":1}`, `{"type":"cache_put_if","tenant_id":"t","namespace":"n","cache":"c","key":"k","value":"","condition":"absent","request_id":1}`},
		{"unit refusal as object", `{"type":"publish_refused","request_id":1,"reason":{"sequence_expired":null},"message":"m"}`, `{"type":"publish_refused","request_id":1,"reason":"sequence_expired","message":"m"}`},
		{"i64 negative", `{"type":"counter_add","tenant_id":"t","namespace":"n","cache":"c","key":"k","delta":-5,"request_id":1}`, `{"type":"counter_add","tenant_id":"t","namespace":"n","cache":"c","key":"k","delta":-5,"request_id":1}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustDecode(t, tc.in)
			out := m.AppendJSON(nil)
			assert.Equal(t, tc.canonical, string(out))
			again := mustDecode(t, string(out))
			if diff := cmp.Diff(m, again, cmpMsg); diff != "" {
				t.Errorf("canonical form decodes differently:\n%s", diff)
			}
		})
	}
}

func TestUnknownMessage(t *testing.T) {
	raw := ` {"request_id":12,"type":"frobnicate","x":[1,{"y":"<&>"}]} `
	m := mustDecode(t, raw)
	u, ok := m.(*UnknownMessage)
	require.True(t, ok, "%T", m)
	assert.Equal(t, "frobnicate", u.Type)
	assert.Equal(t, "frobnicate", u.MessageType())
	assert.Equal(t, raw, string(u.Raw))
	assert.Equal(t, Some[uint64](12), u.RequestID())
	out, err := AppendMessage([]byte("x"), u)
	require.NoError(t, err)
	assert.Equal(t, "x"+raw, string(out))
	frame, err := AppendMessageFrame(nil, u)
	require.NoError(t, err)
	back, err := DecodeMessageFrame(frame, 0)
	require.NoError(t, err)
	assert.Equal(t, u, back)

	// Raw is a copy: the input buffer may be reused.
	buf := []byte(`{"type":"zz"}`)
	mustDecode(t, string(buf))
	m2, err := DecodeMessage(buf)
	require.NoError(t, err)
	buf[9] = 'q'
	assert.Equal(t, `{"type":"zz"}`, string(m2.(*UnknownMessage).Raw))

	for in, want := range map[string]Opt[uint64]{
		`{"type":"f"}`:                                   {},
		`{"type":"f","request_id":"7"}`:                  {},
		`{"type":"f","request_id":-7}`:                   {},
		`{"type":"f","request_id":7.5}`:                  {},
		`{"type":"f","request_id":0}`:                    Some[uint64](0),
		`{"type":"f","x":{"request_id":3}}`:              {},
		`{"type":"f","request_id":null}`:                 {},
		`{"request_id":18446744073709551615,"type":"f"}`: Some[uint64](18446744073709551615),
	} {
		u := mustDecode(t, in).(*UnknownMessage)
		assert.Equal(t, want, u.RequestID(), in)
	}
}

func TestAppendMessageErrors(t *testing.T) {
	_, err := AppendMessage(nil, nil)
	assert.ErrorIs(t, err, ErrInvalidValue)
	_, err = AppendMessageFrame(nil, &UnknownMessage{Type: "x"})
	assert.ErrorIs(t, err, ErrInvalidValue)
}

func TestMessageFrame(t *testing.T) {
	frame, err := AppendMessageFrame([]byte{0xAA}, &OK{})
	require.NoError(t, err)
	assert.Equal(t, "aa464c5831000100000000000d7b2274797065223a226f6b227d", hex.EncodeToString(frame))
	m, err := DecodeMessageFrame(frame[1:], 0)
	require.NoError(t, err)
	assert.Equal(t, &OK{}, m)
	bad := append([]byte(nil), frame[1:]...)
	bad[7] = 0x01
	_, err = DecodeMessageFrame(bad, 0)
	assert.ErrorIs(t, err, ErrBadFlagCombination)
	_, err = DecodeMessageFrame(frame[1:10], 0)
	assert.ErrorIs(t, err, ErrTruncated)
}

func TestMessageTypesRegistry(t *testing.T) {
	types := MessageTypes()
	require.Len(t, types, 77)
	seen := map[string]bool{}
	for _, typ := range types {
		require.False(t, seen[typ], typ)
		seen[typ] = true
		m := NewMessage(typ)
		require.NotNil(t, m, typ)
		assert.Equal(t, typ, m.MessageType())
	}
	assert.Nil(t, NewMessage("nope"))
	clients := 0
	for _, typ := range types {
		if isRequest(typ) {
			clients++
		}
	}
	assert.Equal(t, 37, clients, "client → broker types in the spec's index")
	assert.True(t, isRequest("auth"))
	assert.True(t, isRequest("group_delete"))
	assert.False(t, isRequest("auth_ok"))
	assert.False(t, isRequest("error"))
	assert.False(t, isRequest("frobnicate"))
	// The Go names the other packages code against.
	named := []Message{&Auth{}, &AuthOK{}, &OK{}, &ErrorMessage{}, &Publish{}, &PublishBatchMessage{}, &PublishOK{},
		&PublishError{}, &PublishRefused{}, &PublishIdempotent{}, &ProducerInit{}, &ProducerInitOK{}, &Subscribe{},
		&Subscribed{}, &EventStreamHello{}, &EventMessage{}, &SubscriptionLagged{}, &ShardMoved{}, &StreamDeleted{},
		&SubscribeCursorError{}, &CachePut{}, &CacheGet{}, &CacheValue{}, &CacheDelete{}, &CacheWatch{},
		&CacheWatchStarted{}, &CacheEvent{}, &CacheWatchLagged{}, &CounterAdd{}, &CounterGet{}, &CounterValue{}, &Unsupported{}}
	for _, m := range named {
		assert.True(t, seen[m.MessageType()], m.MessageType())
	}
}

func TestExtensionBodyLargeObject(t *testing.T) {
	var in, want strings.Builder
	in.WriteString(`{"type":"extension","name":"n","body":{`)
	for i := 39; i >= 0; i-- {
		fmt.Fprintf(&in, `"k%02d":%d,`, i, i)
	}
	in.WriteString(`"k05":"last"}}`)
	want.WriteString(`{"type":"extension","name":"n","body":{`)
	for i := range 40 {
		if i > 0 {
			want.WriteString(",")
		}
		if i == 5 {
			want.WriteString(`"k05":"last"`)
			continue
		}
		fmt.Fprintf(&want, `"k%02d":%d`, i, i)
	}
	want.WriteString(`}}`)
	assert.Equal(t, want.String(), string(mustDecode(t, in.String()).AppendJSON(nil)))
}

// TestAppendJSONString pins serde_json's escaping, byte for byte.
func TestAppendJSONString(t *testing.T) {
	for in, want := range map[string]string{
		"":                       `""`,
		"plain":                  `"plain"`,
		`"\`:                     `"\"\\"`,
		"/<>&'":                  `"/<>&'"`,
		"\b\f\n\r\t":             `"\b\f\n\r\t"`,
		"\x00\x01\x0b\x0e\x1f":   `"\u0000\u0001\u000b\u000e\u001f"`,
		"\x7f":                   "\"\x7f\"",
		"\u2028\u2029":           "\"\u2028\u2029\"",
		"é😀\ufffd":               "\"é😀\ufffd\"",
		"a\xffb":                 "\"a\ufffdb\"",
		"\xc3":                   "\"\ufffd\"",
		"mixed \"q\" \u0085 end": "\"mixed \\\"q\\\" \u0085 end\"",
	} {
		assert.Equal(t, want, string(appendJSONString(nil, in)), "%q", in)
	}
}

func TestOpt(t *testing.T) {
	var o Opt[uint64]
	v, ok := o.Get()
	assert.False(t, ok)
	assert.Zero(t, v)
	assert.Equal(t, uint64(5), o.Or(5))
	o = Some[uint64](0)
	v, ok = o.Get()
	assert.True(t, ok)
	assert.Zero(t, v)
	assert.Equal(t, uint64(0), o.Or(5))
}

func TestMessageStdJSONInterfaces(t *testing.T) {
	type envelope struct {
		Msg *PublishOK `json:"msg"`
	}
	b, err := json.Marshal(envelope{&PublishOK{RequestID: 7, Offset: Some[uint64](1)}})
	require.NoError(t, err)
	assert.Equal(t, `{"msg":{"type":"publish_ok","request_id":7,"offset":1}}`, string(b))
	var back envelope
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, &PublishOK{RequestID: 7, Offset: Some[uint64](1)}, back.Msg)

	var ok OK
	err = json.Unmarshal([]byte(`{"type":"auth_ok","server_flags":1}`), &ok)
	assert.ErrorIs(t, err, ErrInvalidJSON)
	err = json.Unmarshal([]byte(`{"type":"publish_ok","request_id":-1}`), back.Msg)
	assert.ErrorIs(t, err, ErrInvalidJSON)
}
