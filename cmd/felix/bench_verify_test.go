package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
)

func TestBenchHeaderRoundTrip(t *testing.T) {
	b := make([]byte, benchHeaderLen+3)
	h := benchHeader{run: 0xdeadbeef, pub: 7, seq: 1<<40 + 3, sentNano: 1_700_000_000_123_456_789}
	putBenchHeader(b, h)
	got, ok := parseBenchHeader(b)
	require.True(t, ok)
	require.Equal(t, h, got)
	_, ok = parseBenchHeader(b[:benchHeaderLen-1])
	require.False(t, ok, "too short for a header")
	b[0] = 'X'
	_, ok = parseBenchHeader(b)
	require.False(t, ok, "another publisher's record")
}

func TestSeqSet(t *testing.T) {
	var s seqSet
	for _, q := range []uint64{0, 1, 2, 4, 3, 3, 70, 6} {
		s.add(q)
	}
	require.Equal(t, uint64(7), s.unique)
	require.Equal(t, uint64(1), s.dups)
	require.Equal(t, uint64(71), s.top)
	s.finish(72)
	// 5 and 7..69 never came, nor 71 (sent but not received).
	require.Equal(t, []seqRange{{5, 6}, {7, 70}, {71, 72}}, s.holes.r)
	require.Equal(t, uint64(1+63+1), s.missing())
	n, first := s.missingExcept([]seqRange{{0, 6}, {10, 20}, {60, 80}}, 5)
	require.Equal(t, uint64(3+40), n, "7..9 and 20..59 are the unexcused holes")
	require.Equal(t, []seqRange{{7, 10}, {20, 60}}, first)
	n, first = s.missingExcept(nil, 1)
	require.Equal(t, s.missing(), n)
	require.Equal(t, []seqRange{{5, 6}}, first, "limit respected")
}

// A record that falls out of the window unseen is a hole until it
// arrives late; a second copy after that is a duplicate.
func TestSeqSetWindowAndLateArrival(t *testing.T) {
	var s seqSet
	s.add(1) // 0 missing for now
	s.add(maxSeqWindowBits + 100)
	require.Equal(t, []seqRange{{0, 1}, {2, 128}}, s.holes.r, "slid out of the window (in whole words): holes")
	s.add(0)
	require.Equal(t, uint64(3), s.unique)
	require.Equal(t, seqRange{2, 128}, s.holes.r[0], "late arrival taken out of the holes")
	s.add(30)
	require.Equal(t, []seqRange{{2, 30}, {31, 128}}, s.holes.r, "hole split by a late arrival")
	s.add(30)
	require.Equal(t, uint64(1), s.dups)
}

// The holes are exactly the sent sequence numbers that were not received,
// whatever the order and repetitions.
func TestSeqSetProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sent := rapid.Uint64Range(0, 3000).Draw(t, "sent")
		recv := rapid.SliceOf(rapid.Uint64Range(0, sent+10)).Draw(t, "recv")
		var s seqSet
		seen := map[uint64]bool{}
		dups := uint64(0)
		for _, q := range recv {
			if seen[q] {
				dups++
			}
			seen[q] = true
			s.add(q)
		}
		s.finish(sent)
		var want []uint64
		for q := range sent {
			if !seen[q] {
				want = append(want, q)
			}
		}
		var got []uint64
		for _, r := range s.holes.r {
			for q := r.lo; q < r.hi; q++ {
				got = append(got, q)
			}
		}
		if !slices.Equal(want, got) {
			t.Fatalf("holes %v, want %v", s.holes.r, want)
		}
		if s.dups != dups || s.unique != uint64(len(seen)) {
			t.Fatalf("dups %d unique %d, want %d %d", s.dups, s.unique, dups, len(seen))
		}
	})
}

func TestRangeListMergesAndBounds(t *testing.T) {
	var l rangeList
	l.add(0, 4)
	l.add(4, 8)
	l.add(10, 12)
	require.Equal(t, []seqRange{{0, 8}, {10, 12}}, l.r)
	require.False(t, l.overflow)
	for i := range uint64(maxHoleRanges) {
		l.add(100+2*i, 101+2*i)
	}
	require.True(t, l.overflow)
	require.Len(t, l.r, maxHoleRanges)
}

// The verdict over the bookkeeping: an acknowledged record a subscriber
// did not get is lost; one whose publish failed is only missing.
func TestBenchVerifyCountsLostAcked(t *testing.T) {
	b := &bench{cfg: &benchConfig{mode: "pubsub", ack: benchAckBatch}, run: 9}
	p := &benchPub{idx: 0}
	p.sent.Store(100)
	p.unacked.add(10, 20)
	b.pubs = []*benchPub{p}
	s := &benchSub{idx: 0, seqs: map[[2]uint32]*seqSet{}}
	set := &seqSet{}
	for q := range uint64(100) {
		if q != 15 && q != 50 {
			set.add(q)
		}
	}
	s.seqs[[2]uint32{9, 0}] = set
	other := &benchSub{idx: 1, seqs: map[[2]uint32]*seqSet{}} // got nothing
	b.subs = []*benchSub{s, other}
	v := b.verify()
	require.True(t, v.Checked)
	require.Equal(t, uint64(100), v.Sent)
	require.Equal(t, uint64(90), v.Acked)
	require.Equal(t, uint64(1+90), v.LostAcked, "sub 0 lost 50; sub 1 lost every acked record")
	require.Equal(t, uint64(1+10), v.MissingUnacked)
	require.Contains(t, v.FirstLost, "sub 0: pub 0 seq 50..50")
	rep := &benchReport{Verify: v}
	require.ErrorContains(t, rep.failure(), "91 acknowledged record(s) did not reach every subscriber")

	// With ack none nothing is acknowledged: missing, never lost.
	b.cfg.ack = benchAckNone
	for _, s := range b.subs {
		for _, set := range s.seqs {
			set.holes = rangeList{}
		}
	}
	v = b.verify()
	require.Zero(t, v.LostAcked)
	require.Zero(t, v.Acked)
}

// bench sub starts counting a publisher at its first record received.
func TestSeqSetFromMidStream(t *testing.T) {
	s := seqSet{base: 1000}
	for q := uint64(1000); q < 1100; q++ {
		if q != 1070 {
			s.add(q)
		}
	}
	s.finish(s.top)
	require.Equal(t, []seqRange{{1070, 1071}}, s.holes.r)
}

// A sequence number far ahead of the window is one hole, recorded at
// once; more hole ranges than the bound are counted, not kept.
func TestSeqSetFarAheadAndHoleBound(t *testing.T) {
	var s seqSet
	s.add(0)
	s.add(1 << 61)
	require.Equal(t, []seqRange{{1, 1<<61 - maxSeqWindowBits + 64}}, s.holes.r)
	s.finish(1<<61 + 1)
	require.Equal(t, uint64(1<<61-1), s.missing())

	var b seqSet
	for i := range uint64(maxHoleRanges + 10) {
		b.add(2 * i) // every odd number is missing
	}
	b.finish(2 * (maxHoleRanges + 10))
	require.True(t, b.holes.overflow)
	require.Len(t, b.holes.r, maxHoleRanges)
	require.Equal(t, uint64(maxHoleRanges+10), b.missing(), "counted past the bound")
}

// Error classes come from a fixed vocabulary: a broker's own words (an
// unknown code, a new refusal reason) never become a class of their own.
func TestBenchErrorClass(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{context.DeadlineExceeded, "timeout"},
		{fmt.Errorf("publish: %w", context.DeadlineExceeded), "timeout"},
		{&client.AmbiguousError{Op: "publish", Err: errors.New("x")}, "outcome_unknown/ambiguous"},
		{&felix.BrokerError{Code: felix.CodeLimitExceeded}, "fatal/limit_exceeded"},
		{&felix.BrokerError{Code: felix.CodeShardUnavailable}, "retry/shard_unavailable"},
		{&felix.BrokerError{Code: "made_up_by_the_peer"}, "fatal/unknown_code"},
		{&felix.PublishRefusedError{Reason: "sequence_gap"}, "fatal/publish_refused:sequence_gap"},
		{&felix.PublishRefusedError{Reason: "peer prose"}, "fatal/publish_refused"},
		{&felix.CursorError{Reason: "too_old"}, "fatal/cursor:too_old"},
		{&felix.CursorError{Reason: "peer prose"}, "fatal/cursor"},
		{&felix.LaggedError{ResumeFrom: 3}, "retry/lagged"}, // resumable: the client's table retries a lag
		// A lost connection may have carried the write: the decision table
		// calls it outcome_unknown.
		{&conn.TransportError{Op: "read", Err: errors.New("reset")}, "outcome_unknown/transport"},
		{&client.ShardLostError{Shard: 2, Err: &felix.CursorError{Reason: "too_old"}}, "shard_lost/fatal/cursor:too_old"},
		{fmt.Errorf("%w: x", client.ErrProducerStopped), "fatal/producer_stopped"},
		{errors.New("something else"), "fatal/other"},
	}
	for _, c := range cases {
		require.Equal(t, c.want, benchErrorClass(c.err), "%v", c.err)
	}
	// The report keeps at most maxErrorClasses classes.
	b := &bench{errors: map[string]*errorCount{}}
	for i := range maxErrorClasses + 5 {
		b.countError(&felix.PublishRefusedError{Reason: fmt.Sprint(i)})
		b.countError(&felix.BrokerError{Code: felix.ErrorCode(fmt.Sprint("code", i))})
		b.countError(fmt.Errorf("e%d: %w", i, &felix.CursorError{Reason: "too_old"}))
	}
	require.Len(t, b.errors, 3, "peer-chosen reasons and codes share their class")
	require.Equal(t, int64(maxErrorClasses+5), b.errors["fatal/unknown_code"].n)
	for i := len(b.errors); i < maxErrorClasses; i++ {
		b.errors[fmt.Sprint("filler", i)] = &errorCount{n: 1}
	}
	b.countError(context.DeadlineExceeded)
	require.Len(t, b.errors, maxErrorClasses+1, "past the bound: one class more, other")
	require.Equal(t, int64(1), b.errors["other"].n)
	require.Nil(t, b.errors["timeout"])
}
