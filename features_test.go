package felix_test

import (
	"math/bits"
	"testing"

	"github.com/flxproto/felix"
	"pgregory.net/rapid"
)

// The feature tables of docs/features.md §1–§2, restated independently.
var specFeatures = []struct {
	f    felix.Features
	want uint64
	name string
}{
	{felix.FeatureTopology, 0x0000_0001, "TOPOLOGY"},
	{felix.FeatureRedirect, 0x0000_0002, "REDIRECT"},
	{felix.FeatureCacheDelete, 0x0000_0004, "CACHE_DELETE"},
	{felix.FeatureConsumerGroup, 0x0000_0008, "CONSUMER_GROUP"},
	{felix.FeatureGroupDeadLetters, 0x0000_0010, "GROUP_DEAD_LETTERS"},
	{felix.FeatureStreamShards, 0x0000_0020, "STREAM_SHARDS"},
	{felix.FeatureCacheWatch, 0x0000_0040, "CACHE_WATCH"},
	{felix.FeatureCacheWatchRetained, 0x0000_0080, "CACHE_WATCH_RETAINED"},
	{felix.FeatureCounters, 0x0000_0100, "COUNTERS"},
	{felix.FeatureIdempotentProducer, 0x0000_0200, "IDEMPOTENT_PRODUCER"},
	{felix.FeatureCacheShards, 0x0000_0400, "CACHE_SHARDS"},
	{felix.FeatureErrorCodes, 0x0000_0800, "ERROR_CODES"},
	{felix.FeatureShardMoved, 0x0000_1000, "SHARD_MOVED"},
	{felix.FeatureUnsupported, 0x0000_2000, "UNSUPPORTED"},
	{felix.FeatureSequenceReused, 0x0000_4000, "SEQUENCE_REUSED"},
	{felix.FeaturePublishPipeline, 0x0000_8000, "PUBLISH_PIPELINE"},
	{felix.FeatureAtomicCommit, 0x0001_0000, "ATOMIC_COMMIT"},
	{felix.FeatureStreamPublishWindow, 0x0002_0000, "STREAM_PUBLISH_WINDOW"},
	{felix.FeatureShardOwners, 0x0004_0000, "SHARD_OWNERS"},
	{felix.FeatureAckOnCommit, 0x0008_0000, "ACK_ON_COMMIT"},
	{felix.FeatureGroupConsumer, 0x0010_0000, "GROUP_CONSUMER"},
	{felix.FeatureSubscriptionLagged, 0x0020_0000, "SUBSCRIPTION_LAGGED"},
	{felix.FeatureGroupSkipped, 0x0040_0000, "GROUP_SKIPPED"},
	{felix.FeatureGroupPublisher, 0x0080_0000, "GROUP_PUBLISHER"},
	{felix.FeatureGroupAdmin, 0x0100_0000, "GROUP_ADMIN"},
	{felix.FeatureCacheConditional, 0x0200_0000, "CACHE_CONDITIONAL"},
	{felix.FeatureRecordTimestamps, 0x0400_0000, "RECORD_TIMESTAMPS"},
	{felix.FeatureGroupClaimControl, 0x0800_0000, "GROUP_CLAIM_CONTROL"},
	{felix.FeaturePublishConditional, 0x1000_0000, "PUBLISH_CONDITIONAL"},
	{felix.FeatureStreamRead, 0x2000_0000, "STREAM_READ"},
	{felix.FeatureSubscribeQueue, 0x4000_0000, "SUBSCRIBE_QUEUE"},
	{felix.FeatureExtended, 0x8000_0000, "EXTENDED"},
	{felix.FeatureInspect, 0x1_0000_0000, "INSPECT"},
	{felix.FeatureStreamDeleted, 0x2_0000_0000, "STREAM_DELETED"},
	{felix.FeaturePublishWidth, 0x4_0000_0000, "PUBLISH_WIDTH"},
}

func TestFeatureConstants(t *testing.T) {
	var lo, hi felix.Features
	for _, sf := range specFeatures {
		if uint64(sf.f) != sf.want {
			t.Errorf("%s = %#x, want %#x", sf.name, uint64(sf.f), sf.want)
		}
		if got := sf.f.String(); got != sf.name {
			t.Errorf("%#x.String() = %q, want %q", sf.want, got, sf.name)
		}
		switch {
		case sf.f == felix.FeatureExtended:
		case sf.want < 1<<32:
			lo |= sf.f
		default:
			hi |= sf.f
		}
	}
	if lo != felix.KnownFeatures || uint64(felix.KnownFeatures) != 0x7FFF_FFFF {
		t.Errorf("KnownFeatures = %#x, low-word constants = %#x", uint64(felix.KnownFeatures), uint64(lo))
	}
	if felix.KnownFeaturesHi != hi || felix.KnownFeaturesHi.Hi() != 0x7 || felix.KnownFeaturesHi.Lo() != 0 {
		t.Errorf("KnownFeaturesHi = %#x", uint64(felix.KnownFeaturesHi))
	}
	if felix.AllFeatures != lo|hi || felix.AllFeatures.Has(felix.FeatureExtended) {
		t.Errorf("AllFeatures = %#x", uint64(felix.AllFeatures))
	}
}

func TestFeaturesSetOperations(t *testing.T) {
	a := felix.FeatureCacheDelete | felix.FeatureErrorCodes | felix.FeatureInspect
	b := felix.FeatureErrorCodes | felix.FeatureStreamDeleted
	if !a.Has(felix.FeatureCacheDelete|felix.FeatureInspect) || a.Has(felix.FeatureStreamDeleted) {
		t.Error("Has")
	}
	if !a.Any(b) || a.Any(felix.FeatureTopology|felix.FeaturePublishWidth) {
		t.Error("Any")
	}
	if a.Union(b) != a|b || a.Intersect(b) != felix.FeatureErrorCodes || a.Without(b) != felix.FeatureCacheDelete|felix.FeatureInspect {
		t.Error("Union/Intersect/Without")
	}
	if a.Lo() != 0x0804 || a.Hi() != 0x1 {
		t.Errorf("Lo/Hi = %#x/%#x", a.Lo(), a.Hi())
	}
	if a.Extended() || !(a | felix.FeatureExtended).Extended() {
		t.Error("Extended")
	}
}

func TestFeaturesString(t *testing.T) {
	tests := []struct {
		f    felix.Features
		want string
	}{
		{0, "none"},
		{felix.FeatureCacheDelete | felix.FeatureErrorCodes | felix.FeatureInspect, "CACHE_DELETE|ERROR_CODES|INSPECT"},
		{1 << 35, "bit35"},
		{felix.FeatureTopology | 1<<63, "TOPOLOGY|bit63"},
	}
	for _, tc := range tests {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("%#x.String() = %q, want %q", uint64(tc.f), got, tc.want)
		}
	}
}

func u32p(v uint32) *uint32 { return &v }

// The extended-word rules of docs/features.md §3, as tables.
func TestFeaturesWireRules(t *testing.T) {
	const ext = uint32(felix.FeatureExtended)
	offer := []struct {
		name   string
		f      felix.Features
		lo, hi uint32
		sendHi bool
	}{
		{"nothing", 0, 0, 0, false},
		{"low only", felix.FeatureErrorCodes, 0x800, 0, false},
		{"low only, stray marker dropped", felix.FeatureErrorCodes | felix.FeatureExtended, 0x800, 0, false},
		{"high word sets marker", felix.FeatureErrorCodes | felix.FeatureInspect, 0x800 | ext, 1, true},
		{"high only", felix.FeatureStreamDeleted, ext, 2, true},
		{"everything", felix.AllFeatures, 0xFFFF_FFFF, 7, true},
	}
	for _, tc := range offer {
		lo, hi, send := tc.f.WireWords()
		if lo != tc.lo || hi != tc.hi || send != tc.sendHi {
			t.Errorf("offer %s: WireWords = %#x, %#x, %v; want %#x, %#x, %v", tc.name, lo, hi, send, tc.lo, tc.hi, tc.sendHi)
		}
	}

	answer := []struct {
		name   string
		f      felix.Features
		peerLo uint32
		lo, hi uint32
		sendHi bool
	}{
		{"client without marker: auth_ok as before the high word", felix.FeatureCacheDelete | felix.FeatureInspect, 0x800, 0x4, 0, false},
		{"client with marker, broker has high bits", felix.FeatureCacheDelete | felix.FeatureInspect, 0x800 | ext, 0x4 | ext, 1, true},
		{"client with marker, broker has no high bits", felix.FeatureCacheDelete, ext, 0x4, 0, false},
		{"marker in broker's own set is not sent by itself", felix.FeatureCacheDelete | felix.FeatureExtended, 0, 0x4, 0, false},
	}
	for _, tc := range answer {
		lo, hi, send := tc.f.AnswerWords(tc.peerLo)
		if lo != tc.lo || hi != tc.hi || send != tc.sendHi {
			t.Errorf("answer %s: = %#x, %#x, %v; want %#x, %#x, %v", tc.name, lo, hi, send, tc.lo, tc.hi, tc.sendHi)
		}
	}

	read := []struct {
		name string
		lo   uint32
		hi   *uint32
		want felix.Features
	}{
		{"absent low word", 0, nil, 0},
		{"low only", 0x804, nil, felix.FeatureCacheDelete | felix.FeatureErrorCodes},
		{"hi without marker is ignored", 0x804, u32p(1), felix.FeatureCacheDelete | felix.FeatureErrorCodes},
		{"marker with absent hi reads 0", 0x4 | ext, nil, felix.FeatureCacheDelete},
		{"marker with hi", 0x4 | ext, u32p(5), felix.FeatureCacheDelete | felix.FeatureInspect | felix.FeaturePublishWidth},
		{"unknown hi bits are kept", ext, u32p(0x8000_0000), 1 << 63},
	}
	for _, tc := range read {
		if got := felix.FeaturesFromWire(tc.lo, tc.hi); got != tc.want {
			t.Errorf("read %s: FeaturesFromWire = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Properties: offering any set and reading it back is the identity (the
// marker is never part of a set); answering honours the client's marker.
func TestPropFeaturesWire(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := felix.Features(rapid.Uint64().Draw(t, "features")) &^ felix.FeatureExtended
		lo, hi, send := f.WireWords()
		var hp *uint32
		if send {
			hp = &hi
		}
		if got := felix.FeaturesFromWire(lo, hp); got != f {
			t.Fatalf("offer %v read back as %v", f, got)
		}
		if send != (f.Hi() != 0) || (lo&uint32(felix.FeatureExtended) != 0) != send {
			t.Fatalf("offer %v: sendHi %v, marker %v", f, send, lo&uint32(felix.FeatureExtended) != 0)
		}

		peerLo := rapid.Uint32().Draw(t, "peer_lo")
		alo, ahi, asend := f.AnswerWords(peerLo)
		peerExt := peerLo&uint32(felix.FeatureExtended) != 0
		if asend != (peerExt && f.Hi() != 0) {
			t.Fatalf("answer to %#x with %v: sendHi %v", peerLo, f, asend)
		}
		var ap *uint32
		if asend {
			ap = &ahi
		}
		got := felix.FeaturesFromWire(alo, ap)
		want := f
		if !peerExt {
			want = felix.Features(f.Lo())
		}
		if got != want {
			t.Fatalf("answer read back as %v, want %v", got, want)
		}
		if !asend && alo != f.Lo() {
			t.Fatalf("answer without high word changed the low word: %#x vs %#x", alo, f.Lo())
		}

		// The marker never survives reading, and a stray hi is never trusted.
		stray := rapid.Uint32().Draw(t, "stray_hi")
		if g := felix.FeaturesFromWire(lo&^uint32(felix.FeatureExtended), &stray); g.Hi() != 0 || g.Extended() {
			t.Fatalf("hi trusted without marker: %v", g)
		}
		if bits.OnesCount64(uint64(f.Union(f))) != bits.OnesCount64(uint64(f)) {
			t.Fatal("union not idempotent")
		}
	})
}
