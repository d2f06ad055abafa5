// Package engine is the transport-independent core of the Felix reference
// broker: streams (ephemeral and durable, sharded, with retention),
// subscriptions with bounded per-subscriber queues, idempotent producers,
// and the cache (TTL, conditional writes, watches, counters).
//
// The engine knows nothing about QUIC or streams of frames. A transport
// (internal/broker/server) decodes requests, calls the engine and writes the
// answers; tests and benchmarks drive the engine directly.
//
// # Durable and ephemeral streams
//
// A durable stream keeps a log per shard, bounded by its retention
// (StreamConfig.RetainRecords and RetainBytes): every publish is acked with
// its offset, every delivery (live or replayed) carries offsets and append
// times, and stream_read pages through the log.
//
// An ephemeral (in-memory) stream behaves like upstream's in-memory
// streams: publishes are acked without an offset and live deliveries carry
// neither offsets nor times, but each shard keeps a bounded replay ring of
// its last StreamConfig.RingRecords records (DefaultRingRecords, 1024, by
// default; RetainBytes bounds it too). The ring's sequence numbers act as
// offsets: a subscribe from earliest replays the ring, a subscribe from an
// offset inside the ring replays from there (replayed batches carry those
// offsets, never times), and an offset that has left the ring is refused
// with a too_old cursor error naming the oldest offset still held (in_future
// past the tail). Lag reports and stream_read remain durable-only.
//
// Keyed publishes are placed on a shard by the stream's routing
// (StreamConfig.Routing, felix.Routing: modulo by default, or jump_hash);
// unkeyed publishes go to shard 0.
//
// # Delivery
//
// Every published batch becomes one immutable Batch shared by all
// subscribers of its shard, and one log segment: its records stored as the
// 0x0004 event frame a subscriber with the default modifiers gets (the base
// offset on a durable stream, nothing else), which is sent as it is, with
// no encode. For any other set of modifier flags (offsets, publisher,
// timestamps, skipped), Batch.Frame encodes the frame at most once per
// distinct set and hands the same bytes to every subscriber that uses that
// set, so the encoding cost of a published batch does not grow with the
// number of subscribers. A subscription's Delivery carries that frame until
// Delivery.Release; once every queue and delivery holding the batch let
// go, its frame buffers are reused for later batches, so a steady fan-out
// allocates nothing per batch. History is read in pages: a batch of at
// least a quarter page goes out as its stored frame, smaller ones are
// gathered into pages of up to DefaultHistoryBatch records.
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
