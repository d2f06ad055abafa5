package felix

// The vocabulary requests and answers are made of: which stream or cache a
// call names, and what an acknowledged publish answered.

// Topic names a stream.
type Topic struct {
	TenantID, Namespace, Stream string
}

// CacheRef names a cache.
type CacheRef struct {
	TenantID, Namespace, Cache string
}

// PublishResult is the broker's answer to an acked publish.
type PublishResult struct {
	// Offset is the offset of the batch's first record (record i is at
	// Offset+i), valid when HasOffset: the broker acked after the write and
	// the client offered flag 0x1000.
	Offset    uint64
	HasOffset bool
	// Owner names the shard owner the broker forwarded the batch to, valid
	// when HasOwner (binary acks with flag 0x0080): a hint to send the
	// stream's next batches there directly.
	Owner    AckOwner
	HasOwner bool
}
