package engine

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

// Tenant A fills the engine-wide log bound and stops; tenant B then
// appends well within its share. Every one of B's acknowledged records
// stays (the trims fall on A, who holds the most), and the total keeps to
// the bound. Before, the shard that appended trimmed its own oldest
// records, so B lost records A's bytes had pushed out.
func TestLogBoundTrimsTheTenantOverItsShare(t *testing.T) {
	const limit = 1 << 20
	e := New(Config{DefaultStream: durable, MaxLogBytes: limit})
	defer e.Close()
	big := bytes.Repeat([]byte("a"), 1000)
	aTopic := func(i int) Topic { return Topic{Tenant: "A", Namespace: "ns", Stream: "s" + strconv.Itoa(i%4)} }
	for i := range 2000 { // 2 MB into a 1 MiB bound: A trims itself
		_, err := e.Publish(PublishRequest{Topic: aTopic(i), Payloads: [][]byte{big}})
		require.NoError(t, err)
	}
	require.LessOrEqual(t, e.LogBytes(), int64(limit))
	require.Greater(t, e.LogBytes(), int64(limit-4*1100), "A filled the bound")

	bTopic := Topic{Tenant: "B", Namespace: "ns", Stream: "s"}
	small := bytes.Repeat([]byte("b"), 100)
	const bRecords = 2000 // 2000 × (100 + 48) ≈ 290 KiB, within B's half
	for range bRecords {
		_, err := e.Publish(PublishRequest{Topic: bTopic, Payloads: [][]byte{small}})
		require.NoError(t, err)
		require.LessOrEqual(t, e.LogBytes(), int64(limit))
	}
	// A appends again: it is over its share, so it trims itself.
	for i := range 500 {
		_, err := e.Publish(PublishRequest{Topic: aTopic(i), Payloads: [][]byte{big}})
		require.NoError(t, err)
		require.LessOrEqual(t, e.LogBytes(), int64(limit))
	}
	oldest, tail, err := e.Tail(bTopic, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(0), oldest, "B lost none of its acknowledged records")
	require.Equal(t, uint64(bRecords), tail)
	recs, _, err := e.Read(bTopic, 0, 0, bRecords+1)
	require.NoError(t, err)
	require.Len(t, recs, bRecords)

	e.mu.Lock()
	a, b := e.tenants["A"].logBytes.Load(), e.tenants["B"].logBytes.Load()
	e.mu.Unlock()
	require.Equal(t, int64(bRecords*(100+logRecordOverhead)), b)
	require.Equal(t, e.LogBytes(), a+b, "the tenants' figures add up to the engine's")
	require.LessOrEqual(t, a, int64(limit)-b)
}

// Two tenants both over their share: the larger one is trimmed first, so
// they converge on halves of the bound, whoever appends.
func TestLogBoundConvergesOnShares(t *testing.T) {
	const limit = 256 << 10
	e := New(Config{DefaultStream: durable, MaxLogBytes: limit})
	defer e.Close()
	rec := bytes.Repeat([]byte("x"), 952) // 1000 bytes with its bookkeeping
	a, b := Topic{Tenant: "A", Stream: "s"}, Topic{Tenant: "B", Stream: "s"}
	for range 1000 {
		_, err := e.Publish(PublishRequest{Topic: a, Payloads: [][]byte{rec}})
		require.NoError(t, err)
	}
	for range 1000 {
		_, err := e.Publish(PublishRequest{Topic: b, Payloads: [][]byte{rec}})
		require.NoError(t, err)
	}
	e.mu.Lock()
	ua, ub := e.tenants["A"].logBytes.Load(), e.tenants["B"].logBytes.Load()
	e.mu.Unlock()
	require.LessOrEqual(t, ua+ub, int64(limit))
	require.InDelta(t, ua, ub, 1000, "each holds half the bound")
}

// Stalled subscribers of four tenants hold the engine-wide queue bound;
// a fifth tenant's subscriber that reads, but not after every batch, is
// never lagged: it is within its share. A stalled tenant over its share is.
func TestQueueBoundSparesTheTenantWithinItsShare(t *testing.T) {
	const limit = 64 << 10
	e := New(Config{DefaultStream: durable, MaxQueuedBytes: limit, SubscriberQueueBytes: 1 << 20, MaxQueueCapacity: 4096})
	defer e.Close()
	payload := bytes.Repeat([]byte("p"), 100)
	reader := Topic{Tenant: "reader", Stream: "s"}
	s, _, err := e.Subscribe(SubscribeRequest{Topic: reader, QueueCapacity: 64, LagReport: true, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	defer s.Close()
	var stalled []*Subscription
	var topics []Topic
	for i := range 4 {
		tpc := Topic{Tenant: "stalled" + strconv.Itoa(i), Stream: "s"}
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tpc, QueueCapacity: 4096, LagReport: true})
		require.NoError(t, err)
		defer s.Close()
		stalled, topics = append(stalled, s), append(topics, tpc)
	}
	for range 1000 {
		for _, tpc := range topics {
			_, err := e.Publish(PublishRequest{Topic: tpc, Payloads: [][]byte{payload}})
			require.NoError(t, err)
		}
	}
	require.GreaterOrEqual(t, e.QueuedBytes(), int64(limit-1000), "the stalled tenants hold the bound")
	for _, s := range stalled {
		require.True(t, s.Dropped(), "a stalled tenant over its share is lagged")
	}

	const bursts, burst = 100, 8 // 8 queued batches ≈ 4 KiB, its share is 12.8 KiB
	got := uint64(0)
	for range bursts {
		for range burst {
			_, err := e.Publish(PublishRequest{Topic: reader, Payloads: [][]byte{payload}})
			require.NoError(t, err)
		}
		for range burst {
			d := next(t, s)
			require.False(t, d.Lagged, "the reader within its share was lagged")
			require.Equal(t, got, decodeEvent(t, d.Frame).base)
			got++
		}
	}
	require.Equal(t, uint64(bursts*burst), got)
	require.Zero(t, s.Dropped())
	require.LessOrEqual(t, e.QueuedBytes(), int64(2*limit))
}
