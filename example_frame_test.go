package felix_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/flxproto/felix"
)

func ExampleAppendHeader() {
	b := felix.AppendHeader(nil, felix.Header{Flags: felix.FlagBinaryPublishAck, Length: 11})
	fmt.Printf("% x\n", b)
	// Output: 46 4c 58 31 00 01 00 10 00 00 00 0b
}

func ExampleParseHeader() {
	h, err := felix.ParseHeader([]byte{0x46, 0x4c, 0x58, 0x31, 0x00, 0x01, 0x00, 0x49, 0x00, 0x00, 0x00, 0x2d})
	fmt.Println(h.Flags, h.Length, err)

	_, err = felix.ParseHeader([]byte{0x46, 0x4c, 0x58, 0x31, 0x00, 0x01, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00})
	fmt.Println(errors.Is(err, felix.ErrUnknownFlags), felix.ErrorClass(err))
	// Output:
	// 0x0049(BINARY_PUBLISH_BATCH|BINARY_PUBLISH_ACKED|BINARY_PUBLISH_KEYED) 45 <nil>
	// true unknown_flags
}

func ExampleBeginFrame() {
	buf := make([]byte, 0, 64)
	start := len(buf)
	buf = felix.BeginFrame(buf, 0)
	buf = append(buf, `{"type":"ok"}`...)
	buf, err := felix.FinishFrame(buf, start)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%x\n", buf)
	// Output: 464c5831000100000000000d7b2274797065223a226f6b227d
}

func ExampleReader() {
	var stream bytes.Buffer
	w := felix.NewWriter(&stream)
	_ = w.WriteFrame(0, []byte(`{"type":"ok"}`))
	_ = w.WriteFrame(felix.FlagBinaryEventBatchShared, []byte{0, 0, 0, 0})

	r := felix.NewReader(&stream)
	r.SetMaxPayload(felix.PreAuthMaxFrameBytes) // before the stream has authenticated
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			fmt.Println("clean end of stream")
			break
		}
		if err != nil {
			fmt.Println("error:", err)
			break
		}
		fmt.Println(f.Flags.Layout(), len(f.Payload))
	}
	// Output:
	// json_message 13
	// binary_event_batch 4
	// clean end of stream
}

func ExampleWriter() {
	var out bytes.Buffer
	w := felix.NewWriter(&out)
	if err := w.WriteFrame(0, []byte(`{"type":"ok"}`)); err != nil {
		panic(err)
	}
	fmt.Printf("%x\n", out.Bytes())
	// Output: 464c5831000100000000000d7b2274797065223a226f6b227d
}

func ExampleFlags_String() {
	fmt.Println(felix.Flags(0))
	fmt.Println(felix.FlagBinaryPublishBatch | felix.FlagBinaryPublishKeyed)
	fmt.Println(felix.Flags(0x8004))
	// Output:
	// 0x0000(JSON)
	// 0x0041(BINARY_PUBLISH_BATCH|BINARY_PUBLISH_KEYED)
	// 0x8004(BINARY_EVENT_BATCH_SHARED|0x8000)
}

func ExampleFlags_CheckLayout() {
	for _, f := range []felix.Flags{0x0149, 0x0141, 0x0824, 0x0804} {
		if err := f.CheckLayout(f.Layout()); err != nil {
			fmt.Println(f.Layout(), "refused:", felix.ErrorClass(err))
		} else {
			fmt.Println(f.Layout(), "ok")
		}
	}
	// Output:
	// binary_acked_publish_batch ok
	// binary_publish_batch refused: bad_flag_combination
	// binary_event_batch ok
	// binary_event_batch refused: bad_flag_combination
}

func ExampleFeatures() {
	client := felix.FeatureErrorCodes | felix.FeatureCacheDelete | felix.FeatureInspect
	lo, hi, sendHi := client.WireWords()
	fmt.Printf("auth: client_features=%#x client_features_hi=%#x (sent: %v)\n", lo, hi, sendHi)

	broker := felix.FeatureCacheDelete | felix.FeatureInspect | felix.FeatureAtomicCommit
	slo, shi, sendHi := broker.AnswerWords(lo)
	fmt.Printf("auth_ok: server_features=%#x server_features_hi=%#x (sent: %v)\n", slo, shi, sendHi)

	var hiField *uint32
	if sendHi {
		hiField = &shi
	}
	server := felix.FeaturesFromWire(slo, hiField)
	fmt.Println(server)
	fmt.Println(server.Intersect(client))
	// Output:
	// auth: client_features=0x80000804 client_features_hi=0x1 (sent: true)
	// auth_ok: server_features=0x80010004 server_features_hi=0x1 (sent: true)
	// CACHE_DELETE|ATOMIC_COMMIT|INSPECT
	// CACHE_DELETE|INSPECT
}
