package felix_test

import (
	"fmt"

	"github.com/flxproto/felix"
)

func ExampleAppendPublishBatch() {
	b := felix.PublishBatch{
		AckMode:   felix.AckPerBatch,
		RequestID: 5,
		HasKey:    true,
		Key:       []byte("k"),
		TenantID:  "t1",
		Namespace: "ns",
		Stream:    "s",
		Payloads:  [][]byte{[]byte("hi"), {}},
	}
	buf := make([]byte, 0, 256) // reused across batches: no allocation
	buf, err := felix.AppendPublishBatch(buf[:0], &b)
	if err != nil {
		panic(err)
	}
	fmt.Println(b.Flags(), len(buf) == b.FrameLen())
	fmt.Printf("%x\n", buf)
	// Output:
	// 0x0049(BINARY_PUBLISH_BATCH|BINARY_PUBLISH_ACKED|BINARY_PUBLISH_KEYED) true
	// 464c5831000100490000002500000000000000050200016b0002743100026e730001730000000200000002686900000000
}

func ExampleParsePublishBatch() {
	frame := []byte("FLX1\x00\x01\x00\x01\x00\x00\x00\x19\x00\x02t1\x00\x02ns\x00\x01s\x00\x00\x00\x02\x00\x00\x00\x02hi\x00\x00\x00\x00")
	f, err := felix.DecodeFrame(frame, 0)
	if err != nil {
		panic(err)
	}
	v, err := felix.ParsePublishBatch(f.Flags, f.Payload)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s/%s/%s: %d payloads\n", v.TenantID, v.Namespace, v.Stream, v.Len())
	for p := range v.Payloads() { // p aliases frame: copy it to keep it
		fmt.Printf("%q\n", p)
	}
	// Output:
	// t1/ns/s: 2 payloads
	// "hi"
	// ""
}

// A broker answers an acked publish whose body is malformed with an error
// ack for its request id.
func ExamplePeekAckedPrefix() {
	flags := felix.FlagBinaryPublishBatch | felix.FlagBinaryPublishAcked
	payload := []byte("\x00\x00\x00\x00\x00\x00\x00\x2a\x02\xff\xff") // request 42, per_batch, then garbage
	if _, err := felix.ParsePublishBatch(flags, payload); err != nil {
		p, perr := felix.PeekAckedPrefix(flags, payload)
		if perr != nil {
			fmt.Println("protocol violation: end the stream")
			return
		}
		ack := felix.PublishAck{Status: felix.AckError, RequestID: p.RequestID, Message: "malformed batch",
			Code: felix.CodeInvalidRequest, Retry: felix.RetryFatal}
		// Send only the sections this client offered in client_flags.
		ack = ack.Restrict(felix.FlagBinaryPublishAckCode)
		frame, _ := felix.AppendPublishAck(nil, &ack)
		fmt.Println(felix.ErrorClass(err), p.RequestID, ack.Flags())
		fmt.Printf("%x\n", frame)
	}
	// Output:
	// truncated 42 0x0210(BINARY_PUBLISH_ACK|BINARY_PUBLISH_ACK_CODE)
	// 464c5831000102100000001d01000000000000002a000f6d616c666f726d6564206261746368000405
}

func ExampleDecodePublishAck() {
	frame := []byte("FLX1\x00\x01\x10\x90\x00\x00\x00\x24" +
		"\x00\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00" +
		"\x00\x02b2\x00\x03h:1\x00\x00\x00\x00\x00\x00\x00\x07" +
		"\x00\x00\x00\x00\x00\x00\x00\x2a")
	f, err := felix.DecodeFrame(frame, 0)
	if err != nil {
		panic(err)
	}
	a, err := felix.DecodePublishAck(f.Flags, f.Payload)
	if err != nil {
		panic(err)
	}
	fmt.Println(a.Status, a.RequestID, a.Owner.NodeID, a.Owner.Addr, a.Owner.Generation, a.Offset)
	// Output:
	// ok 5 b2 h:1 7 42
}

func ExampleParseEventBatch() {
	b := felix.EventBatch{
		HasBaseOffset: true, BaseOffset: 100,
		HasTimestamps: true, Timestamps: []uint64{1700000000000000, 1700000000000001},
		Payloads: [][]byte{[]byte("a"), []byte("bc")},
	}
	frame, _ := felix.AppendEventBatch(nil, &b, felix.EventModifierMask)
	f, _ := felix.DecodeFrame(frame, 0)
	v, err := felix.ParseEventBatch(f.Flags, f.Payload)
	if err != nil {
		panic(err)
	}
	for e := range v.Events() {
		fmt.Println(e.Offset, e.TimestampMicros, string(e.Payload))
	}
	// Output:
	// 100 1700000000000000 a
	// 101 1700000000000001 bc
}

// A broker encodes a published batch once per distinct modifier set and
// hands the same bytes to every subscriber of that set.
func ExampleSharedEventBatch() {
	b := felix.EventBatch{HasBaseOffset: true, BaseOffset: 100, Payloads: [][]byte{[]byte("a"), []byte("bc")}}
	s := felix.NewSharedEventBatch(&b)
	subscribers := []felix.Flags{felix.OriginalV1Flags, felix.FlagEventBatchOffsets, felix.FlagEventBatchOffsets, 0}
	for _, accepted := range subscribers {
		frame, err := s.Frame(accepted)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%x\n", frame)
	}
	fmt.Println(s.Encodings(), "encodings for", len(subscribers), "subscribers")
	// Output:
	// 464c5831000100040000000f000000020000000161000000026263
	// 464c583100010024000000170000000000000064000000020000000161000000026263
	// 464c583100010024000000170000000000000064000000020000000161000000026263
	// 464c5831000100040000000f000000020000000161000000026263
	// 2 encodings for 4 subscribers
}
