package felix

// The detail.reason words of shard_unavailable errors (docs/errors.md §4.1).
// They also fill shard_owners_view owners[].unavailable. The list is open:
// a peer may send other words, which are kept as plain strings, so these
// are untyped constants usable wherever a reason string goes
// (ErrorDetail.Reason, PublishAck.Reason, ShardOwner.Unavailable).
const (
	// ReasonNotAssigned: placement has not assigned the shard.
	ReasonNotAssigned = "not_assigned"
	// ReasonOwnerUnavailable: the owner is known but unreachable or not live.
	ReasonOwnerUnavailable = "owner_unavailable"
	// ReasonNotReady: the owner has not finished opening (also a forwarded
	// write refused because the owner's epoch was fenced).
	ReasonNotReady = "not_ready"
	// ReasonStale: this broker's routing view is behind the request's.
	ReasonStale = "stale"
	// ReasonFenced: this broker's lease lapsed, its epoch was superseded,
	// or it stopped serving between admitting and writing (nothing written).
	ReasonFenced = "fenced"
	// ReasonMoving: the shard is moving and did not cut over within the
	// hold time, or too many publishes were held; retry_after_ms suggests
	// when to retry.
	ReasonMoving = "moving"
	// ReasonRegionNotRoutable: the leader is in a region this broker will
	// not forward to.
	ReasonRegionNotRoutable = "region_not_routable"
)

// The detail.reason words of overloaded errors (docs/errors.md §4.2).
const (
	// ReasonPublishQueueFull: the publish queue had no room for the tenant;
	// nothing was queued.
	ReasonPublishQueueFull = "publish_queue_full"
	// ReasonTenantQuota: the tenant is over its publish quota; nothing was
	// queued; retry_after_ms says when it is back under.
	ReasonTenantQuota = "tenant_quota"
)
