package felix

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestDefaultClientOffer(t *testing.T) {
	f := DefaultClientFlags()
	assert.False(t, f.Any(FlagEventBatchPublisher|FlagEventBatchTimestamps), "publisher/timestamps are opt-in")
	assert.True(t, f.Has(OriginalV1Flags|FlagBinaryPublishAcked|FlagEventBatchOffsets|FlagBinaryPublishAckOffset))
	assert.Zero(t, f.Unknown())

	ft := DefaultClientFeatures()
	assert.False(t, ft.Any(FeatureAckOnCommit|FeatureGroupPublisher|FeatureRecordTimestamps), "opt-in features")
	assert.False(t, ft.Has(FeatureExtended), "the marker is not a feature")
	assert.True(t, ft.Has(FeatureErrorCodes|FeaturePublishPipeline|FeatureInspect))
	assert.False(t, ft.Any(FeaturePublishWidth), "no message carries publish_width: not offered")
	assert.Equal(t, AllFeatures&^(FeatureAckOnCommit|FeatureGroupPublisher|FeatureRecordTimestamps|FeaturePublishWidth), ft,
		"every other known bit: each one's consequences decode")
	// The high word is still offered (INSPECT, STREAM_DELETED), with the marker.
	a := ClientOffer{TenantID: "t", Token: "x", Flags: f, Features: ft}.Auth()
	require.True(t, a.ClientFeaturesHi.Set)
	assert.Equal(t, uint32((FeatureInspect|FeatureStreamDeleted)>>32), a.ClientFeaturesHi.V)
}

func TestPublishFlags(t *testing.T) {
	all := Capabilities{Flags: KnownFlags, Features: AllFeatures}
	legacy := LegacyCapabilities()
	ackedOnly := Capabilities{Flags: OriginalV1Flags | FlagBinaryPublishAcked, Features: FeatureIdempotentProducer}
	for _, tc := range []struct {
		name                     string
		caps                     Capabilities
		acked, keyed, idempotent bool
		flags                    Flags
		enc                      PublishEncoding
	}{
		{"plain on legacy", legacy, false, false, false, FlagBinaryPublishBatch, PublishBinary},
		{"acked on legacy", legacy, true, false, false, 0, PublishJSON},
		{"keyed on legacy", legacy, false, true, false, 0, PublishJSON},
		{"idempotent on legacy", legacy, true, false, true, 0, PublishUnavailable},
		{"plain", all, false, false, false, 0x0001, PublishBinary},
		{"acked", all, true, false, false, 0x0009, PublishBinary},
		{"keyed", all, false, true, false, 0x0041, PublishBinary},
		{"acked keyed", all, true, true, false, 0x0049, PublishBinary},
		{"idempotent", all, true, false, true, 0x0109, PublishBinary},
		{"idempotent keyed", all, false, true, true, 0x0149, PublishBinary},
		{"acked without keyed bit", ackedOnly, true, true, false, 0, PublishJSON},
		{"idempotent falls back to JSON", ackedOnly, true, false, true, 0, PublishJSONIdempotent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, enc := tc.caps.PublishFlags(tc.acked, tc.keyed, tc.idempotent)
			assert.Equal(t, tc.enc, enc)
			assert.Equal(t, tc.flags, f)
			if enc == PublishBinary {
				require.NoError(t, f.CheckLayout(f.Layout()), "chosen word must be a legal publish word")
			}
		})
	}
}

func TestCanRequestUsesAdvertisedSetOnly(t *testing.T) {
	none := Capabilities{Flags: KnownFlags}
	for _, typ := range []string{"publish", "publish_batch", "subscribe", "cache_put", "cache_get", "auth"} {
		assert.True(t, none.CanRequest(typ), typ)
	}
	for _, typ := range []string{"cache_delete", "cache_watch", "counter_add", "group_poll", "shard_inspect", "commit", "stream_read", "extension"} {
		assert.False(t, none.CanRequest(typ), typ)
		r, ok := LookupRequest(typ)
		gate := r.Gate
		require.True(t, ok)
		withGate := Capabilities{Features: gate}
		assert.True(t, withGate.CanRequest(typ), typ)
	}
	assert.False(t, Capabilities{Features: AllFeatures}.CanRequest("publish_ok"), "not a client request")
	assert.False(t, Capabilities{Features: AllFeatures}.CanRequest("no_such_type"))
}

func TestFieldGates(t *testing.T) {
	var c Capabilities
	assert.False(t, c.CanQueueCapacity())
	assert.False(t, c.CanRetained())
	c.Features = FeatureCacheWatchRetained
	assert.False(t, c.CanRetained(), "retained needs CACHE_WATCH too")
	c.Features |= FeatureCacheWatch | FeatureSubscribeQueue | FeatureGroupConsumer | FeatureGroupClaimControl | FeaturePublishConditional | FeaturePublishWidth
	assert.True(t, c.CanRetained())
	assert.True(t, c.CanQueueCapacity())
	assert.True(t, c.CanGroupConsumer())
	assert.True(t, c.CanClaimControl())
	assert.True(t, c.CanExpectedOffset())
	assert.True(t, c.CanPublishWidth())
}

func TestPeerCapabilities(t *testing.T) {
	p := UnauthenticatedPeer()
	assert.Equal(t, OriginalV1Flags, p.Flags)
	assert.Zero(t, p.EventFlags())
	assert.Zero(t, p.AckFlags())
	assert.False(t, p.ErrorCodes())

	p = PeerCapabilities{Flags: DefaultClientFlags(), Features: DefaultClientFeatures()}
	assert.Equal(t, FlagEventBatchOffsets|FlagEventBatchSkipped, p.EventFlags())
	assert.Equal(t, FlagBinaryPublishAckOwner|FlagBinaryPublishAckCode|FlagBinaryPublishAckDetail|FlagBinaryPublishAckOffset, p.AckFlags())
	assert.True(t, p.ErrorCodes())
	assert.True(t, p.AckOffsets())
	assert.True(t, p.SubscriptionLagged())
	assert.True(t, p.Unsupported(true))
	assert.False(t, p.Unsupported(false))

	p.Flags &^= FlagEventBatchOffsets
	assert.False(t, p.SubscriptionLagged(), "lagged needs the offsets flag")
}

func TestBrokerAdvertisesPipelineOnlyWithWindow(t *testing.T) {
	b := BrokerOffer{Features: FeaturePublishPipeline | FeatureStreamPublishWindow | FeatureCacheDelete}
	assert.Equal(t, FeatureCacheDelete, b.advertised())
	b.PublishWindow = 256
	assert.Equal(t, FeaturePublishPipeline|FeatureStreamPublishWindow|FeatureCacheDelete, b.advertised())
}

func TestPublishFlagsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := Capabilities{
			Flags:    Flags(rapid.Uint16().Draw(t, "flags")) & KnownFlags,
			Features: Features(rapid.Uint64().Draw(t, "features")) & AllFeatures,
		}
		acked := rapid.Bool().Draw(t, "acked")
		keyed := rapid.Bool().Draw(t, "keyed")
		idem := rapid.Bool().Draw(t, "idempotent")
		f, enc := c.PublishFlags(acked, keyed, idem)
		switch enc {
		case PublishBinary:
			if !c.Flags.Has(f) {
				t.Fatalf("binary word %v not advertised in %v", f, c.Flags)
			}
			if err := f.CheckLayout(f.Layout()); err != nil {
				t.Fatalf("illegal word %v: %v", f, err)
			}
			if f.Has(FlagBinaryPublishKeyed) != keyed || f.Has(FlagBinaryPublishIdempotent) != idem || f.Has(FlagBinaryPublishAcked) != (acked || idem) {
				t.Fatalf("word %v does not match request acked=%v keyed=%v idem=%v", f, acked, keyed, idem)
			}
		case PublishJSONIdempotent:
			if !idem || !c.Features.Has(FeatureIdempotentProducer) {
				t.Fatalf("json idempotent without feature")
			}
		case PublishUnavailable:
			if !idem || c.Features.Has(FeatureIdempotentProducer) {
				t.Fatalf("unavailable for a non-idempotent publish")
			}
		case PublishJSON:
			if idem {
				t.Fatalf("idempotent publish as plain JSON")
			}
		}
	})
}
