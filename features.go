package felix

import (
	"math/bits"
	"strconv"
	"strings"
)

// Features is a set of feature bits: the pair of 32-bit words exchanged in
// auth (client_features, client_features_hi) and auth_ok (server_features,
// server_features_hi), held as one 64-bit value. Bits 0..31 are the low word;
// bit 32 is bit 0 of the high word.
//
// Feature bits say that a message, request or field exists; they never appear
// in a frame header (that is Flags). FeatureExtended is not a feature but the
// wire marker that says a high word follows; it is managed by WireWords and
// FeaturesFromWire and is never part of a set built by this package.
type Features uint64

// Low-word feature bits.
const (
	FeatureTopology            Features = 0x0000_0001 // topology → topology_view
	FeatureRedirect            Features = 0x0000_0002 // broker may answer with not_leader
	FeatureCacheDelete         Features = 0x0000_0004 // cache_delete
	FeatureConsumerGroup       Features = 0x0000_0008 // group_poll, group_ack, group_nack (+ group_records)
	FeatureGroupDeadLetters    Features = 0x0000_0010 // group_dead_letters, group_discard, group_redrive
	FeatureStreamShards        Features = 0x0000_0020 // stream_shards → stream_shards_view
	FeatureCacheWatch          Features = 0x0000_0040 // cache_watch (+ cache_watch_started, cache_event, cache_watch_lagged)
	FeatureCacheWatchRetained  Features = 0x0000_0080 // retained field of cache_watch (+ retained_count)
	FeatureCounters            Features = 0x0000_0100 // counter_add, counter_get (+ counter_value)
	FeatureIdempotentProducer  Features = 0x0000_0200 // producer_init, publish_idempotent (+ publish_refused)
	FeatureCacheShards         Features = 0x0000_0400 // cache_shards → cache_shards_view
	FeatureErrorCodes          Features = 0x0000_0800 // code, retry, detail on error / publish_error
	FeatureShardMoved          Features = 0x0000_1000 // shard_moved as the last frame of an event stream
	FeatureUnsupported         Features = 0x0000_2000 // unsupported answers to unknown request types; extension
	FeatureSequenceReused      Features = 0x0000_4000 // publish_refused reason sequence_reused
	FeaturePublishPipeline     Features = 0x0000_8000 // in-order acked publish answers and publish_window
	FeatureAtomicCommit        Features = 0x0001_0000 // commit → commit_ok, state_get → state_value
	FeatureStreamPublishWindow Features = 0x0002_0000 // publish_window applies per stream
	FeatureShardOwners         Features = 0x0004_0000 // shard_owners → shard_owners_view
	FeatureAckOnCommit         Features = 0x0008_0000 // acked publishes answered after the write, with offsets
	FeatureGroupConsumer       Features = 0x0010_0000 // consumer and reclaim fields on group_poll
	FeatureSubscriptionLagged  Features = 0x0020_0000 // subscription_lagged ends a durable subscription
	FeatureGroupSkipped        Features = 0x0040_0000 // skipped_before on group_records entries
	FeatureGroupPublisher      Features = 0x0080_0000 // publisher on group_records entries
	FeatureGroupAdmin          Features = 0x0100_0000 // group_seek, group_describe, group_delete
	FeatureCacheConditional    Features = 0x0200_0000 // cache_put_if, cache_delete_if; version on cache_value
	FeatureRecordTimestamps    Features = 0x0400_0000 // offset_for_time; timestamp_micros on group records
	FeatureGroupClaimControl   Features = 0x0800_0000 // group_extend, group_dead_letter, delay_ms/attempts, visibility_ms
	FeaturePublishConditional  Features = 0x1000_0000 // publish_if; expected_offset on commit; offset_mismatch
	FeatureStreamRead          Features = 0x2000_0000 // stream_read → stream_records
	FeatureSubscribeQueue      Features = 0x4000_0000 // queue_capacity on subscribe and subscribed
	// FeatureExtended is the wire marker in the low word saying that a high
	// word (*_features_hi) follows. It is not a feature.
	FeatureExtended Features = 0x8000_0000
)

// High-word feature bits (bit 32 is bit 0 of *_features_hi).
//
// FEATURE_EXPLICIT_SHARD is named by the protocol overview but no source
// gives its bit value, so it is not defined here; defining a guess would
// make two conforming peers disagree on the wire.
const (
	FeatureInspect       Features = 0x1 << 32 // shard_inspect, subscriptions_list
	FeatureStreamDeleted Features = 0x2 << 32 // stream_deleted as the last frame of an event stream
	FeaturePublishWidth  Features = 0x4 << 32 // publish_width on keyed batches, stale_width refusals
)

const (
	// KnownFeatures is every defined low-word feature bit, without the
	// FeatureExtended marker.
	KnownFeatures Features = 0x7FFF_FFFF
	// KnownFeaturesHi is every defined high-word feature bit.
	KnownFeaturesHi Features = FeatureInspect | FeatureStreamDeleted | FeaturePublishWidth
	// AllFeatures is KnownFeatures | KnownFeaturesHi.
	AllFeatures = KnownFeatures | KnownFeaturesHi
)

var featureNames = map[Features]string{
	FeatureTopology:            "TOPOLOGY",
	FeatureRedirect:            "REDIRECT",
	FeatureCacheDelete:         "CACHE_DELETE",
	FeatureConsumerGroup:       "CONSUMER_GROUP",
	FeatureGroupDeadLetters:    "GROUP_DEAD_LETTERS",
	FeatureStreamShards:        "STREAM_SHARDS",
	FeatureCacheWatch:          "CACHE_WATCH",
	FeatureCacheWatchRetained:  "CACHE_WATCH_RETAINED",
	FeatureCounters:            "COUNTERS",
	FeatureIdempotentProducer:  "IDEMPOTENT_PRODUCER",
	FeatureCacheShards:         "CACHE_SHARDS",
	FeatureErrorCodes:          "ERROR_CODES",
	FeatureShardMoved:          "SHARD_MOVED",
	FeatureUnsupported:         "UNSUPPORTED",
	FeatureSequenceReused:      "SEQUENCE_REUSED",
	FeaturePublishPipeline:     "PUBLISH_PIPELINE",
	FeatureAtomicCommit:        "ATOMIC_COMMIT",
	FeatureStreamPublishWindow: "STREAM_PUBLISH_WINDOW",
	FeatureShardOwners:         "SHARD_OWNERS",
	FeatureAckOnCommit:         "ACK_ON_COMMIT",
	FeatureGroupConsumer:       "GROUP_CONSUMER",
	FeatureSubscriptionLagged:  "SUBSCRIPTION_LAGGED",
	FeatureGroupSkipped:        "GROUP_SKIPPED",
	FeatureGroupPublisher:      "GROUP_PUBLISHER",
	FeatureGroupAdmin:          "GROUP_ADMIN",
	FeatureCacheConditional:    "CACHE_CONDITIONAL",
	FeatureRecordTimestamps:    "RECORD_TIMESTAMPS",
	FeatureGroupClaimControl:   "GROUP_CLAIM_CONTROL",
	FeaturePublishConditional:  "PUBLISH_CONDITIONAL",
	FeatureStreamRead:          "STREAM_READ",
	FeatureSubscribeQueue:      "SUBSCRIBE_QUEUE",
	FeatureExtended:            "EXTENDED",
	FeatureInspect:             "INSPECT",
	FeatureStreamDeleted:       "STREAM_DELETED",
	FeaturePublishWidth:        "PUBLISH_WIDTH",
}

// Has reports whether every bit of x is in f.
func (f Features) Has(x Features) bool { return f&x == x }

// Any reports whether at least one bit of x is in f.
func (f Features) Any(x Features) bool { return f&x != 0 }

// Union returns f ∪ x.
func (f Features) Union(x Features) Features { return f | x }

// Intersect returns f ∩ x.
func (f Features) Intersect(x Features) Features { return f & x }

// Without returns f with the bits of x removed.
func (f Features) Without(x Features) Features { return f &^ x }

// Lo returns the low 32-bit word as stored (including FeatureExtended if set).
func (f Features) Lo() uint32 { return uint32(f) }

// Hi returns the high 32-bit word.
func (f Features) Hi() uint32 { return uint32(f >> 32) }

// String renders the set as "CACHE_DELETE|ERROR_CODES|INSPECT"; an undefined
// bit renders as "bitN" (N counted from 0 across both words); zero is "none".
func (f Features) String() string {
	if f == 0 {
		return "none"
	}
	var b strings.Builder
	for rest := uint64(f); rest != 0; rest &= rest - 1 {
		bit := Features(1) << bits.TrailingZeros64(rest)
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		if name, ok := featureNames[bit]; ok {
			b.WriteString(name)
		} else {
			b.WriteString("bit")
			b.WriteString(strconv.Itoa(bits.TrailingZeros64(rest)))
		}
	}
	return b.String()
}

// WireWords returns the words a peer sends for the set f when it offers it
// (auth): the low word, and the high word with sendHi true only when f has a
// high-word bit, in which case the low word carries FeatureExtended. Any
// FeatureExtended bit already in f is ignored.
func (f Features) WireWords() (lo uint32, hi uint32, sendHi bool) {
	f &^= FeatureExtended
	hi = f.Hi()
	lo = f.Lo()
	if hi != 0 {
		return lo | uint32(FeatureExtended), hi, true
	}
	return lo, 0, false
}

// AnswerWords returns the words a broker sends in auth_ok for its own set f
// given the low word peerLo the client offered: the high word (and the
// FeatureExtended marker) only when the client set FeatureExtended and f has
// a high-word bit; otherwise exactly the low word, as before the high word
// existed.
func (f Features) AnswerWords(peerLo uint32) (lo uint32, hi uint32, sendHi bool) {
	f &^= FeatureExtended
	if peerLo&uint32(FeatureExtended) != 0 && f.Hi() != 0 {
		return f.Lo() | uint32(FeatureExtended), f.Hi(), true
	}
	return f.Lo(), 0, false
}

// FeaturesFromWire reads a feature set from the wire words of one message.
// lo is the low word (0 when absent). hi is the high word, or nil when the
// field was absent; it is trusted only when lo carries FeatureExtended (an
// absent hi with the marker reads as 0). The marker itself is dropped from
// the result.
func FeaturesFromWire(lo uint32, hi *uint32) Features {
	f := Features(lo) &^ FeatureExtended
	if lo&uint32(FeatureExtended) != 0 && hi != nil {
		f |= Features(*hi) << 32
	}
	return f
}

// Extended reports whether the low word of f carries the FeatureExtended marker.
func (f Features) Extended() bool { return f&FeatureExtended != 0 }
