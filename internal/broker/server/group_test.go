package server_test

import (
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

const allFeatures = felix.Features(0xffff_ffff) &^ felix.FeatureExtended

// publishRaw publishes payloads with an acked JSON publish_batch.
func publishRaw(t *testing.T, s *rawStream, stream string, payloads ...string) {
	t.Helper()
	ps := make([][]byte, len(payloads))
	for i, p := range payloads {
		ps[i] = []byte(p)
	}
	rid := nextID()
	s.send(&felix.PublishBatchMessage{TenantID: server.DemoTenant, Namespace: "ns", Stream: stream, Payloads: ps,
		RequestID: felix.Some(rid), Ack: felix.Some(felix.AckPerBatch)})
	require.IsType(t, &felix.PublishOK{}, s.recv())
}

func TestBrokerAdvertisesGroupsAndCommits(t *testing.T) {
	srv := startBroker(t, durableCfg())
	f := srv.Offer().Features
	require.True(t, f.Has(server.GroupFeatures|server.CommitFeatures))
	require.False(t, f.Has(felix.FeatureGroupConsumer), "named consumers are not served")
	require.False(t, f.Has(felix.FeatureGroupSkipped), "skipped_before is never produced")
	require.True(t, f.Has(felix.FeatureInspect), "shard_inspect and subscriptions_list are served")
}

func TestGroupsOverQUIC(t *testing.T) {
	cfg := durableCfg()
	cfg.Engine.Groups.MaxAttempts = 2
	srv := startBroker(t, cfg)
	c := dialRaw(t, srv)
	s := c.stream(t, felix.DefaultClientFlags(), allFeatures)
	target := func() (string, string, string, uint32, string) { return server.DemoTenant, "ns", "jobs", 0, "g" }
	tn, ns, st, sh, g := target()

	// Empty poll: an empty answer.
	s.send(&felix.GroupPoll{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, MaxRecords: 5, RequestID: 1})
	empty := s.recv().(*felix.GroupRecords)
	require.Empty(t, empty.Records)
	require.Equal(t, uint64(1), empty.RequestID)

	publishRaw(t, s, "jobs", "a", "b")
	s.send(&felix.GroupPoll{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, MaxRecords: 5, RequestID: 2})
	recs := s.recv().(*felix.GroupRecords)
	require.Len(t, recs.Records, 2)
	require.Equal(t, uint64(0), recs.Records[0].Offset)
	require.Equal(t, "a", string(recs.Records[0].Payload))
	require.Equal(t, uint32(1), recs.Records[0].Attempts)
	require.Equal(t, felix.Some(server.DemoTenant), recs.Records[0].Publisher, "publisher offered")
	require.True(t, recs.Records[0].TimestampMicros.Set, "timestamps offered")

	s.send(&felix.GroupAck{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, Offset: 0, RequestID: 3})
	require.Equal(t, &felix.CacheOK{RequestID: 3}, s.recv())
	s.send(&felix.GroupAck{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, Offset: 0, RequestID: 4})
	e := s.recv().(*felix.ErrorMessage)
	require.Equal(t, felix.Some(felix.CodeStaleClaim), e.Code)

	s.send(&felix.GroupNack{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, Offset: 1, RequestID: 5})
	require.Equal(t, &felix.CacheOK{RequestID: 5}, s.recv())
	s.send(&felix.GroupPoll{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, MaxRecords: 5, RequestID: 6})
	recs = s.recv().(*felix.GroupRecords)
	require.Len(t, recs.Records, 1)
	require.Equal(t, uint32(2), recs.Records[0].Attempts, "nack redelivers at once with a higher count")

	s.send(&felix.GroupExtend{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, Offset: 1, Attempts: 2, ExtendMs: 1500, RequestID: 7})
	require.Equal(t, &felix.GroupExtended{VisibleMs: 1500, RequestID: 7}, s.recv())
	s.send(&felix.GroupExtend{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, Offset: 1, Attempts: 2, ExtendMs: 0, RequestID: 8})
	require.Equal(t, felix.Some(felix.CodeInvalidRequest), s.recv().(*felix.ErrorMessage).Code)

	// Past the attempt bound (2): dead letter, listed, redriven, discarded.
	s.send(&felix.GroupNack{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, Offset: 1, Attempts: 2, RequestID: 9})
	require.Equal(t, &felix.CacheOK{RequestID: 9}, s.recv())
	s.send(&felix.GroupDeadLetters{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, RequestID: 10})
	require.Equal(t, &felix.GroupDeadLetterList{Offsets: []uint64{1}, RequestID: 10}, s.recv())
	s.send(&felix.GroupRedrive{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, Offset: 1, RequestID: 11})
	require.Equal(t, &felix.CacheOK{RequestID: 11}, s.recv())
	s.send(&felix.GroupPoll{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, MaxRecords: 5, RequestID: 12})
	recs = s.recv().(*felix.GroupRecords)
	require.Len(t, recs.Records, 1)
	require.Equal(t, uint32(1), recs.Records[0].Attempts, "redrive resets the attempts")
	s.send(&felix.GroupDeadLetter{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, Offset: 1, RequestID: 13})
	require.Equal(t, &felix.CacheOK{RequestID: 13}, s.recv())
	s.send(&felix.GroupDiscard{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, Offset: 1, RequestID: 14})
	require.Equal(t, &felix.CacheOK{RequestID: 14}, s.recv())

	s.send(&felix.GroupDescribe{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, RequestID: 15})
	require.Equal(t, &felix.GroupInfo{Committed: felix.Some(uint64(2)), Tail: 2, RequestID: 15}, s.recv())
	s.send(&felix.GroupSeek{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, Start: felix.StartPosition{Kind: felix.StartEarliest}, RequestID: 16})
	require.Equal(t, &felix.GroupPosition{Offset: 0, Moved: true, RequestID: 16}, s.recv())
	s.send(&felix.GroupDelete{TenantID: tn, Namespace: ns, Stream: st, Shard: sh, Group: g, RequestID: 17})
	require.Equal(t, &felix.GroupDeleted{Existed: true, RequestID: 17}, s.recv())

	// Another tenant's group: forbidden, stream ended.
	s.send(&felix.GroupDescribe{TenantID: "other", Namespace: ns, Stream: st, Shard: sh, Group: g, RequestID: 18})
	require.Equal(t, felix.Some(felix.CodeForbidden), s.recv().(*felix.ErrorMessage).Code)
	s.ended()
}

func TestGroupRecordsShapedToTheOffer(t *testing.T) {
	srv := startBroker(t, durableCfg())
	c := dialRaw(t, srv)
	s := c.stream(t, felix.DefaultClientFlags(), felix.FeatureErrorCodes)
	publishRaw(t, s, "jobs", "a")
	s.send(&felix.GroupPoll{TenantID: server.DemoTenant, Namespace: "ns", Stream: "jobs", Group: "g", MaxRecords: 1, RequestID: 1})
	require.Equal(t, &felix.GroupRecords{Records: []felix.GroupRecord{{Offset: 0, Payload: []byte("a"), Attempts: 1}}, RequestID: 1}, s.recv())
}

func TestGroupLongPollAnswersWhenARecordArrives(t *testing.T) {
	srv := startBroker(t, durableCfg())
	c := dialRaw(t, srv)
	s := c.stream(t, felix.DefaultClientFlags(), allFeatures)
	p := c.stream(t, felix.DefaultClientFlags(), allFeatures)
	s.send(&felix.GroupPoll{TenantID: server.DemoTenant, Namespace: "ns", Stream: "jobs", Group: "g", MaxRecords: 1,
		WaitMs: uint64(time.Hour / time.Millisecond), RequestID: 1})
	publishRaw(t, p, "jobs", "late")
	recs := s.recv().(*felix.GroupRecords)
	require.Len(t, recs.Records, 1)
	require.Equal(t, "late", string(recs.Records[0].Payload))
}

func TestGroupOnEphemeralStreamRefused(t *testing.T) {
	srv := startBroker(t, server.Config{})
	c := dialRaw(t, srv)
	s := c.stream(t, felix.DefaultClientFlags(), allFeatures)
	s.send(&felix.GroupPoll{TenantID: server.DemoTenant, Namespace: "ns", Stream: "eph", Group: "g", MaxRecords: 1, RequestID: 1})
	require.Equal(t, felix.Some(felix.CodeInvalidRequest), s.recv().(*felix.ErrorMessage).Code)
}
