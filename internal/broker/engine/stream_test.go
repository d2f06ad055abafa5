package engine

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

var tp = Topic{Tenant: "t1", Namespace: "ns", Stream: "s"}

const allMods = felix.FlagEventBatchOffsets | felix.FlagEventBatchSkipped | felix.FlagEventBatchPublisher | felix.FlagEventBatchTimestamps

func TestDurablePublishSubscribeOffsets(t *testing.T) {
	clk := newFakeClock()
	e := New(Config{DefaultStream: durable, Now: clk.Now})
	defer e.Close()
	s, info, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: allMods})
	require.NoError(t, err)
	defer s.Close()
	require.True(t, info.Durable)
	require.Equal(t, uint64(0), info.StartOffset)
	require.Equal(t, DefaultQueueCapacity, info.QueueCapacity)

	r := pub(t, e, tp, "a", "bc")
	require.Equal(t, PublishResult{Shard: 0, Offset: 0, HasOffset: true}, r)
	r = pub(t, e, tp, "d")
	require.Equal(t, uint64(2), r.Offset)

	ev := decodeEvent(t, next(t, s).Frame)
	require.Equal(t, felix.FlagBinaryEventBatchShared|felix.FlagEventBatchOffsets|felix.FlagEventBatchPublisher|felix.FlagEventBatchTimestamps, ev.flags)
	require.Equal(t, uint64(0), ev.base)
	require.Equal(t, "alice", ev.publisher)
	require.Equal(t, []string{"a", "bc"}, ev.payloads)
	us := uint64(clk.Now().UnixMicro())
	require.Equal(t, []uint64{us, us}, ev.ts)
	ev = decodeEvent(t, next(t, s).Frame)
	require.Equal(t, uint64(2), ev.base)
	require.Equal(t, []string{"d"}, ev.payloads)
	noDelivery(t, s)
}

func TestModifiersOnlyWhenOffered(t *testing.T) {
	e := New(Config{DefaultStream: durable})
	defer e.Close()
	plain, _, err := e.Subscribe(SubscribeRequest{Topic: tp})
	require.NoError(t, err)
	offs, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	pub(t, e, tp, "x")
	require.Equal(t, "464c5831000100040000000900000001000000017"+"8", hex.EncodeToString(next(t, plain).Frame))
	ev := decodeEvent(t, next(t, offs).Frame)
	require.Equal(t, felix.FlagBinaryEventBatchShared|felix.FlagEventBatchOffsets, ev.flags)
}

// The 0x6824 example of docs/binary.md §8, built as a Batch.
func TestBatchFrameSpecExample(t *testing.T) {
	b := &Batch{BaseOffset: 100, HasOffsets: true, Skipped: 1, Publisher: "al",
		Payloads: [][]byte{[]byte("a"), []byte("bc")}, Timestamps: []uint64{1700000000000000, 1700000000000001}}
	const want = "464c583100016824000000320000000000000064000000000000000102616c0000000200060a24181e4000000000016100060a24181e4001000000026263"
	require.Equal(t, want, hex.EncodeToString(b.Frame(allMods)))
	// offsets only (0x0024) and plain (0x0004) examples
	require.Equal(t, "464c583100010024000000170000000000000064000000020000000161000000026263",
		hex.EncodeToString(b.Frame(felix.FlagEventBatchOffsets)))
	require.Equal(t, "464c5831000100040000000f000000020000000161000000026263", hex.EncodeToString(b.Frame(0)))
	// skipped without offsets is never set, nor with a zero count
	require.Equal(t, felix.Flags(0), b.Mods(felix.FlagEventBatchSkipped))
	require.Equal(t, felix.FlagEventBatchOffsets,
		(&Batch{HasOffsets: true}).Mods(felix.FlagEventBatchOffsets|felix.FlagEventBatchSkipped))
}

func TestEncodedOncePerModifierSet(t *testing.T) {
	e := New(Config{DefaultStream: durable})
	defer e.Close()
	mods := []felix.Flags{0, felix.FlagEventBatchOffsets, felix.FlagEventBatchOffsets | felix.FlagEventBatchTimestamps}
	var subs []*Subscription
	for i := range 30 {
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: mods[i%3]})
		require.NoError(t, err)
		subs = append(subs, s)
	}
	const batches = 10
	for i := range batches {
		pub(t, e, tp, "m"+strconv.Itoa(i))
	}
	frames := map[felix.Flags]map[int][]byte{}
	for i, s := range subs {
		for j := range batches {
			d := next(t, s)
			if frames[mods[i%3]] == nil {
				frames[mods[i%3]] = map[int][]byte{}
			}
			if prev, ok := frames[mods[i%3]][j]; ok {
				require.Same(t, &prev[0], &d.Frame[0], "subscribers with one modifier set share the bytes")
			} else {
				frames[mods[i%3]][j] = d.Frame
			}
		}
		s.Close()
	}
	// The offsets-only set is the log's own frame: never encoded.
	require.Equal(t, uint64(batches*2), e.Stats().EventEncodes)
	require.Equal(t, uint64(batches*30), e.Stats().DeliveredBatches)
}

// 8 publishers x 10,000 single-record batches, 4 subscribers: every
// subscriber gets every offset exactly once, in order, and each publisher's
// records in its publishing order.
func TestFanoutExactlyOnceInOrder(t *testing.T) {
	const pubs, per, nsubs = 8, 10_000, 4
	e := New(Config{DefaultStream: durable, DefaultQueueCapacity: pubs * per, MaxQueueCapacity: pubs * per,
		SubscriberQueueBytes: 1 << 30, MaxQueuedBytes: 1 << 32})
	defer e.Close()
	var subs []*Subscription
	for i := range nsubs {
		start := Start{Kind: StartLatest}
		if i%2 == 1 {
			start = Start{Kind: StartEarliest}
		}
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: start, Mods: felix.FlagEventBatchOffsets})
		require.NoError(t, err)
		subs = append(subs, s)
	}
	errs := make(chan error, nsubs+pubs)
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			errs <- checkSubscriber(t, s, pubs, per)
		}()
	}
	var pwg sync.WaitGroup
	for p := range pubs {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			last := int64(-1)
			for n := range per {
				r, err := e.Publish(PublishRequest{Topic: tp, Payloads: [][]byte{fmt.Appendf(nil, "%d-%d", p, n)}})
				if err != nil || !r.HasOffset || int64(r.Offset) <= last {
					errs <- fmt.Errorf("publisher %d: %+v %v", p, r, err)
					return
				}
				last = int64(r.Offset)
			}
		}()
	}
	pwg.Wait()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, uint64(pubs*per), e.Stats().PublishedRecords)
	require.Zero(t, e.Stats().DroppedBatches)
}

func checkSubscriber(t testing.TB, s *Subscription, pubs, per int) error {
	want := uint64(0)
	lastSeq := make([]int, pubs)
	for i := range lastSeq {
		lastSeq[i] = -1
	}
	for want < uint64(pubs*per) {
		d, err := s.Next(ctxT(t))
		if err != nil {
			return fmt.Errorf("sub %d at %d: %w", s.ID(), want, err)
		}
		ev := decodeEvent(t, d.Frame)
		if ev.base != want {
			return fmt.Errorf("sub %d: got offset %d, want %d", s.ID(), ev.base, want)
		}
		for _, p := range ev.payloads {
			var pi, n int
			if _, err := fmt.Sscanf(p, "%d-%d", &pi, &n); err != nil {
				return err
			}
			if n != lastSeq[pi]+1 {
				return fmt.Errorf("publisher %d: %d after %d", pi, n, lastSeq[pi])
			}
			lastSeq[pi] = n
			want++
		}
	}
	return nil
}

func TestSubscribeFromEarliestWhilePublishing(t *testing.T) {
	e := New(Config{DefaultStream: durable, DefaultQueueCapacity: 4096})
	defer e.Close()
	for i := range 500 {
		pub(t, e, tp, strconv.Itoa(i))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 500; i < 1000; i++ {
			pub(t, e, tp, strconv.Itoa(i))
		}
	}()
	s, info, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartOffset, Offset: 100}, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, uint64(100), info.StartOffset)
	<-done
	want := uint64(100)
	for want < 1000 {
		ev := decodeEvent(t, next(t, s).Frame)
		require.Equal(t, want, ev.base)
		for _, p := range ev.payloads {
			require.Equal(t, strconv.FormatUint(want, 10), p)
			want++
		}
	}
	noDelivery(t, s)
}

func TestRetentionAndCursorErrors(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	cnt := Topic{"t1", "ns", "count"}
	byt := Topic{"t1", "ns", "bytes"}
	require.NoError(t, e.CreateStream(cnt, StreamConfig{Durable: true, RetainRecords: 10}))
	require.NoError(t, e.CreateStream(byt, StreamConfig{Durable: true, RetainBytes: 100}))
	for range 25 {
		pub(t, e, cnt, "x")
		pub(t, e, byt, strings.Repeat("y", 30))
	}
	old, tail, err := e.Tail(cnt, 0)
	require.NoError(t, err)
	require.Equal(t, [2]uint64{15, 25}, [2]uint64{old, tail})
	old, tail, err = e.Tail(byt, 0)
	require.NoError(t, err)
	require.Equal(t, [2]uint64{22, 25}, [2]uint64{old, tail}, "3 x 30 bytes fit in 100")

	_, _, err = e.Subscribe(SubscribeRequest{Topic: cnt, Start: Start{Kind: StartOffset, Offset: 14}})
	var ce *CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, CursorError{Reason: CursorTooOld, Requested: 14, Available: 15}, *ce)
	_, _, err = e.Subscribe(SubscribeRequest{Topic: cnt, Start: Start{Kind: StartOffset, Offset: 26}})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, CursorError{Reason: CursorInFuture, Requested: 26, Available: 25}, *ce)
	s, info, err := e.Subscribe(SubscribeRequest{Topic: cnt, Start: Start{Kind: StartOffset, Offset: 25}})
	require.NoError(t, err)
	require.Equal(t, uint64(25), info.StartOffset)
	s.Close()
	s, info, err = e.Subscribe(SubscribeRequest{Topic: cnt, Start: Start{Kind: StartEarliest}, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	require.Equal(t, uint64(15), info.StartOffset)
	ev := decodeEvent(t, next(t, s).Frame)
	require.Equal(t, uint64(15), ev.base)
	require.Len(t, ev.payloads, 10)
	s.Close()

	recs, nxt, err := e.Read(cnt, 0, 20, 3)
	require.NoError(t, err)
	require.Equal(t, uint64(23), nxt)
	require.Len(t, recs, 3)
	require.Equal(t, uint64(20), recs[0].Offset)
	_, _, err = e.Read(cnt, 0, 2, 3)
	require.ErrorAs(t, err, &ce)
}

// A history reader overtaken by retention: a lag-reporting subscriber is
// told where it stopped, another one sees a gap.
func TestHistoryOvertakenByRetention(t *testing.T) {
	e := New(Config{DefaultStream: StreamConfig{Durable: true, RetainRecords: 200}})
	defer e.Close()
	for range 200 {
		pub(t, e, tp, "x")
	}
	lag, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartEarliest}, LagReport: true, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	gap, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartEarliest}, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	defer gap.Close()
	require.Equal(t, uint64(0), decodeEvent(t, next(t, lag).Frame).base)
	require.Equal(t, uint64(0), decodeEvent(t, next(t, gap).Frame).base)
	for range 300 {
		pub(t, e, tp, "x")
	}
	d := next(t, lag)
	require.True(t, d.Lagged)
	require.Equal(t, uint64(DefaultHistoryBatch), d.ResumeFrom)
	_, err = lag.Next(ctxT(t))
	require.ErrorIs(t, err, ErrClosed)
	// history 64..199 was lost to retention; live batches from 200 were queued
	require.Equal(t, uint64(200), decodeEvent(t, next(t, gap).Frame).base)
}

func TestSlowSubscriberLagged(t *testing.T) {
	e := New(Config{DefaultStream: durable})
	defer e.Close()
	lagging, info, err := e.Subscribe(SubscribeRequest{Topic: tp, QueueCapacity: 4, LagReport: true, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	require.Equal(t, 4, info.QueueCapacity)
	gapping, _, err := e.Subscribe(SubscribeRequest{Topic: tp, QueueCapacity: 4, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	defer gapping.Close()
	fast, _, err := e.Subscribe(SubscribeRequest{Topic: tp, QueueCapacity: 4, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	defer fast.Close()

	for i := range 100 {
		pub(t, e, tp, strconv.Itoa(i)) // never blocks although two queues are full
		require.Equal(t, uint64(i), decodeEvent(t, next(t, fast).Frame).base)
	}
	require.True(t, lagging.Dropped())
	for i := range 4 {
		require.Equal(t, uint64(i), decodeEvent(t, next(t, lagging).Frame).base)
	}
	d := next(t, lagging)
	require.Equal(t, Delivery{Lagged: true, ResumeFrom: 4}, d)
	_, err = lagging.Next(ctxT(t))
	require.ErrorIs(t, err, ErrClosed)

	for i := range 4 {
		require.Equal(t, uint64(i), decodeEvent(t, next(t, gapping).Frame).base)
	}
	pub(t, e, tp, "after")
	require.Equal(t, uint64(100), decodeEvent(t, next(t, gapping).Frame).base, "the drop shows as an offset gap")
	st := e.Stats()
	require.Equal(t, uint64(1), st.LaggedSubscriptions)
	require.Equal(t, uint64(1+96), st.DroppedBatches, "the lagging one stops at its first drop")
	require.Equal(t, uint64(2), st.ActiveSubscriptions)
}

func TestQueueCapacityClamped(t *testing.T) {
	e := New(Config{MaxQueueCapacity: 8})
	defer e.Close()
	s, info, err := e.Subscribe(SubscribeRequest{Topic: tp, QueueCapacity: 100})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, 8, info.QueueCapacity)
}

// Ephemeral streams: live batches carry no offsets and no times; a replay
// ring of RingRecords records per shard serves earliest and offset
// subscribes with ring sequence numbers as offsets (no times), and a start
// that left the ring is too_old.
func TestEphemeralStream(t *testing.T) {
	e := New(Config{DefaultStream: StreamConfig{RingRecords: 4}}) // auto-created streams are ephemeral by default
	defer e.Close()
	r := pub(t, e, tp, "r0")
	require.False(t, r.HasOffset)
	pub(t, e, tp, "r1", "r2")

	// earliest replays the whole ring, with offsets, then goes live.
	s, info, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartEarliest}, Mods: allMods, LagReport: true, QueueCapacity: 1})
	require.NoError(t, err)
	defer s.Close()
	require.False(t, info.Durable)
	require.Equal(t, uint64(0), info.StartOffset)
	require.Equal(t, uint64(3), info.LiveOffset)
	ev := decodeEvent(t, next(t, s).Frame)
	require.Equal(t, felix.FlagBinaryEventBatchShared|felix.FlagEventBatchOffsets|felix.FlagEventBatchPublisher, ev.flags,
		"replay: offsets (ring sequence numbers), no timestamps")
	require.Equal(t, uint64(0), ev.base)
	require.Equal(t, []string{"r0", "r1", "r2"}, ev.payloads)
	pub(t, e, tp, "a")
	pub(t, e, tp, "dropped")
	ev = decodeEvent(t, next(t, s).Frame)
	require.Equal(t, felix.FlagBinaryEventBatchShared|felix.FlagEventBatchPublisher, ev.flags, "live: no offsets, no timestamps")
	require.Equal(t, []string{"a"}, ev.payloads)
	noDelivery(t, s) // a gap, no lag report without live offsets

	// The ring now holds offsets 1..4 (r1 r2 a dropped).
	oldest, tail, err := e.Tail(tp, 0)
	require.NoError(t, err)
	require.Equal(t, [2]uint64{1, 5}, [2]uint64{oldest, tail})
	s2, info, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartOffset, Offset: 3}, Mods: felix.FlagEventBatchOffsets})
	require.NoError(t, err)
	defer s2.Close()
	require.Equal(t, uint64(3), info.StartOffset)
	ev = decodeEvent(t, next(t, s2).Frame)
	require.Equal(t, uint64(3), ev.base)
	require.Equal(t, []string{"a", "dropped"}, ev.payloads)

	_, _, err = e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartOffset, Offset: 0}})
	var ce *CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, CursorError{Reason: CursorTooOld, Requested: 0, Available: 1}, *ce)
	_, _, err = e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartOffset, Offset: 6}})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, CursorError{Reason: CursorInFuture, Requested: 6, Available: 5}, *ce)
	s3, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartOffset, Offset: 5}})
	require.NoError(t, err, "the tail is a valid start")
	s3.Close()

	_, _, err = e.Read(tp, 0, 0, 1)
	require.Error(t, err, "stream_read serves durable streams only")
}

// The ring keeps RingRecords records (DefaultRingRecords by default) and
// also honours RetainBytes; RetainRecords does not apply to it.
func TestEphemeralRingBounds(t *testing.T) {
	e := New(Config{DefaultStream: StreamConfig{RetainRecords: 2}})
	defer e.Close()
	for i := range DefaultRingRecords + 10 {
		pub(t, e, tp, strconv.Itoa(i))
	}
	oldest, tail, err := e.Tail(tp, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(10), oldest)
	require.Equal(t, uint64(DefaultRingRecords+10), tail)

	tb := Topic{Tenant: "t", Namespace: "n", Stream: "bytes"}
	require.NoError(t, e.CreateStream(tb, StreamConfig{RingRecords: 100, RetainBytes: 10}))
	for range 5 {
		pub(t, e, tb, "abcd")
	}
	oldest, tail, err = e.Tail(tb, 0)
	require.NoError(t, err)
	require.Equal(t, [2]uint64{3, 5}, [2]uint64{oldest, tail}, "10 bytes keep two 4-byte records")
}

// Keyed publishes follow the stream's routing (docs/routing.md §1).
func TestRoutingModes(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	jt := Topic{Tenant: "t", Namespace: "n", Stream: "jump"}
	mt := Topic{Tenant: "t", Namespace: "n", Stream: "mod"}
	require.NoError(t, e.CreateStream(jt, StreamConfig{Durable: true, Shards: 8, Routing: felix.RoutingJumpHash}))
	require.NoError(t, e.CreateStream(mt, StreamConfig{Durable: true, Shards: 8}))
	require.Error(t, e.CreateStream(jt, StreamConfig{Durable: true, Shards: 8}), "another routing is another configuration")
	for _, tc := range []struct {
		key       string
		mod, jump uint32
	}{{"customer-0", 0, 3}, {"customer-1", 3, 0}, {"customer-2", 6, 5}, {"customer-4", 2, 2}, {"customer-6", 4, 7}} {
		r, err := e.Publish(PublishRequest{Topic: mt, Keyed: true, Key: []byte(tc.key), Payloads: [][]byte{{1}}})
		require.NoError(t, err)
		require.Equal(t, tc.mod, r.Shard, "modulo %s", tc.key)
		r, err = e.Publish(PublishRequest{Topic: jt, Keyed: true, Key: []byte(tc.key), Payloads: [][]byte{{1}}})
		require.NoError(t, err)
		require.Equal(t, tc.jump, r.Shard, "jump_hash %s", tc.key)
	}
	r, err := e.Publish(PublishRequest{Topic: jt, Keyed: true, Key: nil, Payloads: [][]byte{{1}}})
	require.NoError(t, err)
	require.Equal(t, felix.RoutingJumpHash.Shard(nil, 8), r.Shard, "an empty key is a key")
	r, err = e.Publish(PublishRequest{Topic: jt, Payloads: [][]byte{{1}}})
	require.NoError(t, err)
	require.Equal(t, uint32(0), r.Shard, "no key: shard 0")
}

func TestKeyedShards(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	require.NoError(t, e.CreateStream(tp, StreamConfig{Durable: true, Shards: 4}))
	require.Error(t, e.CreateStream(tp, StreamConfig{Durable: true, Shards: 2}))
	var subs [4]*Subscription
	for i := range subs {
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Shard: uint32(i), Mods: felix.FlagEventBatchOffsets})
		require.NoError(t, err)
		defer s.Close()
		subs[i] = s
	}
	_, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Shard: 4})
	require.Error(t, err)
	perShard := map[uint32]uint64{}
	seen := map[uint32]bool{}
	for i := range 40 {
		key := []byte("key-" + strconv.Itoa(i))
		r, err := e.Publish(PublishRequest{Topic: tp, Keyed: true, Key: key, Payloads: [][]byte{key}})
		require.NoError(t, err)
		require.Equal(t, felix.RoutingModulo.Shard(key, 4), r.Shard)
		require.Equal(t, perShard[r.Shard], r.Offset, "offsets are per shard")
		perShard[r.Shard]++
		seen[r.Shard] = true
		ev := decodeEvent(t, next(t, subs[r.Shard]).Frame)
		require.Equal(t, []string{string(key)}, ev.payloads)
	}
	require.Len(t, seen, 4, "40 keys spread over all shards")
	r, err := e.Publish(PublishRequest{Topic: tp, Payloads: [][]byte{[]byte("unkeyed")}})
	require.NoError(t, err)
	require.Equal(t, uint32(0), r.Shard)
	require.Equal(t, uint32(0), felix.RoutingModulo.Shard([]byte("k"), 4), "docs/routing.md §2: k on 4 shards lands on 0")
}

func TestIdempotentProducer(t *testing.T) {
	e := New(Config{DefaultStream: durable, ProducerWindow: 4})
	defer e.Close()
	id := e.ProducerInit()
	req := func(seq uint64, payload string) PublishRequest {
		return PublishRequest{Topic: tp, Idempotent: true, ProducerID: id, Sequence: seq, Payloads: [][]byte{[]byte(payload)}}
	}
	refusal := func(err error) *Refusal {
		t.Helper()
		var r *Refusal
		require.ErrorAs(t, err, &r)
		return r
	}
	_, err := e.Publish(req(1, "x"))
	require.Equal(t, RefusedUnknownProducer, refusal(err).Reason)
	r, err := e.Publish(req(0, "a"))
	require.NoError(t, err)
	require.Equal(t, uint64(0), r.Offset)
	r, err = e.Publish(req(1, "b"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), r.Offset)
	_, err = e.Publish(req(3, "d"))
	rf := refusal(err)
	require.Equal(t, RefusedSequenceGap, rf.Reason)
	require.Equal(t, uint64(2), rf.Expected)
	r, err = e.Publish(req(1, "b"))
	require.NoError(t, err)
	require.Equal(t, PublishResult{Offset: 1, HasOffset: true, Duplicate: true}, r)
	_, err = e.Publish(req(1, "B"))
	require.Equal(t, RefusedSequenceReused, refusal(err).Reason)
	for seq := uint64(2); seq < 8; seq++ {
		_, err = e.Publish(req(seq, "n"))
		require.NoError(t, err)
	}
	_, err = e.Publish(req(1, "b"))
	require.Equal(t, RefusedSequenceExpired, refusal(err).Reason)
	_, err = e.Publish(req(4, "n"))
	require.NoError(t, err, "still within the window of 4")
	_, tail, _ := e.Tail(tp, 0)
	require.Equal(t, uint64(8), tail, "duplicates and refusals wrote nothing")
	st := e.Stats()
	require.Equal(t, uint64(2), st.DuplicateBatches)
	require.Equal(t, uint64(4), st.RefusedBatches)
	require.NotEqual(t, id, e.ProducerInit())
}

func TestUnknownStreamWithoutAutoCreate(t *testing.T) {
	e := New(Config{NoAutoCreateStreams: true})
	defer e.Close()
	_, err := e.Publish(PublishRequest{Topic: tp, Payloads: [][]byte{[]byte("x")}})
	var ee *Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, felix.CodeNotFound, ee.Code)
	_, _, err = e.Subscribe(SubscribeRequest{Topic: tp})
	require.ErrorAs(t, err, &ee)
	_, ok := e.StreamInfo(tp)
	require.False(t, ok)
}

func TestCloseEndsSubscriptions(t *testing.T) {
	e := New(Config{DefaultStream: durable})
	s, _, err := e.Subscribe(SubscribeRequest{Topic: tp})
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		_, err := s.Next(ctxT(t))
		got <- err
	}()
	e.Close()
	require.True(t, errors.Is(<-got, ErrClosed))
	_, _, err = e.Subscribe(SubscribeRequest{Topic: tp})
	require.Error(t, err)
	require.Zero(t, e.Stats().ActiveSubscriptions)
	e.Close()
}

func TestEmptyBatch(t *testing.T) {
	e := New(Config{DefaultStream: durable})
	defer e.Close()
	s, _, err := e.Subscribe(SubscribeRequest{Topic: tp})
	require.NoError(t, err)
	defer s.Close()
	r, err := e.Publish(PublishRequest{Topic: tp})
	require.NoError(t, err)
	require.Equal(t, uint64(0), r.Offset)
	noDelivery(t, s)
}

// A subscriber that lagged but has not read its lag report yet when the
// engine drains never ends cleanly: it gets its queued batches, then a
// terminal delivery resuming exactly at its first undelivered offset (no
// gap, no repeat), and Undelivered counts it until then.
func TestDrainKeepsAPendingLagReport(t *testing.T) {
	for _, read := range []int{0, 2, 4} {
		t.Run(strconv.Itoa(read), func(t *testing.T) {
			e := New(Config{DefaultStream: durable})
			defer e.Close()
			s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, QueueCapacity: 4, LagReport: true, Mods: felix.FlagEventBatchOffsets})
			require.NoError(t, err)
			defer s.Close()
			for i := range 10 {
				pub(t, e, tp, strconv.Itoa(i))
			}
			require.True(t, s.Dropped())
			for i := range read {
				d := next(t, s)
				require.Equal(t, uint64(i), decodeEvent(t, d.Frame).base)
				d.Release()
			}
			e.StopPublishes()
			require.Equal(t, 1, e.Undelivered(), "a pending lag report is something to deliver")
			e.Drain()
			got := uint64(read)
			for {
				d := next(t, s)
				if d.Batch != nil {
					require.Equal(t, got, decodeEvent(t, d.Frame).base)
					got++
					d.Release()
					continue
				}
				require.True(t, d.Lagged || d.Drained, "a lagged subscriber's end must not be clean: %+v", d)
				require.Equal(t, got, d.ResumeFrom, "resume at the first undelivered offset")
				break
			}
			_, err = s.Next(ctxT(t))
			require.ErrorIs(t, err, ErrClosed)
		})
	}
}

// A subscription the engine closes (Close, not Drain: a shutdown that did
// not drain, or a drain that timed out) with records it had not delivered
// never ends cleanly: its next delivery is Drained, resuming at the first
// offset it did not receive (queued batches, unread history); one that had
// delivered everything ends with ErrClosed.
func TestCloseWithBacklogIsNotACleanEnd(t *testing.T) {
	t.Run("queued", func(t *testing.T) {
		e := New(Config{DefaultStream: durable})
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: felix.FlagEventBatchOffsets})
		require.NoError(t, err)
		for i := range 5 {
			pub(t, e, tp, strconv.Itoa(i))
		}
		d := next(t, s)
		require.Equal(t, uint64(0), decodeEvent(t, d.Frame).base)
		d.Release()
		e.Close()
		d = next(t, s)
		require.Equal(t, Delivery{Drained: true, HasResume: true, ResumeFrom: 1}, d)
		_, err = s.Next(ctxT(t))
		require.ErrorIs(t, err, ErrClosed)
	})
	t.Run("history", func(t *testing.T) {
		e := New(Config{DefaultStream: durable})
		for i := range 5 {
			pub(t, e, tp, strconv.Itoa(i))
		}
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartOffset, Offset: 2}, Mods: felix.FlagEventBatchOffsets})
		require.NoError(t, err)
		e.Close()
		require.Equal(t, Delivery{Drained: true, HasResume: true, ResumeFrom: 2}, next(t, s))
	})
	t.Run("delivered", func(t *testing.T) {
		e := New(Config{DefaultStream: durable})
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: felix.FlagEventBatchOffsets})
		require.NoError(t, err)
		pub(t, e, tp, "x")
		d := next(t, s)
		d.Release()
		e.Close()
		_, err = s.Next(ctxT(t))
		require.ErrorIs(t, err, ErrClosed)
	})
}
