package engine

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"time"

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
	const bRecords = 2000 // 2000 × (100 + 20 + 96) ≈ 420 KiB, within B's half
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
	require.Equal(t, int64(bRecords*(100+logRecordOverhead+logSegmentOverhead)), b, "one record and one segment per batch")
	require.Equal(t, e.LogBytes(), a+b, "the tenants' figures add up to the engine's")
	require.LessOrEqual(t, a, int64(limit)-b)
}

// Two tenants both over their share: the larger one is trimmed first, so
// they converge on halves of the bound, whoever appends.
func TestLogBoundConvergesOnShares(t *testing.T) {
	const limit = 256 << 10
	e := New(Config{DefaultStream: durable, MaxLogBytes: limit})
	defer e.Close()
	rec := bytes.Repeat([]byte("x"), 1000-int(logRecordOverhead+logSegmentOverhead)) // 1000 bytes with its bookkeeping
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
	// Each stalled tenant stops within one batch (its records and frame,
	// about 0.3 KiB here) of its share.
	require.GreaterOrEqual(t, e.QueuedBytes(), int64(limit-4*512), "the stalled tenants hold the bound")
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
	// Every charge comes back when the queues go.
	s.Close()
	for _, st := range stalled {
		st.Close()
	}
	require.Zero(t, e.QueuedBytes(), "queued bytes left charged after every subscription closed")
}

// countGroupState counts what the groups of tenant hold: groups, and
// claims plus dead letters, as the claims budget should.
func countGroupState(e *Engine, tenant string) (groups, claims int64) {
	e.mu.Lock()
	var shards []*shard
	for tp, s := range e.streams {
		if tp.Tenant == tenant {
			shards = append(shards, s.shards...)
		}
	}
	e.mu.Unlock()
	for _, sh := range shards {
		sh.mu.Lock()
		for _, g := range sh.groups {
			groups++
			claims += int64(len(g.claims) + len(g.dead))
		}
		sh.mu.Unlock()
	}
	return groups, claims
}

// Commit state is bounded per tenant and engine-wide in keys and bytes:
// the refusal names the limit, nothing is written, a tenant within its
// share of the engine-wide bound is still served when another filled it,
// and deleting keys returns their place (and, measured, their memory).
func TestCommitStateBoundedPerTenantAndEngineWide(t *testing.T) {
	e := New(Config{DefaultStream: durable, State: StateConfig{MaxTenantEntries: 400, MaxTotalEntries: 300, MaxTenantBytes: 64 << 10}})
	defer e.Close()
	commit := func(tenant, entity string, changes ...felix.StateChange) error {
		_, err := e.Commit(CommitRequest{Topic: Topic{Tenant: tenant, Stream: "s"}, EntityKey: []byte(entity), Event: []byte("e"), Changes: changes})
		return err
	}
	keys := func(from, n int) []felix.StateChange {
		var cs []felix.StateChange
		for i := from; i < from+n; i++ {
			cs = append(cs, put("k"+strconv.Itoa(i), "v"))
		}
		return cs
	}
	// A alone: its share is the whole engine-wide bound, 300 keys.
	require.NoError(t, commit("A", "x", keys(0, 300)...))
	err := commit("A", "x", keys(300, 1)...)
	requireCode(t, err, felix.CodeLimitExceeded, felix.RetryFatal)
	require.Contains(t, err.Error(), "commit state entries: all tenants' limit of 300")
	// B is within its share (150 of 300 with two tenants): served although
	// A filled the bound; A, over its share, still is not.
	require.NoError(t, commit("B", "y", keys(0, 150)...))
	requireCode(t, commit("B", "y", keys(150, 1)...), felix.CodeLimitExceeded, felix.RetryFatal)
	requireCode(t, commit("A", "x", keys(300, 1)...), felix.CodeLimitExceeded, felix.RetryFatal)
	a, total := e.stateEntries.held("A")
	require.Equal(t, int64(300), a)
	require.Equal(t, int64(450), total, "within twice the bound")
	v, err := e.StateGet(Topic{Tenant: "A", Stream: "s"}, []byte("x"), "k300")
	require.NoError(t, err)
	require.False(t, v.Found, "a refused commit writes nothing")

	// Deleting returns the places: A gets under its share again.
	var dels []felix.StateChange
	for i := range 200 {
		dels = append(dels, del("k"+strconv.Itoa(i)))
	}
	require.NoError(t, commit("A", "x", dels...))
	a, total = e.stateEntries.held("A")
	require.Equal(t, int64(100), a)
	require.Equal(t, int64(250), total)
	require.NoError(t, commit("A", "x", keys(1000, 50)...))

	// Bytes: the tenant's 64 KiB.
	big := felix.StateChange{Op: felix.StatePut, Key: "big", Value: bytes.Repeat([]byte("b"), 70<<10)}
	err = commit("C", "z", big)
	requireCode(t, err, felix.CodeLimitExceeded, felix.RetryFatal)
	require.Contains(t, err.Error(), "commit state bytes: the tenant's limit of 65536")
	c, _ := e.stateBytes.held("C")
	require.Zero(t, c)
	cEntries, _ := e.stateEntries.held("C")
	require.Zero(t, cEntries, "a refusal by bytes gives back the keys it took")
}

// The memory of deleted commit state is returned: a tenant writes 20,000
// keys of 1 KiB on a shard, deletes them, and the heap comes back.
func TestCommitStateMemoryReturned(t *testing.T) {
	e := New(Config{DefaultStream: durable})
	defer e.Close()
	tpc := Topic{Tenant: "A", Stream: "s"}
	value := string(bytes.Repeat([]byte("v"), 1024))
	base := heapInuse()
	for i := range 20 {
		var cs []felix.StateChange
		for j := range 1000 {
			cs = append(cs, put("k"+strconv.Itoa(i*1000+j), value))
		}
		_, err := e.Commit(CommitRequest{Topic: tpc, EntityKey: []byte("x"), Event: []byte("e"), Changes: cs})
		require.NoError(t, err)
	}
	full := heapInuse()
	for i := range 20 {
		var cs []felix.StateChange
		for j := range 1000 {
			cs = append(cs, del("k"+strconv.Itoa(i*1000+j)))
		}
		_, err := e.Commit(CommitRequest{Topic: tpc, EntityKey: []byte("x"), Event: []byte("e"), Changes: cs})
		require.NoError(t, err)
	}
	after := heapInuse()
	t.Logf("heap: base %d KiB, 20,000 keys %d KiB, after deleting them %d KiB", base>>10, full>>10, after>>10)
	require.Greater(t, full-base, int64(20<<20), "the keys were held")
	require.Less(t, after-base, int64(4<<20), "their memory was returned")
	held, total := e.stateBytes.held("A")
	require.Zero(t, held)
	require.Zero(t, total)
}

func heapInuse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// Consumer-group claims are bounded per tenant and engine-wide: a poll
// over the bound hands out nothing fresh and is refused with
// limit_exceeded naming the limit; acks, dead-letter discards, seeks and
// deletes give the places back; groups are bounded the same way.
func TestGroupClaimsBoundedPerTenantAndEngineWide(t *testing.T) {
	clk := newFakeClock()
	e := New(Config{DefaultStream: durable, Now: clk.Now, Groups: GroupConfig{MaxAttempts: 1, Visibility: time.Second,
		MaxTenantClaims: 100, MaxTotalClaims: 150, MaxTenantGroups: 3, MaxTotalGroups: 5}})
	defer e.Close()
	ref := func(tenant, group string) GroupRef {
		return GroupRef{Topic: Topic{Tenant: tenant, Stream: "s"}, Group: group}
	}
	for _, tenant := range []string{"A", "B"} {
		for i := range 200 {
			pub(t, e, Topic{Tenant: tenant, Stream: "s"}, strconv.Itoa(i))
		}
	}
	require.Len(t, poll(t, e, ref("A", "g1"), 60), 60)
	require.Len(t, poll(t, e, ref("A", "g2"), 60), 40, "the tenant's 100 claims")
	_, err := e.GroupPoll(ctxT(t), GroupPollRequest{GroupRef: ref("A", "g2"), Max: 10})
	requireCode(t, err, felix.CodeLimitExceeded, felix.RetryFatal)
	require.Contains(t, err.Error(), "consumer-group claims: the tenant's limit of 100")
	// B within its share (75 of 150) is served up to it although A holds
	// 100 of the 150; past its share it is refused by the engine-wide bound.
	require.Len(t, poll(t, e, ref("B", "g1"), 100), 75)
	_, err = e.GroupPoll(ctxT(t), GroupPollRequest{GroupRef: ref("B", "g1"), Max: 10})
	require.Contains(t, err.Error(), "consumer-group claims: all tenants' limit of 150")

	// Acks give places back, but A, holding 90 of the 165, is over its
	// share of the engine-wide bound: it is refused before B.
	for off := range uint64(10) {
		require.NoError(t, e.GroupAck(ref("A", "g1"), off))
	}
	held, total := e.claims.held("A")
	require.Equal(t, int64(90), held)
	require.Equal(t, int64(165), total)
	_, err = e.GroupPoll(ctxT(t), GroupPollRequest{GroupRef: ref("A", "g2"), Max: 10})
	require.Contains(t, err.Error(), "consumer-group claims: all tenants' limit of 150")
	// Timed-out claims past the attempt bound become dead letters and keep
	// their places until discarded.
	clk.Advance(2 * time.Second)
	dl, err := e.GroupDeadLetters(ref("A", "g1"))
	require.NoError(t, err)
	require.Len(t, dl, 50)
	require.NoError(t, e.GroupDiscard(ref("A", "g1"), dl[0]))
	_, claims := countGroupState(e, "A")
	held, _ = e.claims.held("A")
	require.Equal(t, claims, held, "the budget counts what the groups hold")
	require.Equal(t, int64(89), held)
	_, _, err = e.GroupSeek(ref("A", "g2"), felix.StartPosition{Kind: felix.StartEarliest}, false)
	require.NoError(t, err)
	_, claims = countGroupState(e, "A")
	held, _ = e.claims.held("A")
	require.Equal(t, claims, held)
	existed, err := e.GroupDelete(ref("A", "g1"))
	require.NoError(t, err)
	require.True(t, existed)
	groups, claims := countGroupState(e, "A")
	held, _ = e.claims.held("A")
	require.Equal(t, claims, held)
	require.Zero(t, held, "g2's claims went with the seek, g1's with the delete")

	// Groups: three per tenant.
	require.Len(t, poll(t, e, ref("A", "g3"), 1), 1)
	require.Len(t, poll(t, e, ref("A", "g4"), 1), 1)
	require.Equal(t, int64(3), groups+2)
	_, err = e.GroupPoll(ctxT(t), GroupPollRequest{GroupRef: ref("A", "g5"), Max: 1})
	require.Contains(t, err.Error(), "consumer groups: the tenant's limit of 3")
	n, _ := e.groupCount.held("A")
	require.Equal(t, int64(3), n)
}

// The tenant over its share holds only its shards' newest records, which
// are always kept: nobody is trimmed, rather than the tenant within its
// share.
func TestLogBoundNeverTrimsWithinShare(t *testing.T) {
	const limit = 1 << 20
	e := New(Config{DefaultStream: durable, MaxLogBytes: limit})
	defer e.Close()
	_, err := e.Publish(PublishRequest{Topic: Topic{Tenant: "A", Stream: "s"}, Payloads: [][]byte{bytes.Repeat([]byte("a"), 900<<10)}})
	require.NoError(t, err)
	b := Topic{Tenant: "B", Stream: "s"}
	for range 2000 { // 2000 × 148 bytes ≈ 289 KiB: the total goes over
		_, err := e.Publish(PublishRequest{Topic: b, Payloads: [][]byte{bytes.Repeat([]byte("b"), 100)}})
		require.NoError(t, err)
	}
	require.Greater(t, e.LogBytes(), int64(limit))
	oldest, tail, err := e.Tail(b, 0)
	require.NoError(t, err)
	require.Equal(t, [2]uint64{0, 2000}, [2]uint64{oldest, tail}, "B, within its share, lost nothing")
}

// The memory of claims is bounded by the claims budget and returned with
// them: 10 groups claim 10,000 records each (100,000 claims), then are
// deleted.
func TestGroupClaimsMemoryMeasured(t *testing.T) {
	e := New(Config{DefaultStream: durable, Groups: GroupConfig{Visibility: time.Hour}})
	defer e.Close()
	tpc := Topic{Tenant: "A", Stream: "s"}
	for range 10 {
		payloads := make([][]byte, 1000)
		for i := range payloads {
			payloads[i] = []byte("r")
		}
		_, err := e.Publish(PublishRequest{Topic: tpc, Payloads: payloads})
		require.NoError(t, err)
	}
	base := heapInuse()
	for g := range 10 {
		ref := GroupRef{Topic: tpc, Group: "g" + strconv.Itoa(g)}
		for range 10 {
			require.Len(t, poll(t, e, ref, 1000), 1000)
		}
	}
	full := heapInuse()
	held, _ := e.claims.held("A")
	require.Equal(t, int64(100_000), held)
	for g := range 10 {
		_, err := e.GroupDelete(GroupRef{Topic: tpc, Group: "g" + strconv.Itoa(g)})
		require.NoError(t, err)
	}
	after := heapInuse()
	perClaim := (full - base) / 100_000
	t.Logf("heap: base %d KiB, 100,000 claims %d KiB (%d bytes each), after deleting the groups %d KiB", base>>10, full>>10, perClaim, after>>10)
	require.Less(t, perClaim, int64(160), "about 100 bytes per claim")
	require.Less(t, after-base, int64(2<<20), "their memory was returned")
	held, total := e.claims.held("A")
	require.Zero(t, held)
	require.Zero(t, total)
}

// Tenant A's overwrites fill the engine-wide bound on cache write logs;
// tenant B's cache, within its share, keeps every event for its
// watchers' replay (offset 0 stays), while A's caches drop their own.
func TestCacheLogBoundSparesTheTenantWithinItsShare(t *testing.T) {
	const limit = 1 << 20
	e := New(Config{MaxTotalCacheLogBytes: limit})
	defer e.Close()
	value := bytes.Repeat([]byte("v"), 4<<10)
	for i := range 1000 { // 4 MB of overwrites into a 1 MiB bound
		_, err := e.CachePut(CacheRef{Tenant: "A", Cache: "c" + strconv.Itoa(i%4)}, "k", value, nil)
		require.NoError(t, err)
	}
	b := CacheRef{Tenant: "B", Cache: "c"}
	for range 50 { // ≈ 200 KiB, B's share is 512 KiB
		_, err := e.CachePut(b, "k", value, nil)
		require.NoError(t, err)
	}
	for i := range 200 { // A goes on: over its share, it trims itself
		_, err := e.CachePut(CacheRef{Tenant: "A", Cache: "c" + strconv.Itoa(i%4)}, "k", value, nil)
		require.NoError(t, err)
	}
	oldest, next, err := e.CacheOffsets(b)
	require.NoError(t, err)
	require.Equal(t, [2]uint64{0, 50}, [2]uint64{oldest, next}, "B's write log is whole")
	logB, _ := e.CacheBytes()
	require.LessOrEqual(t, logB, int64(limit+(8<<10)), "the bound holds (plus B's share while A had not written yet)")
}
