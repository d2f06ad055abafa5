package felix_test

import (
	"fmt"
	"slices"

	"github.com/flxproto/felix"
)

// ExampleAppendPublishBatchView re-addresses a received batch: the
// payloads of the parsed frame are copied as one block under a new
// request id and stream, without being taken apart.
func ExampleAppendPublishBatchView() {
	in := felix.PublishBatch{TenantID: "t1", Namespace: "ns", Stream: "in", Payloads: [][]byte{[]byte("a"), []byte("b")}}
	frame, _ := felix.AppendPublishBatch(nil, &in)
	v, _ := felix.ParsePublishBatch(in.Flags(), frame[felix.HeaderLen:])

	out := felix.PublishBatch{AckMode: felix.AckPerBatch, RequestID: 9, TenantID: "t1", Namespace: "ns", Stream: "out"}
	fwd, _ := felix.AppendPublishBatchView(nil, &out, &v)
	h, _ := felix.ParseHeader(fwd)
	got, _ := felix.DecodePublishBatch(h.Flags, fwd[felix.HeaderLen:])
	fmt.Println(got.Stream, got.RequestID, len(got.Payloads), string(got.Payloads[0]), string(got.Payloads[1]))
	// Output: out 9 2 a b
}

// ExampleAppendPublishBatchSeq encodes a batch from a sequence of payloads
// without building a [][]byte.
func ExampleAppendPublishBatchSeq() {
	b := felix.PublishBatch{TenantID: "t1", Namespace: "ns", Stream: "s"}
	frame, _ := felix.AppendPublishBatchSeq(nil, &b, slices.Values([][]byte{[]byte("x"), []byte("yz")}))
	h, _ := felix.ParseHeader(frame)
	v, _ := felix.ParsePublishBatch(h.Flags, frame[felix.HeaderLen:])
	fmt.Println(v.Len(), h.Length)
	// Output: 2 26
}

// ExampleFlags_SetString renders a set of modifier bits, where zero is the
// empty set rather than the JSON layout.
func ExampleFlags_SetString() {
	fmt.Println(felix.Flags(0).SetString())
	fmt.Println(felix.Flags(0).String())
	fmt.Println((felix.FlagEventBatchOffsets | felix.FlagEventBatchPublisher).SetString())
	// Output:
	// 0x0000(none)
	// 0x0000(JSON)
	// 0x2020(EVENT_BATCH_OFFSETS|EVENT_BATCH_PUBLISHER)
}

// ExampleStartKind_String names the variants of a start position.
func ExampleStartKind_String() {
	fmt.Println(felix.StartLatest, felix.StartEarliest, felix.StartOffset)
	// Output: latest earliest offset
}
