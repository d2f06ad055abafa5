package felix_test

import (
	"fmt"

	"github.com/flxproto/felix"
)

// A client offers its flags and features in auth, the broker answers from
// its own set, and the client decides every encoding from the answer.
func ExampleBrokerOffer_Answer() {
	offer := felix.ClientOffer{
		TenantID: "t1",
		Token:    "demo-token",
		Flags:    felix.DefaultClientFlags(),
		Features: felix.FeatureErrorCodes | felix.FeaturePublishPipeline,
	}
	broker := felix.BrokerOffer{
		Flags:         felix.KnownFlags,
		Features:      felix.FeatureCacheDelete | felix.FeatureErrorCodes | felix.FeaturePublishPipeline,
		PublishWindow: 256,
	}
	answer, peer := broker.Answer(offer.Auth())
	payload, _ := felix.AppendMessage(nil, answer)
	fmt.Println(string(payload))

	caps, _ := felix.CapabilitiesFromAnswer(answer)
	flags, enc := caps.PublishFlags(true, true, false)
	fmt.Println(enc, flags)
	fmt.Println("window:", caps.PublishWindow, "cache_delete:", caps.CanRequest("cache_delete"))
	fmt.Println("broker may send error codes:", peer.ErrorCodes())
	// Output:
	// {"type":"auth_ok","server_flags":32767,"server_features":34820,"publish_window":256}
	// binary 0x0049(BINARY_PUBLISH_BATCH|BINARY_PUBLISH_ACKED|BINARY_PUBLISH_KEYED)
	// window: 256 cache_delete: true
	// broker may send error codes: true
}

// A broker that predates negotiation answers a plain ok: the client falls
// back to the original v1 flags and sends acked publishes as JSON.
func ExampleCapabilitiesFromAnswer_legacy() {
	caps, _ := felix.CapabilitiesFromAnswer(&felix.OK{})
	_, enc := caps.PublishFlags(true, false, false)
	fmt.Println(caps.Flags, caps.Legacy, enc)
	// Output:
	// 0x0007(BINARY_PUBLISH_BATCH|BINARY_EVENT_BATCH|BINARY_EVENT_BATCH_SHARED) true json
}
