package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// A legacy client (auth without client_flags) gets ok, publishes in JSON
// and receives only frames it can parse: shared batches without offsets
// and publish_ok without offset.
func TestLegacyClient(t *testing.T) {
	srv := startBroker(t, durableCfg())
	ctx := ctxT(t)
	legacy := dial(t, srv, func(c *conn.Config) { c.Legacy = true })
	require.True(t, legacy.Capabilities().Legacy)
	sub, err := legacy.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	require.False(t, sub.Info().StartOffset.Set, "no offsets in subscribed without flag 0x0020")
	res, err := legacy.Publish(ctx, topic, []byte("old"), conn.PublishOptions{Ack: felix.AckPerMessage})
	require.NoError(t, err)
	require.False(t, res.HasOffset)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "old", string(ev.Payload))
	require.False(t, ev.HasOffset)
	require.Nil(t, ev.Publisher)

	// the raw view: the event frame is exactly 0x0004
	r := dialRaw(t, srv)
	s := r.stream(t, felix.OriginalV1Flags, 0)
	s.send(&felix.Subscribe{TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream})
	us, err := r.qc.AcceptUniStream(ctxT(t))
	require.NoError(t, err)
	er := felix.NewReader(us)
	f, err := er.ReadFrame()
	require.NoError(t, err)
	hello, err := felix.DecodeMessage(f.Payload)
	require.NoError(t, err)
	require.IsType(t, &felix.EventStreamHello{}, hello)
	require.IsType(t, &felix.Subscribed{}, s.recv())
	_, err = legacy.Publish(ctx, topic, []byte("x"), conn.PublishOptions{Ack: felix.AckPerMessage})
	require.NoError(t, err)
	f, err = er.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, felix.FlagBinaryEventBatchShared, f.Flags)
}

// Publish-only uni streams: auth, then publishes, never answered.
func TestUniPublishStream(t *testing.T) {
	srv := startBroker(t, durableCfg())
	ctx := ctxT(t)
	c := dial(t, srv, nil)
	sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	r := dialRaw(t, srv)
	us, err := r.qc.OpenUniStreamSync(ctx)
	require.NoError(t, err)
	frame := func(m felix.Message) []byte {
		b, err := felix.AppendMessageFrame(nil, m)
		require.NoError(t, err)
		return b
	}
	_, err = us.Write(frame(&felix.Auth{TenantID: topic.TenantID, Token: "demo-token"}))
	require.NoError(t, err)
	bin, err := felix.AppendPublishBatch(nil, &felix.PublishBatch{TenantID: topic.TenantID, Namespace: topic.Namespace,
		Stream: topic.Stream, Payloads: [][]byte{[]byte("uni-1")}})
	require.NoError(t, err)
	_, err = us.Write(bin)
	require.NoError(t, err)
	_, err = us.Write(frame(&felix.PublishBatchMessage{TenantID: topic.TenantID, Namespace: topic.Namespace,
		Stream: topic.Stream, Payloads: [][]byte{[]byte("uni-2")}, Ack: felix.Some(felix.AckNone)}))
	require.NoError(t, err)
	require.NoError(t, us.Close())
	for _, want := range []string{"uni-1", "uni-2"} {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want, string(ev.Payload))
	}
}

// Keyed publishes land on the shard of their key; subscribing per shard
// sees per-shard offsets; stream_shards reports the width.
func TestShardedStream(t *testing.T) {
	cfg := durableCfg()
	cfg.Engine.DefaultStream.Shards = 4
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	c := dial(t, srv, nil)
	r := dialRaw(t, srv)
	s := r.stream(t, rawFlags, 0)
	s.send(&felix.StreamShards{TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream, RequestID: 1})
	v := s.recv().(*felix.StreamShardsView)
	require.Equal(t, uint32(4), v.Shards)
	subs := make([]*conn.Subscription, 4)
	for i := range subs {
		sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{Shard: felix.Some(uint32(i))})
		require.NoError(t, err)
		defer sub.Close()
		subs[i] = sub
	}
	counts := map[uint32]uint64{}
	for i := range 20 {
		key := []byte("customer-" + string(rune('a'+i)))
		res, err := c.Publish(ctx, topic, key, conn.PublishOptions{Ack: felix.AckPerBatch, Key: key})
		require.NoError(t, err)
		shard := shardForKey(key, 4)
		require.Equal(t, counts[shard], res.Offset, "offsets are per shard")
		counts[shard]++
		ev, err := subs[shard].Next(ctx)
		require.NoError(t, err)
		require.Equal(t, string(key), string(ev.Payload))
	}
	require.Greater(t, len(counts), 1)
}

// stream_read, cache_shards and counter_get, served because advertised.
func TestStreamReadAndSmallRequests(t *testing.T) {
	srv := startBroker(t, durableCfg())
	ctx := ctxT(t)
	c := dial(t, srv, nil)
	for _, p := range []string{"r0", "r1", "r2", "r3"} {
		_, err := c.Publish(ctx, topic, []byte(p), conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	r := dialRaw(t, srv)
	s := r.stream(t, rawFlags, felix.FeatureStreamRead|felix.FeatureCounters|felix.FeatureCacheShards)
	s.send(&felix.StreamRead{TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream, From: 1, End: felix.Some[uint64](3), RequestID: 1})
	recs := s.recv().(*felix.StreamRecords)
	require.Equal(t, uint64(1), recs.RequestID)
	require.Equal(t, uint64(3), recs.NextOffset)
	require.Len(t, recs.Records, 2)
	require.Equal(t, "r1", string(recs.Records[0].Payload))
	require.Equal(t, "t1", recs.Records[0].Publisher.V)
	require.NotZero(t, recs.Records[0].TimestampMicros)
	s.send(&felix.StreamRead{TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream, From: 4, RequestID: 2})
	recs = s.recv().(*felix.StreamRecords)
	require.Empty(t, recs.Records)
	require.Equal(t, uint64(4), recs.NextOffset, "nothing committed there yet")
	s.send(&felix.StreamRead{TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream, From: 9, RequestID: 3})
	ce := s.recv().(*felix.SubscribeCursorError)
	require.Equal(t, felix.CursorInFuture, ce.Reason)

	s.send(&felix.CacheShards{TenantID: topic.TenantID, Namespace: "ns", Cache: "c", RequestID: 4})
	require.Equal(t, uint32(1), s.recv().(*felix.CacheShardsView).Shards)
	s.send(&felix.CounterGet{TenantID: topic.TenantID, Namespace: "ns", Cache: "c", Key: "n", RequestID: 5})
	require.False(t, s.recv().(*felix.CounterValue).Value.Set, "never written: absent, not 0")
	s.send(&felix.CounterAdd{TenantID: topic.TenantID, Namespace: "ns", Cache: "c", Key: "n", Delta: -4, RequestID: 6})
	require.Equal(t, int64(-4), s.recv().(*felix.CounterValue).Value.V)

	// a request for another tenant is forbidden and ends the stream
	s.send(&felix.CacheGet{TenantID: "other", Namespace: "ns", Cache: "c", Key: "k", RequestID: felix.Some[uint64](7)})
	em := s.recv().(*felix.ErrorMessage)
	require.Equal(t, "tenant mismatch", em.Message)
	s.ended()
}

// Idempotent publishes over the wire: binary 0x0109 and JSON
// publish_idempotent are both answered in JSON, with typed refusals;
// sequence_reused only for clients that offered it.
func TestIdempotentRefusals(t *testing.T) {
	srv := startBroker(t, durableCfg())
	r := dialRaw(t, srv)
	s := r.stream(t, rawFlags|felix.FlagBinaryPublishIdempotent, felix.FeatureIdempotentProducer|felix.FeatureSequenceReused)
	s.send(&felix.ProducerInit{RequestID: 1})
	pid := s.recv().(*felix.ProducerInitOK).ProducerID
	bin := func(seq uint64, payload string) []byte {
		b, err := felix.AppendPublishBatch(nil, &felix.PublishBatch{AckMode: felix.AckPerBatch, RequestID: seq + 10,
			Idempotent: true, ProducerID: pid, Sequence: seq, TenantID: topic.TenantID, Namespace: topic.Namespace,
			Stream: topic.Stream, Payloads: [][]byte{[]byte(payload)}})
		require.NoError(t, err)
		return b
	}
	s.write(bin(1, "x"))
	rf := s.recv().(*felix.PublishRefused)
	require.Equal(t, felix.RefusalUnknownProducer, rf.Reason.Kind)
	s.write(bin(0, "a"))
	ok := s.recv().(*felix.PublishOK)
	require.Equal(t, uint64(10), ok.RequestID)
	require.Equal(t, uint64(0), ok.Offset.V)
	s.send(&felix.PublishIdempotent{TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream,
		Payloads: [][]byte{[]byte("c")}, RequestID: 30, ProducerID: pid, Sequence: 2})
	rf = s.recv().(*felix.PublishRefused)
	require.Equal(t, felix.RefusalSequenceGap, rf.Reason.Kind)
	require.Equal(t, uint64(1), rf.Reason.Expected)
	s.write(bin(0, "a")) // duplicate: ok with the original offset
	ok = s.recv().(*felix.PublishOK)
	require.Equal(t, uint64(0), ok.Offset.V)
	s.write(bin(0, "changed"))
	rf = s.recv().(*felix.PublishRefused)
	require.Equal(t, felix.RefusalSequenceReused, rf.Reason.Kind)

	old := r.stream(t, rawFlags|felix.FlagBinaryPublishIdempotent, felix.FeatureIdempotentProducer)
	old.write(bin(0, "changed again"))
	ok = old.recv().(*felix.PublishOK)
	require.False(t, ok.Offset.Set, "reuse is answered ok (not written) without SEQUENCE_REUSED")
	_, tail, err := srv.Engine().Tail(engineTopic(), 0)
	require.NoError(t, err)
	require.Equal(t, uint64(1), tail, "only the first batch was written")
}

func TestALPNOptional(t *testing.T) {
	srv := startBroker(t, server.Config{})
	with := dial(t, srv, func(c *conn.Config) { c.OfferALPN = true })
	require.Equal(t, "felix/1", with.NegotiatedALPN())
	without := dial(t, srv, nil)
	require.Equal(t, "", without.NegotiatedALPN())
}

// Subscriptions and watches per connection are bounded; a slot is freed
// when its subscription ends.
func TestSubscriptionLimitPerConnection(t *testing.T) {
	cfg := durableCfg()
	cfg.MaxSubscriptionsPerConn = 2
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	c := dial(t, srv, nil)
	a, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	w, err := c.CacheWatch(ctx, felix.CacheRef{TenantID: topic.TenantID, Namespace: "ns", Cache: "c"}, conn.WatchOptions{Key: felix.Some("k")})
	require.NoError(t, err)
	defer w.Close()
	_, err = c.Subscribe(ctx, topic, conn.SubscribeOptions{})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeLimitExceeded, be.Code)
	other := dial(t, srv, nil) // the limit is per connection
	b, err := other.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, a.Close())
	waitFor(t, func() bool {
		s, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{})
		if err != nil {
			return false
		}
		defer s.Close()
		return true
	}, "the closed subscription's slot is reused")
}
