package felix_test

import (
	"fmt"

	"github.com/flxproto/felix"
)

// Decode any control payload and dispatch on its type.
func ExampleDecodeMessage() {
	payload := []byte(`{"type":"publish_ok","request_id":7,"offset":42}`)
	m, err := felix.DecodeMessage(payload)
	if err != nil {
		fmt.Println(err)
		return
	}
	switch m := m.(type) {
	case *felix.PublishOK:
		if off, ok := m.Offset.Get(); ok {
			fmt.Println("request", m.RequestID, "written at offset", off)
		}
	case *felix.UnknownMessage:
		fmt.Println("unknown type", m.Type)
	}
	// Output: request 7 written at offset 42
}

// Encode a message into a whole frame, reusing the buffer.
func ExampleAppendMessageFrame() {
	var buf []byte
	buf, err := felix.AppendMessageFrame(buf[:0], &felix.CacheGet{
		TenantID: "t1", Namespace: "default", Cache: "primary", Key: "demo-key",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("% x\n", buf[:felix.HeaderLen])
	fmt.Println(string(buf[felix.HeaderLen:]))
	// Output:
	// 46 4c 58 31 00 01 00 00 00 00 00 5e
	// {"type":"cache_get","tenant_id":"t1","namespace":"default","cache":"primary","key":"demo-key"}
}

// Optional members are Opt values: absent, null and zero stay distinct
// where the wire distinguishes them.
func ExampleOpt() {
	put := &felix.CachePut{TenantID: "t1", Namespace: "default", Cache: "primary", Key: "k", Value: []byte("v")}
	fmt.Println(string(put.AppendJSON(nil))) // ttl_ms unset: written as null
	put.TTLMs = felix.Some[uint64](1000)
	put.RequestID = felix.Some[uint64](0) // a present 0 is written
	fmt.Println(string(put.AppendJSON(nil)))
	// Output:
	// {"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"primary","key":"k","value":"dg==","ttl_ms":null}
	// {"type":"cache_put","tenant_id":"t1","namespace":"default","cache":"primary","key":"k","value":"dg==","request_id":0,"ttl_ms":1000}
}

// A broker answers a request of an unknown type with unsupported, echoing
// a numeric request_id.
func ExampleUnknownMessage() {
	m, _ := felix.DecodeMessage([]byte(`{"type":"frobnicate","request_id":9}`))
	u := m.(*felix.UnknownMessage)
	answer := &felix.Unsupported{RequestType: u.Type, RequestID: u.RequestID()}
	fmt.Println(string(answer.AppendJSON(nil)))
	// Output: {"type":"unsupported","request_type":"frobnicate","request_id":9}
}

// Decoding errors name the member at fault.
func ExampleDecodeMessage_error() {
	_, err := felix.DecodeMessage([]byte(`{"type":"publish_ok","request_id":-1}`))
	fmt.Println(felix.ErrorClass(err))
	fmt.Println(err)
	// Output:
	// invalid_json
	// felix: json_message: invalid json: request_id at offset 34: negative value for an unsigned integer
}
