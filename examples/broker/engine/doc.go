// Package engine is the transport-independent core of the Felix reference
// broker: streams (ephemeral and durable, sharded, with retention),
// subscriptions with bounded per-subscriber queues, idempotent producers,
// and the cache (TTL, conditional writes, watches, counters).
//
// The engine knows nothing about QUIC or streams of frames. A transport
// (examples/broker/server) decodes requests, calls the engine and writes the
// answers; tests and benchmarks drive the engine directly.
//
// # Delivery
//
// Every published batch becomes one immutable Batch shared by all
// subscribers of its shard. Batch.Frame encodes the 0x0004 event frame for
// a set of modifier flags at most once per distinct set (offsets,
// publisher, timestamps, skipped) and hands the same bytes to every
// subscriber that uses that set, so the encoding cost of a published batch
// does not grow with the number of subscribers.
//
// Each subscription has a bounded queue (its queue capacity, counted in
// published batches). Publishing never blocks on a subscriber: when a queue
// is full the batch is dropped for that subscriber only. A subscriber that
// asked for lag reports (SubscribeRequest.LagReport, durable streams only) is
// then ended with a Lagged delivery naming the first offset it did not get;
// any other subscriber just sees a gap in the offsets.
//
// # Concurrency
//
// All methods of Engine, Subscription and Watch are safe for concurrent use.
// Publishes to one shard are serialised, so per-shard order is the order in
// which Publish calls for that shard returned.
package engine
