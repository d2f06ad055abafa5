package felix

// This file holds the capability negotiation rules of docs/negotiation.md and
// docs/features.md §3–§4 that do not depend on a message representation: what a client
// offers, what the answer lets it use, and what a broker answers. The
// conversion to and from the auth / auth_ok / ok messages is in
// negotiate_msg.go.

// DefaultClientFlags returns the flag set a client offers by default, as the
// upstream client does: every known flag except FlagEventBatchPublisher and
// FlagEventBatchTimestamps, which are opt-in.
func DefaultClientFlags() Flags {
	return KnownFlags &^ (FlagEventBatchPublisher | FlagEventBatchTimestamps)
}

// DefaultClientFeatures returns the feature set a client offers by default:
// every known feature except the opt-in ones (FeatureAckOnCommit,
// FeatureGroupPublisher, FeatureRecordTimestamps, as the upstream client)
// and FeaturePublishWidth.
//
// A client offers only bits whose consequences it decodes (docs/negotiation.md
// §1). Every message, field and refusal reason that the other
// offered bits let a broker send has a decoder in this package (not_leader,
// shard_moved, subscription_lagged, stream_deleted, unsupported,
// publish_refused with sequence_reused, group record extras,
// cache_value.version, ...). FeaturePublishWidth is a broker bit whose only
// use is the publish_width field of keyed batches, which no message of this
// package carries; offering it would promise what the client cannot use.
func DefaultClientFeatures() Features {
	return AllFeatures &^ (FeatureAckOnCommit | FeatureGroupPublisher | FeatureRecordTimestamps | FeaturePublishWidth)
}

// ClientOffer is what a client offers in the auth message of a stream.
type ClientOffer struct {
	// TenantID and Token are the credentials.
	TenantID string
	Token    string
	// Flags is the client's flag set (client_flags): the modifier bits the
	// broker may set on frames to this client. It must only contain bits the
	// client can decode.
	Flags Flags
	// Features is the client's feature set (client_features and, when it
	// has a high-word bit, client_features_hi with FeatureExtended).
	Features Features
	// Legacy makes the client behave as a pre-negotiation client: auth
	// carries no client_flags and no features, and the broker answers ok.
	Legacy bool
}

// Capabilities is what a client may use on a stream, read from the broker's
// answer to auth. Every "may I send this?" question is answered from the
// advertised set only, never from the client's own set.
type Capabilities struct {
	// Flags is the broker's advertised flag set (server_flags), or
	// OriginalV1Flags for a legacy broker.
	Flags Flags
	// Features is the broker's advertised feature set (both words, the
	// FeatureExtended marker removed), or 0 for a legacy broker.
	Features Features
	// PublishWindow is the number of acked publishes that may be unanswered
	// at once, 0 when no window was granted. It is only set when the broker
	// also advertised FeaturePublishPipeline.
	PublishWindow uint32
	// ListenerPorts are the broker's extra client UDP ports, if any.
	ListenerPorts []uint16
	// Legacy is true when the broker answered a plain ok (no auth_ok).
	Legacy bool
}

// LegacyCapabilities are the capabilities assumed for a broker that answered
// auth with a plain ok: OriginalV1Flags, no features, no window.
func LegacyCapabilities() Capabilities {
	return Capabilities{Flags: OriginalV1Flags, Legacy: true}
}

// CanFlags reports whether the broker advertised every bit of f.
func (c Capabilities) CanFlags(f Flags) bool { return c.Flags.Has(f) }

// CanFeature reports whether the broker advertised every bit of f.
func (c Capabilities) CanFeature(f Features) bool { return c.Features.Has(f) }

// PerStreamWindow reports whether the publish window applies per stream
// (FeatureStreamPublishWindow) rather than to the whole connection.
func (c Capabilities) PerStreamWindow() bool {
	return c.PublishWindow > 0 && c.Features.Has(FeatureStreamPublishWindow)
}

// PublishEncoding is how a publish is sent on the wire.
type PublishEncoding uint8

// Publish encodings, from the binary forms to the JSON fallbacks.
const (
	// PublishUnavailable: the broker cannot take this publish at all (an
	// idempotent publish to a broker without the binary bit or
	// FeatureIdempotentProducer).
	PublishUnavailable PublishEncoding = iota
	// PublishBinary: a binary publish batch frame (Flags says which modifiers).
	PublishBinary
	// PublishJSON: JSON publish / publish_batch (with request_id and ack
	// when acked, key when keyed).
	PublishJSON
	// PublishJSONIdempotent: JSON publish_idempotent.
	PublishJSONIdempotent
)

// String names the encoding.
func (e PublishEncoding) String() string {
	switch e {
	case PublishBinary:
		return "binary"
	case PublishJSON:
		return "json"
	case PublishJSONIdempotent:
		return "json_idempotent"
	}
	return "unavailable"
}

// PublishFlags chooses the publish encoding from the advertised flags and
// features (docs/negotiation.md §2): the binary frame when every
// needed bit was advertised — 0x0008 for acked, 0x0040 for keyed, 0x0100
// (with 0x0008) for idempotent — else the JSON form. For PublishBinary the
// returned flags are the frame's flag word; otherwise they are 0.
// Idempotent publishes are always acked.
func (c Capabilities) PublishFlags(acked, keyed, idempotent bool) (Flags, PublishEncoding) {
	f := FlagBinaryPublishBatch
	if acked || idempotent {
		f |= FlagBinaryPublishAcked
	}
	if keyed {
		f |= FlagBinaryPublishKeyed
	}
	if idempotent {
		f |= FlagBinaryPublishIdempotent
	}
	if c.Flags.Has(f) {
		return f, PublishBinary
	}
	if idempotent {
		if c.Features.Has(FeatureIdempotentProducer) {
			return 0, PublishJSONIdempotent
		}
		return 0, PublishUnavailable
	}
	return 0, PublishJSON
}

// CanRequest reports whether the client may send a request of type msgType:
// it is a client request and its gating feature (if any) was advertised.
// Sending a gated request to a broker without the bit is either a fatal
// unknown message or a silently ignored one; probing is unsafe.
func (c Capabilities) CanRequest(msgType string) bool {
	i := requestIndex(msgType)
	return i >= 0 && c.Features.Has(requestFacts[i].Gate)
}

// Field gates: optional request fields a client may only send when the
// broker advertised the matching bit (an older broker would silently ignore
// them). Capabilities.Unadvertised checks every one of them on a message,
// from the needs= annotations of internal/gen/msggen/messages.txt.

// CanQueueCapacity: queue_capacity on subscribe (FeatureSubscribeQueue).
func (c Capabilities) CanQueueCapacity() bool { return c.Features.Has(FeatureSubscribeQueue) }

// CanRetained: retained on cache_watch (FeatureCacheWatch and FeatureCacheWatchRetained).
func (c Capabilities) CanRetained() bool {
	return c.Features.Has(FeatureCacheWatch | FeatureCacheWatchRetained)
}

// CanGroupConsumer: consumer and reclaim on group_poll (FeatureGroupConsumer).
func (c Capabilities) CanGroupConsumer() bool { return c.Features.Has(FeatureGroupConsumer) }

// CanClaimControl: visibility_ms on group_poll, delay_ms and attempts on
// group_nack (FeatureGroupClaimControl).
func (c Capabilities) CanClaimControl() bool { return c.Features.Has(FeatureGroupClaimControl) }

// CanExpectedOffset: expected_offset on commit (FeaturePublishConditional).
func (c Capabilities) CanExpectedOffset() bool { return c.Features.Has(FeaturePublishConditional) }

// CanPublishWidth: publish_width on keyed batches (FeaturePublishWidth).
func (c Capabilities) CanPublishWidth() bool { return c.Features.Has(FeaturePublishWidth) }

// PeerCapabilities is what a client offered on a stream, recorded by the
// broker to shape every frame it sends to that client.
type PeerCapabilities struct {
	// Flags is the client's client_flags, or OriginalV1Flags when absent.
	Flags Flags
	// Features is the client's feature set (absent = 0; high word by the
	// extended-word rules).
	Features Features
	// Legacy is true when auth carried no client_flags.
	Legacy bool
}

// UnauthenticatedPeer is what a broker assumes for a stream before it
// authenticates: OriginalV1Flags and no features.
func UnauthenticatedPeer() PeerCapabilities {
	return PeerCapabilities{Flags: OriginalV1Flags, Legacy: true}
}

// EventFlags returns the event batch modifier bits the broker may set for
// this client: the intersection of the client's offer with
// EventModifierMask.
func (p PeerCapabilities) EventFlags() Flags { return p.Flags & EventModifierMask }

// AckFlags returns the ack modifier bits the broker may set for this client.
func (p PeerCapabilities) AckFlags() Flags {
	return p.Flags & (FlagBinaryPublishAckOwner | FlagBinaryPublishAckCode | FlagBinaryPublishAckDetail | FlagBinaryPublishAckOffset)
}

// ErrorCodes reports whether code, retry and detail may be sent on error and
// publish_error (FeatureErrorCodes).
func (p PeerCapabilities) ErrorCodes() bool { return p.Features.Has(FeatureErrorCodes) }

// AckOffsets reports whether publish acks may carry the first-record offset
// (flag 0x1000, which also adds offset to JSON publish_ok).
func (p PeerCapabilities) AckOffsets() bool { return p.Flags.Has(FlagBinaryPublishAckOffset) }

// SubscriptionLagged reports whether a durable subscription may be ended with
// subscription_lagged: the client offered FeatureSubscriptionLagged and the
// event offsets flag 0x0020.
func (p PeerCapabilities) SubscriptionLagged() bool {
	return p.Features.Has(FeatureSubscriptionLagged) && p.Flags.Has(FlagEventBatchOffsets)
}

// Unsupported reports whether an unknown request type may be answered with
// unsupported (keeping the stream) rather than closing the stream; brokerHas
// is whether the broker itself advertises FeatureUnsupported.
func (p PeerCapabilities) Unsupported(brokerHas bool) bool {
	return brokerHas && p.Features.Has(FeatureUnsupported)
}

// BrokerOffer is a broker's own capability set, from which it answers auth.
type BrokerOffer struct {
	// Flags is the broker's own flag set, sent as server_flags (not an
	// intersection with the client's).
	Flags Flags
	// Features is the broker's own feature set (both words).
	Features Features
	// PublishWindow is the broker's publish window; 0 disables pipelining.
	// It is granted only to clients that offered FeaturePublishPipeline.
	PublishWindow uint32
	// ListenerPorts lists the client UDP ports when the broker binds more
	// than one listener; nil otherwise.
	ListenerPorts []uint16
}

// advertised returns the feature set the broker really advertises:
// FeaturePublishPipeline and FeatureStreamPublishWindow only with a window.
func (b BrokerOffer) advertised() Features {
	f := b.Features &^ FeatureExtended
	if b.PublishWindow == 0 {
		f &^= FeaturePublishPipeline | FeatureStreamPublishWindow
	}
	return f
}
