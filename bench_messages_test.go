package felix_test

import (
	"encoding/json"
	"testing"

	"github.com/flxproto/felix"
)

// Benchmarks of the JSON control messages: our generated encoders and
// decoders beside encoding/json Marshal / Unmarshal of equivalent structs
// (tags and pointers giving the same members, so both sides produce and read
// the same JSON text).

type stdDetail struct {
	Reason       *string `json:"reason,omitempty"`
	RetryAfterMs *uint64 `json:"retry_after_ms,omitempty"`
}

type stdPublish struct {
	Type      string  `json:"type"`
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Stream    string  `json:"stream"`
	Payload   []byte  `json:"payload"`
	Key       []byte  `json:"key,omitempty"`
	RequestID *uint64 `json:"request_id,omitempty"`
	Ack       *string `json:"ack,omitempty"`
	Shard     *uint32 `json:"shard,omitempty"`
}

type stdCachePut struct {
	Type      string  `json:"type"`
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	Value     []byte  `json:"value"`
	RequestID *uint64 `json:"request_id,omitempty"`
	TTLMs     *uint64 `json:"ttl_ms"`
}

type stdCacheGet struct {
	Type      string  `json:"type"`
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	RequestID *uint64 `json:"request_id,omitempty"`
}

type stdCacheValue struct {
	Type      string  `json:"type"`
	TenantID  string  `json:"tenant_id"`
	Namespace string  `json:"namespace"`
	Cache     string  `json:"cache"`
	Key       string  `json:"key"`
	Value     []byte  `json:"value"`
	RequestID *uint64 `json:"request_id,omitempty"`
	Version   *uint64 `json:"version,omitempty"`
}

type stdPublishBatch struct {
	Type      string   `json:"type"`
	TenantID  string   `json:"tenant_id"`
	Namespace string   `json:"namespace"`
	Stream    string   `json:"stream"`
	Payloads  [][]byte `json:"payloads"`
	Key       []byte   `json:"key,omitempty"`
	RequestID *uint64  `json:"request_id,omitempty"`
	Ack       *string  `json:"ack,omitempty"`
	Shard     *uint32  `json:"shard,omitempty"`
}

type stdEventBatch struct {
	Type       string   `json:"type"`
	TenantID   string   `json:"tenant_id"`
	Namespace  string   `json:"namespace"`
	Stream     string   `json:"stream"`
	Payloads   [][]byte `json:"payloads"`
	BaseOffset *uint64  `json:"base_offset,omitempty"`
}

type stdCacheEvent struct {
	Type            string `json:"type"`
	Key             string `json:"key"`
	Value           []byte `json:"value,omitempty"`
	Offset          uint64 `json:"offset"`
	ExpiresAtMillis uint64 `json:"expires_at_millis"`
}

type stdPublishOK struct {
	Type      string  `json:"type"`
	RequestID uint64  `json:"request_id"`
	Offset    *uint64 `json:"offset,omitempty"`
}

type stdEventStreamHello struct {
	Type           string `json:"type"`
	SubscriptionID uint64 `json:"subscription_id"`
}

type stdError struct {
	Type    string     `json:"type"`
	Message string     `json:"message"`
	Code    *string    `json:"code,omitempty"`
	Retry   *string    `json:"retry,omitempty"`
	Detail  *stdDetail `json:"detail,omitempty"`
}

type stdAuthOK struct {
	Type             string   `json:"type"`
	ServerFlags      uint16   `json:"server_flags"`
	ServerFeatures   *uint32  `json:"server_features,omitempty"`
	ServerFeaturesHi *uint32  `json:"server_features_hi,omitempty"`
	ListenerPorts    []uint16 `json:"listener_ports,omitempty"`
	PublishWindow    *uint32  `json:"publish_window,omitempty"`
}

func ptr[T any](v T) *T { return &v }

var payload256 = func() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// payloads8x100 are the records of the batch messages: 8 of 100 bytes.
var payloads8x100 = func() [][]byte {
	l := make([][]byte, 8)
	for i := range l {
		l[i] = payload256[i : i+100]
	}
	return l
}()

// benchCases pairs each benchmarked message with an encoding/json value
// that marshals to the same bytes.
var benchCases = []struct {
	name string
	msg  felix.Message
	std  any
	// newStd returns a fresh pointer to unmarshal into.
	newStd func() any
}{
	{"publish",
		&felix.Publish{TenantID: "tenant-1", Namespace: "default", Stream: "orders", Payload: payload256[:100], Key: felix.Some([]byte("customer-42")), RequestID: felix.Some[uint64](123456), Ack: felix.Some(felix.AckPerMessage)},
		&stdPublish{Type: "publish", TenantID: "tenant-1", Namespace: "default", Stream: "orders", Payload: payload256[:100], Key: []byte("customer-42"), RequestID: ptr[uint64](123456), Ack: ptr("per_message")},
		func() any { return new(stdPublish) }},
	{"publish/256B",
		&felix.Publish{TenantID: "tenant-1", Namespace: "default", Stream: "orders", Payload: payload256, Key: felix.Some([]byte("customer-42")), RequestID: felix.Some[uint64](123456), Ack: felix.Some(felix.AckPerMessage)},
		&stdPublish{Type: "publish", TenantID: "tenant-1", Namespace: "default", Stream: "orders", Payload: payload256, Key: []byte("customer-42"), RequestID: ptr[uint64](123456), Ack: ptr("per_message")},
		func() any { return new(stdPublish) }},
	{"publish_batch",
		&felix.PublishBatchMessage{TenantID: "tenant-1", Namespace: "default", Stream: "orders", Payloads: payloads8x100, Key: felix.Some([]byte("customer-42")), RequestID: felix.Some[uint64](123457), Ack: felix.Some(felix.AckPerBatch)},
		&stdPublishBatch{Type: "publish_batch", TenantID: "tenant-1", Namespace: "default", Stream: "orders", Payloads: payloads8x100, Key: []byte("customer-42"), RequestID: ptr[uint64](123457), Ack: ptr("per_batch")},
		func() any { return new(stdPublishBatch) }},
	{"event_batch",
		&felix.EventBatchMessage{TenantID: "tenant-1", Namespace: "default", Stream: "orders", Payloads: payloads8x100, BaseOffset: felix.Some[uint64](1 << 40)},
		&stdEventBatch{Type: "event_batch", TenantID: "tenant-1", Namespace: "default", Stream: "orders", Payloads: payloads8x100, BaseOffset: ptr[uint64](1 << 40)},
		func() any { return new(stdEventBatch) }},
	{"cache_event",
		&felix.CacheEvent{Key: "user:42", Value: felix.Some(payload256[:64]), Offset: 4242, ExpiresAtMillis: 1700000030000},
		&stdCacheEvent{Type: "cache_event", Key: "user:42", Value: payload256[:64], Offset: 4242, ExpiresAtMillis: 1700000030000},
		func() any { return new(stdCacheEvent) }},
	{"cache_put",
		&felix.CachePut{TenantID: "tenant-1", Namespace: "default", Cache: "sessions", Key: "user:42", Value: payload256[:64], RequestID: felix.Some[uint64](99), TTLMs: felix.Some[uint64](30000)},
		&stdCachePut{Type: "cache_put", TenantID: "tenant-1", Namespace: "default", Cache: "sessions", Key: "user:42", Value: payload256[:64], RequestID: ptr[uint64](99), TTLMs: ptr[uint64](30000)},
		func() any { return new(stdCachePut) }},
	{"cache_get",
		&felix.CacheGet{TenantID: "tenant-1", Namespace: "default", Cache: "sessions", Key: "user:42", RequestID: felix.Some[uint64](100)},
		&stdCacheGet{Type: "cache_get", TenantID: "tenant-1", Namespace: "default", Cache: "sessions", Key: "user:42", RequestID: ptr[uint64](100)},
		func() any { return new(stdCacheGet) }},
	{"cache_value",
		&felix.CacheValue{TenantID: "tenant-1", Namespace: "default", Cache: "sessions", Key: "user:42", Value: felix.Some(payload256[:64]), RequestID: felix.Some[uint64](100), Version: felix.Some[uint64](7)},
		&stdCacheValue{Type: "cache_value", TenantID: "tenant-1", Namespace: "default", Cache: "sessions", Key: "user:42", Value: payload256[:64], RequestID: ptr[uint64](100), Version: ptr[uint64](7)},
		func() any { return new(stdCacheValue) }},
	{"publish_ok",
		&felix.PublishOK{RequestID: 123456, Offset: felix.Some[uint64](987654321)},
		&stdPublishOK{Type: "publish_ok", RequestID: 123456, Offset: ptr[uint64](987654321)},
		func() any { return new(stdPublishOK) }},
	{"event_stream_hello",
		&felix.EventStreamHello{SubscriptionID: 42},
		&stdEventStreamHello{Type: "event_stream_hello", SubscriptionID: 42},
		func() any { return new(stdEventStreamHello) }},
	{"error",
		&felix.ErrorMessage{Message: "shard 3 of orders is moving", Code: felix.Some(felix.CodeShardUnavailable), Retry: felix.Some(felix.RetryRetry), Detail: felix.Some(felix.ErrorDetail{Reason: felix.Some(felix.ReasonMoving), RetryAfterMs: felix.Some[uint64](200)})},
		&stdError{Type: "error", Message: "shard 3 of orders is moving", Code: ptr("shard_unavailable"), Retry: ptr("retry"), Detail: &stdDetail{Reason: ptr("moving"), RetryAfterMs: ptr[uint64](200)}},
		func() any { return new(stdError) }},
	{"auth_ok",
		&felix.AuthOK{ServerFlags: 0x7FFF, ServerFeatures: felix.Some[uint32](0x8001FFFF), ServerFeaturesHi: felix.Some[uint32](7), PublishWindow: felix.Some[uint32](64)},
		&stdAuthOK{Type: "auth_ok", ServerFlags: 0x7FFF, ServerFeatures: ptr[uint32](0x8001FFFF), ServerFeaturesHi: ptr[uint32](7), PublishWindow: ptr[uint32](64)},
		func() any { return new(stdAuthOK) }},
}

// TestBenchCasesEquivalent checks that both sides of every benchmark
// produce the same JSON, so the comparison is fair.
func TestBenchCasesEquivalent(t *testing.T) {
	for _, c := range benchCases {
		std, err := json.Marshal(c.std)
		if err != nil {
			t.Fatal(err)
		}
		if ours := string(c.msg.AppendJSON(nil)); ours != string(std) {
			t.Errorf("%s:\n ours %s\n std  %s", c.name, ours, std)
		}
	}
}

func BenchmarkMessageEncode(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			buf := c.msg.AppendJSON(nil)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf = c.msg.AppendJSON(buf[:0])
			}
		})
	}
}

func BenchmarkMessageEncodeFrame(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			buf, _ := felix.AppendMessageFrame(nil, c.msg)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = felix.AppendMessageFrame(buf[:0], c.msg)
			}
		})
	}
}

func BenchmarkMessageEncodeStdJSON(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			buf, _ := json.Marshal(c.std)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(c.std); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMessageDecode(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			in := c.msg.AppendJSON(nil)
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := felix.DecodeMessage(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMessageDecodeStdJSON(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			in := c.msg.AppendJSON(nil)
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if err := json.Unmarshal(in, c.newStd()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestMessageEncodeDoesNotAllocate asserts the 0 allocs/op of encoding
// into a reused buffer, so a regression fails go test.
func TestMessageEncodeDoesNotAllocate(t *testing.T) {
	for _, c := range benchCases {
		buf := c.msg.AppendJSON(nil)
		buf, _ = felix.AppendMessageFrame(buf[:0], c.msg)
		if n := testing.AllocsPerRun(100, func() {
			buf = c.msg.AppendJSON(buf[:0])
			buf, _ = felix.AppendMessageFrame(buf[:0], c.msg)
		}); n != 0 {
			t.Errorf("%s: %v allocs per encode", c.name, n)
		}
	}
}

// TestMessageDecodeAllocs bounds the allocations of decoding: the message
// itself, one arena for its strings and small byte values (up to 256
// bytes each, a chunk of at most 1 KiB), one per list, nothing per member
// scanned.
func TestMessageDecodeAllocs(t *testing.T) {
	for _, c := range []struct {
		name string
		max  float64
	}{{"publish_ok", 1}, {"event_stream_hello", 1}, {"auth_ok", 1}, {"cache_get", 2}, {"error", 2}, {"publish", 2},
		{"publish/256B", 2}, {"cache_put", 2}, {"cache_value", 2}, {"cache_event", 2}, {"publish_batch", 3}, {"event_batch", 3}} {
		var msg felix.Message
		for _, bc := range benchCases {
			if bc.name == c.name {
				msg = bc.msg
			}
		}
		in := msg.AppendJSON(nil)
		if n := testing.AllocsPerRun(100, func() {
			if _, err := felix.DecodeMessage(in); err != nil {
				t.Fatal(err)
			}
		}); n > c.max {
			t.Errorf("%s: %v allocs per decode, want ≤ %v", c.name, n, c.max)
		}
	}
}
