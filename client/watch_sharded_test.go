package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// shardedCache is a broker of one cache with three shards, each with its
// own cache log (offsets 1..4 per shard). The first watch of shard 1 gets
// two changes and then shard_moved (resume_from 3): a resume must ask
// shard 1 from offset 3, not any other shard's offset.
type shardedCache struct {
	ln *conn.Listener

	mu      sync.Mutex
	watches []felix.CacheWatch
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

const cacheShardsN = 3

func startShardedCache(t *testing.T) *shardedCache {
	tc, err := certs()
	require.NoError(t, err)
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: tc, Offer: felix.BrokerOffer{Flags: server.Flags,
		Features: felix.FeatureCacheShards | felix.FeatureCacheWatch | felix.FeatureErrorCodes | felix.FeatureShardMoved}})
	require.NoError(t, err)
	f := &shardedCache{ln: ln}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			sc, err := ln.Accept(f.ctx)
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer sc.CloseWithError(conn.CloseShuttingDown, "closing")
				for {
					st, err := sc.AcceptStream(f.ctx)
					if err != nil {
						return
					}
					f.wg.Add(1)
					go func() { defer f.wg.Done(); f.stream(st) }()
				}
			}()
		}
	}()
	t.Cleanup(func() { f.cancel(); ln.Close(); f.wg.Wait() })
	return f
}

func (f *shardedCache) stream(st *conn.Stream) {
	defer st.Close()
	for {
		req, err := st.ReadRequest(f.ctx)
		if err != nil {
			return
		}
		switch m := req.Message.(type) {
		case *felix.CacheShards:
			n := uint32(cacheShardsN)
			if m.Cache == "nope" {
				n = 0 // unknown
			}
			st.WriteMessage(f.ctx, &felix.CacheShardsView{Shards: n, RequestID: m.RequestID})
		case *felix.CacheWatch:
			f.mu.Lock()
			f.watches = append(f.watches, *m)
			first := len(f.watches) <= cacheShardsN
			f.mu.Unlock()
			f.watch(st, m, first)
		}
	}
}

// watch serves one shard's watch from its FromOffset (1 when absent).
func (f *shardedCache) watch(st *conn.Stream, m *felix.CacheWatch, first bool) {
	shard := m.Shard.V
	id := uint64(100 + shard)
	es, err := st.OpenEventStream(f.ctx, id)
	if err != nil {
		return
	}
	from := m.FromOffset.Or(1)
	if st.WriteMessage(f.ctx, &felix.CacheWatchStarted{SubscriptionID: id, ResumeOffset: from}) != nil {
		return
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for off := from; off <= 4; off++ {
			if shard == 1 && first && off == 3 {
				es.WriteMessage(f.ctx, &felix.ShardMoved{SubscriptionID: id, ResumeFrom: felix.Some[uint64](3),
					NodeID: felix.Some("self"), Addr: felix.Some(f.ln.Addr().String()), Generation: 2})
				es.Close()
				return
			}
			key := fmt.Sprintf("%sk%d-%d", m.Prefix.V, shard, off)
			if es.WriteMessage(f.ctx, &felix.CacheEvent{Key: key, Value: felix.Some([]byte("v")), Offset: off}) != nil {
				return
			}
		}
		<-f.ctx.Done()
		es.Close()
	}()
}

// A sharded watch covers every shard of a prefix, each shard resuming
// from its own cache-log offset after a move, nothing repeated or
// skipped; Offsets resumes every shard.
func TestCacheWatchShardedCoversEveryShard(t *testing.T) {
	f := startShardedCache(t)
	c, n := newClient(t, []string{f.ln.Addr().String()}, nil)
	ctx := ctxShort(t)
	ref := client.CacheRef{TenantID: server.DemoTenant, Namespace: "ns", Cache: "sessions"}
	w, err := c.CacheWatchSharded(ctx, ref, client.ShardedWatchOptions{Prefix: "user/", From: map[uint32]uint64{0: 1, 1: 1, 2: 1}})
	require.NoError(t, err)
	defer w.Close()
	require.Equal(t, cacheShardsN, w.Shards())
	got := map[uint32][]uint64{}
	for range cacheShardsN * 4 {
		ev, err := w.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("user/k%d-%d", ev.Shard, ev.Offset), ev.Key)
		got[ev.Shard] = append(got[ev.Shard], ev.Offset)
	}
	for s := range uint32(cacheShardsN) {
		require.Equal(t, []uint64{1, 2, 3, 4}, got[s], "shard %d: every change once, in order", s)
	}
	require.Equal(t, map[uint32]uint64{0: 5, 1: 5, 2: 5}, w.Offsets())
	require.Equal(t, 1, n.count(client.NoticeResumed), "shard 1 resumed once")

	f.mu.Lock()
	watches := append([]felix.CacheWatch(nil), f.watches...)
	f.mu.Unlock()
	require.Len(t, watches, cacheShardsN+1)
	seen := map[uint32]bool{}
	for _, wm := range watches[:cacheShardsN] {
		require.Equal(t, "user/", wm.Prefix.V)
		seen[wm.Shard.V] = true
	}
	require.Len(t, seen, cacheShardsN, "one watch per shard")
	require.Equal(t, uint32(1), watches[cacheShardsN].Shard.V)
	require.Equal(t, felix.Some[uint64](3), watches[cacheShardsN].FromOffset, "shard 1 resumed from its own offset")
}

// An unknown cache (0 shards) is refused naming it.
func TestCacheWatchShardedUnknownCache(t *testing.T) {
	f := startShardedCache(t)
	c, _ := newClient(t, []string{f.ln.Addr().String()}, nil)
	_, err := c.CacheWatchSharded(ctxShort(t), client.CacheRef{TenantID: server.DemoTenant, Namespace: "ns", Cache: "nope"}, client.ShardedWatchOptions{})
	require.ErrorIs(t, err, client.ErrUnknownCache)
	require.ErrorContains(t, err, "ns/nope")
}
