package client

//go:generate go run ../internal/gen/clientgen

// This file gives the names an application needs from the layers below
// (the codec, felix; the connection, conn) under package client, so that a
// program imports client alone. Each is the lower layer's own type, value
// or sentinel (an alias, not a copy): errors.Is and errors.As match a
// client name and the lower layer's name alike, and a value passes between
// the packages unconverted. The typed calls' names (CommitRequest,
// GroupRef, ReadOptions, ...) are package api's, aliased in
// calls_gen.go.

import (
	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// StartPosition is where a subscription or a consumer group starts:
// Latest (the zero value), Earliest or StartAt(offset).
type StartPosition = felix.StartPosition

// Start positions. Their names differ from the codec's StartKind
// constants (felix.StartLatest, felix.StartEarliest), which are the kinds
// these positions carry, not positions.
var (
	// Latest delivers only records published from now on (the zero value
	// of StartPosition).
	Latest = StartPosition{Kind: felix.StartLatest}
	// Earliest delivers from the oldest record the broker keeps.
	Earliest = StartPosition{Kind: felix.StartEarliest}
)

// PayloadMode says how long a delivered Event's Payload and Publisher
// stay valid (conn.PayloadMode).
type PayloadMode = conn.PayloadMode

// Payload modes (see conn.PayloadMode).
const (
	// PayloadsUntilNext (the default): valid until the next Next call;
	// Event.Clone keeps one.
	PayloadsUntilNext = conn.PayloadsUntilNext
	// PayloadsOwned: every frame in memory of its own; events may be kept.
	PayloadsOwned = conn.PayloadsOwned
	// PayloadsUntilRelease: valid until Event.Release on it or a later
	// event, for handing events to another goroutine in order.
	PayloadsUntilRelease = conn.PayloadsUntilRelease
)

// StartAt starts at offset off: the record at off is the first delivered
// (felix.StartAt).
func StartAt(off uint64) StartPosition { return felix.StartAt(off) }

// AckMode is the acknowledgement mode of a publish (PublishOptions.Ack).
type AckMode = felix.AckMode

// Acknowledgement modes of PublishOptions.Ack. The client sees no
// difference between the two (one answer per batch either way); the mode
// is carried to the broker.
const (
	AckPerBatch   = felix.AckPerBatch
	AckPerMessage = felix.AckPerMessage
)

// CacheCondition is the condition of a conditional cache write: IfAbsent
// or IfVersion(v).
type CacheCondition = felix.CacheCondition

// ShardKind says whether a shard query (ShardOwners, ShardInspect) names
// a stream or a cache.
type ShardKind = felix.ShardKind

// Shard kinds.
const (
	ShardKindStream = felix.ShardKindStream
	ShardKindCache  = felix.ShardKindCache
)

// The codec's views that the cluster queries return (StreamShards,
// ShardOwners, Topology, ShardInspect) and the subscription listing's
// filter and cursor (Subscriptions).
type (
	// StreamShardsView is a stream's shard count and routing
	// (StreamShards): Routing.V.ShardOf(key, true, Shards) is the shard a
	// keyed record lands on.
	StreamShardsView = felix.StreamShardsView
	// ShardOwner is one shard's owner (ShardOwners).
	ShardOwner = felix.ShardOwner
	// BrokerEndpoint is one broker of the cluster (Topology).
	BrokerEndpoint = felix.BrokerEndpoint
	// ShardInspection is a broker's view of one shard (ShardInspect).
	ShardInspection = felix.ShardInspection
	// SubscriptionsFilter selects the subscriptions Subscriptions lists.
	SubscriptionsFilter = felix.SubscriptionsFilter
	// SubscriptionsCursor continues a Subscriptions listing.
	SubscriptionsCursor = felix.SubscriptionsCursor
)

// The errors of the layers below that a client call returns, so that a
// program matches every one of them with a client name. docs/errors.md
// §10 says, for each, what happened and what to do.

// BrokerError is an error the broker answered: Code (ErrorCode) says what,
// RetryClass() what to do, Reason and RetryAfter the detail. The client
// returns it after judging it (a retryable one was retried within
// Config.MaxAttempts first).
type BrokerError = felix.BrokerError

// NotLeaderError is a not_leader answer naming the shard's owner. The
// client follows it by itself; a caller sees it only through At, which
// does not follow redirects.
type NotLeaderError = felix.NotLeaderError

// CursorError is a subscription's start offset the stream no longer (or
// not yet) holds: Reason, Requested and Available say which. Resubscribe
// from Available, or from Earliest.
type CursorError = felix.CursorError

// PublishRefusedError is a publish the broker refused before writing it
// (an idempotent Producer's gap, unknown producer or reused sequence).
type PublishRefusedError = felix.PublishRefusedError

// LaggedError ends a subscription that fell behind its broker's queue,
// when SubscribeOptions.LagAsError asks for it (otherwise the client
// resumes gaplessly and reports NoticeLagged): ResumeFrom is the offset
// to resubscribe from.
type LaggedError = felix.LaggedError

// ShardMovedError is a shard that moved to another broker. A Subscription
// and a Watch follow the move by themselves.
type ShardMovedError = felix.ShardMovedError

// StreamDeletedError ends a subscription whose stream was deleted.
type StreamDeletedError = felix.StreamDeletedError

// FrameLimitError refuses, before anything is sent, a request larger than
// the frame limit (errors.Is ErrFrameTooLarge). Send smaller batches or
// values.
type FrameLimitError = felix.FrameLimitError

// DialError is a failed dial: errors.Is matches its Kind (ErrBadAddress,
// ErrNoAnswer, ErrCertUntrusted or ErrAuthRefused), and its message says
// which address failed and what to check.
type DialError = conn.DialError

// TransportError is a QUIC connection or stream failure the client could
// not work around (errors.Is ErrBrokerShutdown when the broker went away).
type TransportError = conn.TransportError

// RetryClass is what a failure calls for (RetryClassOf, BrokerError's
// RetryClass method).
type RetryClass = felix.RetryClass

// Retry classes (docs/errors.md §4).
const (
	// RetryRetry: nothing was applied; re-sending is safe.
	RetryRetry = felix.RetryRetry
	// RetryAfter: nothing was applied; re-send after a wait.
	RetryAfter = felix.RetryAfter
	// RetryRedirect: nothing was applied; the shard's owner serves it.
	RetryRedirect = felix.RetryRedirect
	// RetryOutcomeUnknown: it may have been applied (an *AmbiguousError).
	RetryOutcomeUnknown = felix.RetryOutcomeUnknown
	// RetryFatal: it will fail the same way again.
	RetryFatal = felix.RetryFatal
)

// ErrorCode is a broker error's code (BrokerError.Code).
type ErrorCode = felix.ErrorCode

// The broker's error codes (docs/errors.md §3) that an application may
// match in BrokerError.Code.
const (
	CodeUnauthenticated  = felix.CodeUnauthenticated
	CodeForbidden        = felix.CodeForbidden
	CodeNotFound         = felix.CodeNotFound
	CodeInvalidRequest   = felix.CodeInvalidRequest
	CodeShardUnavailable = felix.CodeShardUnavailable
	CodeNotLeader        = felix.CodeNotLeader
	CodeQuorumTimeout    = felix.CodeQuorumTimeout
	CodeLeadershipLost   = felix.CodeLeadershipLost
	CodeUnacknowledged   = felix.CodeUnacknowledged
	CodeOverloaded       = felix.CodeOverloaded
	CodeLimitExceeded    = felix.CodeLimitExceeded
	CodeDraining         = felix.CodeDraining
	CodeInternal         = felix.CodeInternal
	CodeStorage          = felix.CodeStorage
	CodeStaleClaim       = felix.CodeStaleClaim
	CodeRevoked          = felix.CodeRevoked
	CodeStaleWidth       = felix.CodeStaleWidth
)

// Opt is an optional value (CommitRequest.ExpectedOffset, ...): V is
// meaningful when Set.
type Opt[T any] = felix.Opt[T]

// Some returns v as a set Opt.
func Some[T any](v T) Opt[T] { return felix.Some(v) }
