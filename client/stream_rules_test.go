package client_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/conntest"
)

// The stream rules (issue 34): where a subscription or watch resumes,
// what it reports and when, each against a scripted broker. Every wait
// is bounded by ctxShort: a broken rule fails within seconds.

// ctxShort is a context that ends after 10 s (or with the test).
func ctxShort(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startingAt answers a subscribe with start_offset (and live_offset) off.
func startingAt(off uint64) *felix.Subscribed {
	return &felix.Subscribed{SubscriptionID: subIDs.Add(1), StartOffset: felix.Some(off), LiveOffset: felix.Some(off)}
}

// holdOpen answers a subscribe with ans, sends batches and holds the
// event stream open until the client stops reading it.
func holdOpen(x *conntest.Exchange, ans *felix.Subscribed, batches ...*felix.EventBatch) error {
	es, err := x.Subscribe(ans)
	if err != nil {
		return err
	}
	for _, b := range batches {
		if err := es.BatchOf(b); err != nil {
			return err
		}
	}
	es.Wait()
	return nil
}

// serveFrom serves a subscribe with three records from the offset it
// asked for (0 for earliest, 100 for latest) and holds it open.
func serveFrom(x *conntest.Exchange) error {
	off := askedOffset(x)
	return holdOpen(x, startingAt(off), offsets(off, 3))
}

// Rule 1: a latest subscription answered start_offset 7 that delivered
// nothing and lost its connection resubscribes at 7, not at the new
// tail: 7..9 written meanwhile are delivered, none reported dropped.
func TestStreamIdleSubscriptionResumesAtStartOffset(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	answered := make(chan struct{})
	cl.Nodes[0].On("subscribe", func(x *conntest.Exchange) error {
		es, err := x.Subscribe(startingAt(7))
		close(answered)
		if err != nil {
			return err
		}
		es.Wait()
		return nil
	})
	cl.Nodes[0].Always("subscribe", serveFrom)
	c, n := scriptedClient(t, cl, nil, nil)
	sub, err := c.Subscribe(ctxShort(t), sTopic, client.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	<-answered
	require.Equal(t, uint64(7), sub.Info().StartOffset.V)
	cl.Nodes[0].CloseConns() // idle: nothing delivered yet
	for _, want := range []uint64{7, 8, 9} {
		ev, err := sub.Next(ctxShort(t))
		require.NoError(t, err)
		require.Equal(t, want, ev.Offset, "resumed at the start_offset, nothing skipped")
	}
	starts := subscribesOn(cl, 0)
	require.Len(t, starts, 2)
	require.Equal(t, felix.StartAt(7), starts[1], "resubscribed at start_offset 7, never at the new tail")
	require.Zero(t, n.count(client.NoticeDropped))
	require.Zero(t, sub.Dropped())
}

// Rule 3: after shard_moved with resume_from above last delivered + 1,
// the offsets in between are reported as a drop like any other: a notice
// with the range, and the counter.
func TestStreamShardMovedGapIsDrop(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 2})
	n1 := cl.Nodes[1]
	cl.Nodes[0].On("subscribe", deliverThen(&felix.ShardMovedError{HasResumeFrom: true, ResumeFrom: 20, NodeID: n1.ID, Addr: n1.Addr, Generation: 2}, offsets(10, 3)))
	n1.Always("subscribe", serveFrom)
	c, n := scriptedClient(t, cl, nil, nil)
	sub, err := c.Subscribe(ctxShort(t), sTopic, client.SubscribeOptions{Start: felix.StartAt(10)})
	require.NoError(t, err)
	defer sub.Close()
	for _, want := range []uint64{10, 11, 12, 20} {
		ev, err := sub.Next(ctxShort(t))
		require.NoError(t, err)
		require.Equal(t, want, ev.Offset)
	}
	require.Equal(t, []felix.StartPosition{felix.StartAt(20)}, subscribesOn(cl, 1), "resumed at resume_from")
	d := noticed(t, n, client.NoticeDropped)
	require.Equal(t, uint64(13), d.Offset, "the first offset missing")
	require.Equal(t, uint64(7), d.Count, "13..19")
	require.Equal(t, uint64(7), sub.Dropped())
	require.Equal(t, 1, n.count(client.NoticeDropped))
}

// waits records the resumer's waits (client.SetResumeWait) with how
// many requests of typ the broker had received when each began.
type waits struct {
	mu   sync.Mutex
	list []time.Duration
	seen []int
}

func recordWaits(t *testing.T, cl *conntest.Cluster, typ string) *waits {
	w := &waits{}
	client.SetResumeWait(t, func(ctx context.Context, d time.Duration) bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.list = append(w.list, d)
		w.seen = append(w.seen, len(cl.ReceivedOf(typ)))
		return ctx.Err() == nil
	})
	return w
}

func (w *waits) get() ([]time.Duration, []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.list...), append([]int(nil), w.seen...)
}

// Rule 4: an event stream ending with an error that carries retry_after
// is resubscribed only after waiting that long (the wait is observed
// through an injected clock: it began before the resubscribe reached the
// broker, and asked for the full retry_after) and the wait is reported.
func TestStreamEndRetryAfterWaited(t *testing.T) {
	const retryAfter = time.Hour // the injected clock returns at once
	for _, tc := range []struct {
		name string
		end  error
	}{
		{"retry_after", &felix.BrokerError{Message: "busy", Code: felix.CodeOverloaded, Retry: felix.RetryAfter, RetryAfter: retryAfter}},
		{"draining", &felix.BrokerError{Message: "draining", Code: felix.CodeDraining, Retry: felix.RetryAfter, RetryAfter: retryAfter}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{})
			cl.Nodes[0].On("subscribe", deliverThen(tc.end, offsets(4, 2)))
			cl.Nodes[0].Always("subscribe", serveFrom)
			w := recordWaits(t, cl, "subscribe")
			c, n := scriptedClient(t, cl, nil, nil)
			sub := subscribeRead(t, c, client.SubscribeOptions{Start: felix.StartAt(4)}, 2)
			ev, err := sub.Next(ctxShort(t))
			require.NoError(t, err)
			require.Equal(t, uint64(6), ev.Offset, "resumed after the last delivered record")
			list, seen := w.get()
			require.Equal(t, []time.Duration{retryAfter}, list, "waited retry_after once")
			require.Equal(t, []int{1}, seen, "the wait began before the resubscribe")
			require.Len(t, subscribesOn(cl, 0), 2)
			r := noticed(t, n, client.NoticeRetry)
			require.Equal(t, "subscribe", r.Op)
			require.Equal(t, retryAfter, r.Delay, "the wait is reported")
		})
	}
}

// A resume the end does not ask to delay starts at once; a hot resume
// loop (every event stream ended before delivering anything) backs off
// from the second resume, is reported, and ends after Config.MaxAttempts
// resumes with an error naming the bound and wrapping the cause.
func TestStreamHotResumeLoopBounded(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	busy := &felix.BrokerError{Message: "moving", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry}
	cl.Nodes[0].Always("subscribe", deliverThen(busy))
	w := recordWaits(t, cl, "subscribe")
	c, n := scriptedClient(t, cl, nil, func(cfg *client.Config) { cfg.MaxAttempts = 3 })
	sub, err := c.Subscribe(ctxShort(t), sTopic, client.SubscribeOptions{Start: felix.StartAt(5)})
	require.NoError(t, err)
	defer sub.Close()
	_, err = sub.Next(ctxShort(t))
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be, "the cause is kept")
	require.ErrorContains(t, err, "3 resumes in a row")
	require.Len(t, subscribesOn(cl, 0), 4, "the first subscribe and three resumes")
	for _, s := range subscribesOn(cl, 0) {
		require.Equal(t, felix.StartAt(5), s, "every resume at the same position")
	}
	list, seen := w.get()
	require.Len(t, list, 2, "backoff before the second and third resume, not the first")
	require.Equal(t, []int{2, 3}, seen)
	for _, d := range list {
		require.Positive(t, d)
	}
	require.Equal(t, 2, n.count(client.NoticeRetry), "each wait reported")
	require.Equal(t, 3, n.count(client.NoticeResumed))
	_, err2 := sub.Next(ctxShort(t))
	require.Equal(t, err, err2, "the end is sticky")
	require.Len(t, subscribesOn(cl, 0), 4, "a later Next does not resubscribe")
}

// A resume neither repeats nor skips: a new owner that starts below the
// resume offset has its repeats dropped, and every offset is delivered
// once, in order, across two resumes.
func TestStreamResumesNeitherRepeatNorSkip(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 2})
	n1 := cl.Nodes[1]
	cl.Nodes[0].On("subscribe", deliverThen(&felix.ShardMovedError{HasResumeFrom: true, ResumeFrom: 2, NodeID: n1.ID, Addr: n1.Addr, Generation: 2}, offsets(0, 3)))
	// n1 starts over at 1 whatever was asked, then ends the event stream.
	n1.On("subscribe", deliverThen(&felix.BrokerError{Message: "moving", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry}, offsets(1, 4)))
	n1.Always("subscribe", serveFrom)
	cl.SetOwner("s", 0, 1) // node 0 redirects once its first subscribe is served
	c, n := scriptedClient(t, cl, nil, nil)
	sub, err := c.Subscribe(ctxShort(t), sTopic, client.SubscribeOptions{Start: felix.StartAt(0)})
	require.NoError(t, err)
	defer sub.Close()
	for want := range uint64(8) {
		ev, err := sub.Next(ctxShort(t))
		require.NoError(t, err)
		require.Equal(t, want, ev.Offset)
	}
	require.Equal(t, []felix.StartPosition{felix.StartAt(3), felix.StartAt(5)}, subscribesOn(cl, 1))
	require.Zero(t, n.count(client.NoticeDropped))
}

var sCache = client.CacheRef{TenantID: conntest.Tenant, Namespace: "app", Cache: "c"}

// watchEvents serves a cache watch with changes at the offsets given,
// then ends its event stream with end; a watch asking for retained values
// together with from_offset is refused as the broker refuses it.
func watchEvents(end error, offs ...uint64) conntest.Handler {
	return func(x *conntest.Exchange) error {
		m := x.Request.Message.(*felix.CacheWatch)
		if m.Retained && m.FromOffset.Set {
			return x.Fail(&felix.BrokerError{Message: "retained is refused together with from_offset", Code: felix.CodeInvalidRequest, Retry: felix.RetryFatal})
		}
		start := uint64(1)
		if m.FromOffset.Set {
			start = m.FromOffset.V
		}
		es, err := x.Watch(&felix.CacheWatchStarted{SubscriptionID: subIDs.Add(1), ResumeOffset: start})
		if err != nil {
			return err
		}
		if len(offs) == 0 {
			offs = []uint64{start}
		}
		for _, off := range offs {
			if err := es.Message(&felix.CacheEvent{Key: "k", Value: felix.Some([]byte("v")), Offset: off}); err != nil {
				return err
			}
		}
		if end == nil {
			es.Wait()
			return nil
		}
		return es.End(end)
	}
}

// watchesOn returns the cache_watch requests node i got.
func watchesOn(cl *conntest.Cluster, i int) []*felix.CacheWatch {
	var out []*felix.CacheWatch
	for _, r := range cl.ReceivedOf("cache_watch") {
		if r.Node == i {
			out = append(out, r.Message.(*felix.CacheWatch))
		}
	}
	return out
}

var retainedCluster = conntest.Options{Configure: func(_ int, c *conn.ServerConfig) {
	c.Offer.Features = conntest.Features | felix.FeatureCacheWatchRetained | felix.FeatureCacheShards
}}

// Rule 7: a watch that asked for retained values resumes from the offset
// after its last change without asking for them again (the broker refuses
// retained together with from_offset).
func TestStreamWatchResumeNeverRetained(t *testing.T) {
	cl := conntest.Start(t, retainedCluster)
	moving := &felix.BrokerError{Message: "moving", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry}
	cl.Nodes[0].On("cache_watch", watchEvents(moving, 4, 5))
	cl.Nodes[0].Always("cache_watch", watchEvents(nil))
	c, _ := scriptedClient(t, cl, nil, nil)
	w, err := c.CacheWatch(ctxShort(t), sCache, client.WatchOptions{Prefix: felix.Some("k"), Retained: true})
	require.NoError(t, err)
	defer w.Close()
	for _, want := range []uint64{4, 5, 6} {
		ev, err := w.Next(ctxShort(t))
		require.NoError(t, err)
		require.Equal(t, want, ev.Offset)
	}
	ws := watchesOn(cl, 0)
	require.Len(t, ws, 2)
	require.True(t, ws[0].Retained)
	require.False(t, ws[1].Retained, "the resume does not ask for retained values")
	require.Equal(t, felix.Some[uint64](6), ws[1].FromOffset)
}

// Rule 7, sharded: every shard of a sharded watch with Retained resumes
// from its own offset without retained; a shard given a From offset
// starts from it without retained.
func TestStreamShardedWatchResumeNeverRetained(t *testing.T) {
	cl := conntest.Start(t, retainedCluster)
	cl.Nodes[0].Always("cache_shards", func(x *conntest.Exchange) error {
		return x.Reply(&felix.CacheShardsView{Shards: 2, RequestID: x.Request.Message.(*felix.CacheShards).RequestID})
	})
	moving := &felix.BrokerError{Message: "moving", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry}
	var mu sync.Mutex
	first := map[uint32]bool{}
	cl.Nodes[0].Always("cache_watch", func(x *conntest.Exchange) error {
		m := x.Request.Message.(*felix.CacheWatch)
		mu.Lock()
		again := first[m.Shard.V]
		first[m.Shard.V] = true
		mu.Unlock()
		if !again && !m.FromOffset.Set {
			return watchEvents(moving, 4)(x)
		}
		return watchEvents(nil)(x)
	})
	c, _ := scriptedClient(t, cl, nil, nil)
	sw, err := c.CacheWatchSharded(ctxShort(t), sCache, client.ShardedWatchOptions{Prefix: "k", Retained: true, From: map[uint32]uint64{1: 9}})
	require.NoError(t, err)
	defer sw.Close()
	got := map[uint32][]uint64{}
	for range 3 {
		ev, err := sw.Next(ctxShort(t))
		require.NoError(t, err)
		got[ev.Shard] = append(got[ev.Shard], ev.Offset)
	}
	require.Equal(t, map[uint32][]uint64{0: {4, 5}, 1: {9}}, got)
	var shard0 []*felix.CacheWatch
	for _, m := range watchesOn(cl, 0) {
		if m.Shard.V == 1 {
			require.False(t, m.Retained, "shard 1 starts from its From offset without retained")
			require.Equal(t, felix.Some[uint64](9), m.FromOffset)
			continue
		}
		shard0 = append(shard0, m)
	}
	require.Len(t, shard0, 2)
	require.True(t, shard0[0].Retained)
	require.False(t, shard0[1].Retained, "the resume does not ask for retained values")
	require.Equal(t, felix.Some[uint64](5), shard0[1].FromOffset)
}

// The streaming messages' feature gates come from the request table
// (felix.Capabilities.Unadvertised): a subscribe with queue_capacity, a
// cache_watch, a retained watch and producer_init are refused with
// ErrNotAdvertised naming the feature, and never sent, when the broker
// did not advertise it.
func TestStreamFeatureGates(t *testing.T) {
	cases := []struct {
		name    string
		without felix.Features
		typ     string
		call    func(c *client.Client) error
	}{
		{"subscribe queue_capacity", felix.FeatureSubscribeQueue, "subscribe", func(c *client.Client) error {
			_, err := c.Subscribe(ctxShort(t), sTopic, client.SubscribeOptions{QueueCapacity: 8})
			return err
		}},
		{"cache_watch", felix.FeatureCacheWatch, "cache_watch", func(c *client.Client) error {
			_, err := c.CacheWatch(ctxShort(t), sCache, client.WatchOptions{Key: felix.Some("k")})
			return err
		}},
		{"cache_watch retained", felix.FeatureCacheWatchRetained, "cache_watch", func(c *client.Client) error {
			_, err := c.CacheWatch(ctxShort(t), sCache, client.WatchOptions{Key: felix.Some("k"), Retained: true})
			return err
		}},
		{"producer_init", felix.FeatureIdempotentProducer, "producer_init", func(c *client.Client) error {
			_, err := c.NewProducer(ctxShort(t))
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{Configure: func(_ int, c *conn.ServerConfig) {
				c.Offer.Features = (conntest.Features | felix.FeatureSubscribeQueue | felix.FeatureCacheWatchRetained) &^ tc.without
			}})
			c, _ := scriptedClient(t, cl, nil, nil)
			err := tc.call(c)
			require.ErrorIs(t, err, felix.ErrNotAdvertised)
			require.ErrorContains(t, err, tc.without.String())
			require.Empty(t, cl.ReceivedOf(tc.typ), "never sent")
		})
	}
}

// Subscribe reads one shard and says so loudly: shard 0 (the default) of
// a stream with several shards emits NoticeOneShard with the shard count,
// logged at Warn; an explicit other shard, a one-shard stream and a
// sharded subscription (which reads every shard) do not.
func TestStreamOneShardSaidLoudly(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	cl.SetShards("s", 4, felix.RoutingModulo)
	cl.Nodes[0].Always("subscribe", serveFrom)
	out := &syncWriter{}
	c, n := scriptedClient(t, cl, nil, func(cfg *client.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	sub, err := c.Subscribe(ctxShort(t), sTopic, client.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	w := noticed(t, n, client.NoticeOneShard)
	require.Equal(t, "s", w.Stream)
	require.Equal(t, uint64(4), w.Count)
	require.Contains(t, w.Detail, "SubscribeSharded")
	require.Contains(t, out.String(), "level=WARN")
	require.Contains(t, out.String(), "event=one_shard")

	for _, other := range []func() error{
		func() error {
			s, err := c.Subscribe(ctxShort(t), sTopic, client.SubscribeOptions{Shard: 2})
			if err == nil {
				s.Close()
			}
			return err
		},
		func() error {
			s, err := c.Subscribe(ctxShort(t), conntest.Topic("one"), client.SubscribeOptions{})
			if err == nil {
				s.Close()
			}
			return err
		},
		func() error {
			ss, err := c.SubscribeSharded(ctxShort(t), sTopic, client.ShardedOptions{})
			if err == nil {
				require.Equal(t, 4, ss.Shards())
				ss.Close()
			}
			return err
		},
	} {
		require.NoError(t, other())
	}
	require.Equal(t, 1, n.count(client.NoticeOneShard), "only the default shard of a sharded stream is announced")
}

// syncWriter is a log sink safe for concurrent use.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A drop before the first delivery is a drop too: the broker said the
// subscription starts at 7 (start_offset) and the first record is 9, so
// 7..8 are reported; skipped offsets are not drops.
func TestStreamDropBeforeFirstDelivery(t *testing.T) {
	for _, tc := range []struct {
		name    string
		skipped uint64
		dropped uint64
	}{{"dropped", 0, 2}, {"skipped", 2, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{})
			cl.Nodes[0].On("subscribe", func(x *conntest.Exchange) error {
				b := offsets(9, 1)
				b.SkippedBefore = tc.skipped
				return holdOpen(x, startingAt(7), b)
			})
			c, n := scriptedClient(t, cl, nil, nil)
			sub := subscribeRead(t, c, client.SubscribeOptions{}, 1)
			require.Equal(t, tc.dropped, sub.Dropped())
			if tc.dropped == 0 {
				require.Zero(t, n.count(client.NoticeDropped))
				return
			}
			d := noticed(t, n, client.NoticeDropped)
			require.Equal(t, uint64(7), d.Offset)
			require.Equal(t, tc.dropped, d.Count)
		})
	}
}

// The bound on resumes counts resumes in a row that deliver nothing: an
// event stream that delivers and then ends, again and again, is resumed
// every time (MaxAttempts 1 here).
func TestStreamDeliveriesResetTheResumeBound(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	busy := &felix.BrokerError{Message: "moving", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry}
	cl.Nodes[0].Always("subscribe", func(x *conntest.Exchange) error {
		return deliverThen(busy, offsets(askedOffset(x), 1))(x)
	})
	c, _ := scriptedClient(t, cl, nil, func(cfg *client.Config) { cfg.MaxAttempts = 1 })
	subscribeRead(t, c, client.SubscribeOptions{Start: felix.StartAt(0)}, 5)
	require.Equal(t, []felix.StartPosition{felix.StartAt(0), felix.StartAt(1), felix.StartAt(2), felix.StartAt(3), felix.StartAt(4)}, subscribesOn(cl, 0))
}

// shard_moved without resume_from before any delivery resumes where the
// broker said the subscription started (its start_offset), not at the
// new owner's tail.
func TestStreamMovedBeforeDeliveryResumesAtStartOffset(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 2})
	n1 := cl.Nodes[1]
	cl.Nodes[0].On("subscribe", func(x *conntest.Exchange) error {
		es, err := x.Subscribe(startingAt(7))
		if err != nil {
			return err
		}
		return es.End(&felix.ShardMovedError{NodeID: n1.ID, Addr: n1.Addr, Generation: 2})
	})
	n1.Always("subscribe", serveFrom)
	c, _ := scriptedClient(t, cl, nil, nil)
	sub := subscribeRead(t, c, client.SubscribeOptions{}, 1)
	off, ok := sub.Offset()
	require.True(t, ok)
	require.Equal(t, uint64(8), off)
	require.Equal(t, []felix.StartPosition{felix.StartAt(7)}, subscribesOn(cl, 1))
}

// A subscription that delivered records without offsets cannot resume
// exactly after a lost event stream: it ends with ErrCannotResume (the
// cause joined) instead of guessing, and never resubscribes.
func TestStreamNoOffsetsCannotResume(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	busy := &felix.BrokerError{Message: "moving", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry}
	cl.Nodes[0].On("subscribe", deliverThen(busy, &felix.EventBatch{Payloads: [][]byte{[]byte("m1")}}))
	cl.Nodes[0].Always("subscribe", serveFrom)
	c, _ := scriptedClient(t, cl, nil, nil)
	sub := subscribeRead(t, c, client.SubscribeOptions{}, 1)
	_, err := sub.Next(ctxShort(t))
	require.ErrorIs(t, err, client.ErrCannotResume)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be, "the cause is kept")
	require.Len(t, subscribesOn(cl, 0), 1)
	_, err2 := sub.Next(ctxShort(t))
	require.ErrorIs(t, err2, client.ErrCannotResume, "the end is sticky")
	require.Len(t, subscribesOn(cl, 0), 1, "a later Next does not resubscribe")
}

// An event stream a live broker ends cleanly ends the subscription: Next
// returns io.EOF and All just stops, without a resubscribe.
func TestStreamCleanEndStops(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	cl.Nodes[0].On("subscribe", deliverThen(nil, offsets(4, 2)))
	cl.Nodes[0].Always("subscribe", serveFrom)
	c, _ := scriptedClient(t, cl, nil, nil)
	sub := subscribeRead(t, c, client.SubscribeOptions{Start: felix.StartAt(4)}, 2)
	_, err := sub.Next(ctxShort(t))
	require.ErrorIs(t, err, io.EOF)
	n := 0
	for _, err := range sub.All(ctxShort(t)) {
		require.NoError(t, err)
		n++
		break
	}
	require.Zero(t, n, "All stops at the clean end")
	require.Len(t, subscribesOn(cl, 0), 1, "not resumed")
}

// All yields an error that ends the iterator once and stops: a
// subscription's terminal error, a sharded iterator's context end. A
// sharded iterator goes on only past a lost shard.
func TestStreamAllStopsAfterTheEnd(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	cl.SetShards("s", 2, felix.RoutingModulo)
	cl.Nodes[0].On("subscribe", deliverThen(&felix.StreamDeletedError{}))
	cl.Nodes[0].Always("subscribe", func(x *conntest.Exchange) error {
		return holdOpen(x, &felix.Subscribed{SubscriptionID: subIDs.Add(1)})
	})
	c, _ := scriptedClient(t, cl, nil, nil)
	sub, err := c.Subscribe(ctxShort(t), sTopic, client.SubscribeOptions{Shard: 1})
	require.NoError(t, err)
	defer sub.Close()
	var errs []error
	for _, err := range sub.All(ctxShort(t)) {
		errs = append(errs, err)
		if len(errs) > 3 {
			break
		}
	}
	require.Len(t, errs, 1, "the terminal error once, last")
	var sd *felix.StreamDeletedError
	require.ErrorAs(t, errs[0], &sd)

	ss, err := c.SubscribeSharded(ctxShort(t), sTopic, client.ShardedOptions{})
	require.NoError(t, err)
	defer ss.Close()
	ctx, cancel := context.WithCancel(ctxShort(t))
	cancel()
	errs = nil
	for _, err := range ss.All(ctx) {
		errs = append(errs, err)
		if len(errs) > 3 {
			break
		}
	}
	require.Len(t, errs, 1, "the context's end once, last")
	require.ErrorIs(t, errs[0], context.Canceled)
}

// A sharded subscription's Offsets include the shards that delivered
// nothing yet, at the start_offset their broker answered: resuming from
// them misses nothing (rule 1, per shard).
func TestStreamShardedOffsetsOfIdleShards(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	cl.SetShards("s", 2, felix.RoutingModulo)
	cl.Nodes[0].Always("subscribe", func(x *conntest.Exchange) error {
		return holdOpen(x, startingAt(7+uint64(x.Request.Message.(*felix.Subscribe).Shard.V)))
	})
	c, _ := scriptedClient(t, cl, nil, nil)
	ss, err := c.SubscribeSharded(ctxShort(t), sTopic, client.ShardedOptions{})
	require.NoError(t, err)
	defer ss.Close()
	require.Equal(t, map[uint32]uint64{0: 7, 1: 8}, ss.Offsets())
}

// An event stream ended by a broker going away (draining) fails over:
// the resume goes to another broker, not back to the one draining.
func TestStreamDrainingEndFailsOver(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 2})
	draining := &felix.BrokerError{Message: "draining", Code: felix.CodeDraining, Retry: felix.RetryRetry}
	for _, nd := range cl.Nodes {
		nd.On("subscribe", deliverThen(draining, offsets(4, 2)))
		nd.Always("subscribe", serveFrom)
	}
	c, _ := scriptedClient(t, cl, cl.Addrs(), nil)
	sub := subscribeRead(t, c, client.SubscribeOptions{Start: felix.StartAt(4)}, 2)
	ev, err := sub.Next(ctxShort(t))
	require.NoError(t, err)
	require.Equal(t, uint64(6), ev.Offset)
	// Each node drains its first subscription: every resume goes to the
	// other node.
	subs := cl.ReceivedOf("subscribe")
	require.Len(t, subs, 3)
	for i := 1; i < len(subs); i++ {
		require.NotEqual(t, subs[i-1].Node, subs[i].Node, "resumed on another broker than the draining one")
	}
}

// An idle watch (no change delivered yet) that loses its event stream
// resumes from where the broker said it went live (resume_offset), not
// from the start of the cache log, and without retained values.
func TestStreamIdleWatchResumesAtResumeOffset(t *testing.T) {
	cl := conntest.Start(t, retainedCluster)
	moving := &felix.BrokerError{Message: "moving", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry}
	cl.Nodes[0].On("cache_watch", func(x *conntest.Exchange) error {
		es, err := x.Watch(&felix.CacheWatchStarted{SubscriptionID: subIDs.Add(1), ResumeOffset: 5})
		if err != nil {
			return err
		}
		return es.End(moving)
	})
	cl.Nodes[0].Always("cache_watch", watchEvents(nil))
	c, _ := scriptedClient(t, cl, nil, nil)
	w, err := c.CacheWatch(ctxShort(t), sCache, client.WatchOptions{Prefix: felix.Some("k"), Retained: true})
	require.NoError(t, err)
	defer w.Close()
	ev, err := w.Next(ctxShort(t))
	require.NoError(t, err)
	require.Equal(t, uint64(5), ev.Offset)
	ws := watchesOn(cl, 0)
	require.Len(t, ws, 2)
	require.Equal(t, felix.Some[uint64](5), ws[1].FromOffset, "resumed where it went live")
	require.False(t, ws[1].Retained)
}
