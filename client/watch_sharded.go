package client

import (
	"context"
	"fmt"
	"iter"

	"github.com/flxproto/felix"
)

// ShardCacheEvent is a change seen by a sharded watch, with its shard.
type ShardCacheEvent struct {
	Shard uint32
	CacheEvent
}

// ShardedWatchOptions configures a sharded cache watch.
type ShardedWatchOptions struct {
	// Prefix is the key prefix watched on every shard ("" = every key).
	Prefix string
	// From resumes shards from their own cache-log offsets (shard → first
	// offset to deliver), e.g. a previous watch's Offsets. A shard without
	// an entry starts live (or with its retained values, see Retained).
	From map[uint32]uint64
	// Retained first replays the current values of the shards that have no
	// From entry (felix.FeatureCacheWatchRetained).
	Retained bool
	// Buffer bounds the changes buffered per shard ahead of the consumer
	// (0: DefaultShardEvents).
	Buffer int
}

// ShardedWatch watches a key prefix on every shard of a cache: one
// resumable Watch per shard, each following its own owner and resuming
// from its own cache-log offset (offsets are per shard), merged into one
// iterator (order holds within a shard, not across shards). A shard whose
// watch ends with an error (e.g. *felix.LaggedError) is reported once as a
// *ShardLostError while the other shards keep delivering; Next returns
// io.EOF when every shard has ended. Next and All are not safe for
// concurrent use; Close may be called from any goroutine.
//
// A key lives on one shard, so a single-key watch needs no sharding: use
// CacheWatch with WatchOptions.Key. What a watch sees is described in
// the package overview (# Caches and counters).
type ShardedWatch struct {
	set shardSet[CacheEvent, *Watch]
}

// CacheWatchSharded asks the cache's shard count (CacheShards, needs
// felix.FeatureCacheShards) and watches o.Prefix on every shard. A cache
// the broker reports with 0 shards is refused with ErrUnknownCache. A
// shard that cannot start is reported by Next as a lost shard while the
// others deliver; when no shard can start, the last shard's error is
// returned.
func (c *Client) CacheWatchSharded(ctx context.Context, ref CacheRef, o ShardedWatchOptions) (*ShardedWatch, error) {
	if err := c.checkCache("cache_watch", ref); err != nil {
		return nil, err
	}
	n, err := c.CacheShards(ctx, ref)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: %s/%s in tenant %q (check the names, or create the cache)", ErrUnknownCache, ref.Namespace, ref.Cache, ref.TenantID)
	}
	sw := &ShardedWatch{}
	err = sw.set.start(ctx, c, sw, "cache_watch", ref.Cache, n, o.Buffer, func(shard uint32) (*Watch, uint64, bool, error) {
		wo := WatchOptions{Prefix: felix.Some(o.Prefix), Shard: felix.Some(shard), Retained: o.Retained}
		off, ok := o.From[shard]
		if ok {
			wo.FromOffset, wo.Retained = felix.Some(off), false
		}
		w, err := c.CacheWatch(ctx, ref, wo)
		if err != nil {
			return nil, 0, false, err
		}
		if !ok {
			off = w.Info().ResumeOffset // where it went live
		}
		return w, off, true, nil
	})
	if err != nil {
		return nil, err
	}
	return sw, nil
}

// Shards returns the number of shards watched.
func (sw *ShardedWatch) Shards() int { return len(sw.set.shards) }

// Next returns the next change of any shard, a *ShardLostError when a
// shard's watch ended with an error (the others go on), io.EOF when
// every shard has ended.
func (sw *ShardedWatch) Next(ctx context.Context) (ShardCacheEvent, error) {
	shard, ev, err := sw.set.next(ctx, func(ev CacheEvent) (uint64, bool) { return ev.Offset, true })
	if err != nil {
		return ShardCacheEvent{}, err
	}
	return ShardCacheEvent{Shard: shard, CacheEvent: ev}, nil
}

// All iterates over the changes of every shard; a *ShardLostError is
// yielded and iteration goes on; it stops when every shard ended, ctx
// ends (its error is yielded) or the loop breaks.
func (sw *ShardedWatch) All(ctx context.Context) iter.Seq2[ShardCacheEvent, error] {
	return all(ctx, sw.Next, shardLost)
}

// Offsets returns, per shard, the cache-log offset after the last change
// Next returned (before any, where the shard's watch started): pass it as
// ShardedWatchOptions.From to resume every shard without a gap.
func (sw *ShardedWatch) Offsets() map[uint32]uint64 { return sw.set.resumeOffsets() }

// Close ends every shard's watch; it is idempotent.
func (sw *ShardedWatch) Close() error { return sw.set.end(sw) }
