package engine

import (
	"bytes"
	"strings"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Every frame a subscriber gets, live or from history, whether it is the
// log's stored frame, a head with one copy of a segment's bytes, or
// encoded record by record, is the canonical encoding of the records it
// carries with exactly the modifiers the subscriber accepted, and the
// frames carry every record once, in order.
func TestFramesFromTheLogAreCanonical(t *testing.T) {
	ctx := ctxT(t)
	rapid.Check(t, func(rt *rapid.T) {
		isDurable := rapid.Bool().Draw(rt, "durable")
		e := New(Config{DefaultStream: StreamConfig{Durable: isDurable}})
		defer e.Close()
		mods := felix.Flags(0)
		for _, f := range []felix.Flags{felix.FlagEventBatchOffsets, felix.FlagEventBatchPublisher, felix.FlagEventBatchTimestamps} {
			if rapid.Bool().Draw(rt, "mod "+f.String()) {
				mods |= f
			}
		}
		live, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: mods})
		require.NoError(rt, err)
		defer live.Close()
		type rec struct {
			payload, publisher string
		}
		var recs []rec
		batches := rapid.IntRange(1, 12).Draw(rt, "batches")
		for i := range batches {
			n := rapid.IntRange(1, 80).Draw(rt, "records")
			size := rapid.SampledFrom([]int{0, 3, 100, 300, 20 << 10}).Draw(rt, "size")
			pubName := rapid.SampledFrom([]string{"", "p", "q"}).Draw(rt, "publisher")
			var ps [][]byte
			for j := range n {
				p := bytes.Repeat([]byte{byte(i), byte(j)}, size/2+j%3)
				ps = append(ps, p)
				recs = append(recs, rec{string(p), pubName})
			}
			_, err := e.Publish(PublishRequest{Topic: tp, Payloads: ps, Publisher: pubName})
			require.NoError(rt, err)
		}
		// check reads deliveries until n records came, from offset off.
		check := func(s *Subscription, off int, history bool) {
			for off < len(recs) {
				d, err := s.Next(ctx)
				require.NoError(rt, err)
				f, err := felix.DecodeFrame(d.Frame, 0)
				require.NoError(rt, err)
				b, err := felix.DecodeEventBatch(f.Flags, f.Payload)
				require.NoError(rt, err)
				ev := event{flags: f.Flags, base: b.BaseOffset, publisher: string(b.Publisher)}
				for _, p := range b.Payloads {
					ev.payloads = append(ev.payloads, string(p))
				}
				want := felix.Flags(felix.FlagBinaryEventBatchShared)
				if mods.Has(felix.FlagEventBatchOffsets) && (isDurable || history) {
					want |= felix.FlagEventBatchOffsets
				}
				if mods.Has(felix.FlagEventBatchPublisher) && recs[off].publisher != "" {
					want |= felix.FlagEventBatchPublisher
				}
				if mods.Has(felix.FlagEventBatchTimestamps) && isDurable {
					want |= felix.FlagEventBatchTimestamps
				}
				require.Equal(rt, want, ev.flags, "modifiers at offset %d", off)
				if want.Has(felix.FlagEventBatchOffsets) {
					require.Equal(rt, uint64(off), ev.base, "no gap, no repeat")
				}
				for _, p := range ev.payloads {
					require.Equal(rt, recs[off].payload, p, "record %d", off)
					if want.Has(felix.FlagEventBatchPublisher) {
						require.Equal(rt, recs[off].publisher, ev.publisher)
					}
					off++
				}
				again, err := felix.AppendEventBatch(nil, &b, f.Flags)
				require.NoError(rt, err)
				require.Equal(rt, d.Frame, again, "canonical")
				d.Release()
			}
			require.Equal(rt, len(recs), off)
		}
		check(live, 0, false)
		if isDurable {
			from := rapid.IntRange(0, len(recs)-1).Draw(rt, "from")
			h, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartOffset, Offset: uint64(from)}, Mods: mods})
			require.NoError(rt, err)
			defer h.Close()
			check(h, from, true)
		}
	})
}

// History pages: a batch that is large enough goes out whole as the log
// stores it (no encode), and a reader that starts within one is in step
// from its next page; small batches are gathered into full pages; batches
// over maxWholePage records, and readers with other modifiers, get pages
// encoded as before.
func TestHistoryPages(t *testing.T) {
	rec := func(n int) []byte { return bytes.Repeat([]byte("r"), n) }
	batch := func(n, size int) [][]byte {
		var ps [][]byte
		for range n {
			ps = append(ps, rec(size))
		}
		return ps
	}
	for _, tc := range []struct {
		name    string
		batches [][][]byte
		from    uint64
		mods    felix.Flags
		pages   []int
		encodes uint64
	}{
		{name: "whole batches", batches: [][][]byte{batch(64, 100), batch(64, 100), batch(16, 100)},
			mods: felix.FlagEventBatchOffsets, pages: []int{64, 64, 16}},
		{name: "in step after a start within a batch", batches: [][][]byte{batch(64, 100), batch(64, 100), batch(30, 10)},
			from: 10, mods: felix.FlagEventBatchOffsets, pages: []int{54, 64, 30}, encodes: 1},
		{name: "a quarter page of bytes goes whole", batches: [][][]byte{batch(1, 100), batch(2, 8<<10), batch(1, 100)},
			mods: felix.FlagEventBatchOffsets, pages: []int{1, 2, 1}, encodes: 2},
		{name: "big records, one frame per batch", batches: [][][]byte{batch(4, 64<<10), batch(4, 64<<10)},
			mods: felix.FlagEventBatchOffsets, pages: []int{4, 4}},
		{name: "small batches gathered", batches: func() (bs [][][]byte) {
			for range 150 {
				bs = append(bs, batch(1, 10))
			}
			return bs
		}(), mods: felix.FlagEventBatchOffsets, pages: []int{64, 64, 22}, encodes: 3},
		{name: "a batch over maxWholePage records", batches: [][][]byte{batch(maxWholePage+1, 1)},
			mods: felix.FlagEventBatchOffsets, pages: append(slicesRepeat(64, (maxWholePage)/64), 1), encodes: maxWholePage/64 + 1},
		{name: "a reader with timestamps", batches: [][][]byte{batch(64, 100), batch(20, 100)},
			mods: felix.FlagEventBatchOffsets | felix.FlagEventBatchTimestamps, pages: []int{64, 20}, encodes: 2},
		{name: "a reader with timestamps, big records", batches: [][][]byte{batch(4, 64<<10)},
			mods: felix.FlagEventBatchOffsets | felix.FlagEventBatchTimestamps, pages: []int{1, 1, 1, 1}, encodes: 4},
		{name: "a reader without offsets", batches: [][][]byte{batch(64, 100), batch(20, 100)},
			mods: 0, pages: []int{64, 20}, encodes: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Config{DefaultStream: durable})
			defer e.Close()
			total := 0
			for _, b := range tc.batches {
				_, err := e.Publish(PublishRequest{Topic: tp, Payloads: b})
				require.NoError(t, err)
				total += len(b)
			}
			s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartOffset, Offset: tc.from}, Mods: tc.mods})
			require.NoError(t, err)
			defer s.Close()
			enc0 := e.Stats().EventEncodes
			var pages []int
			for got := int(tc.from); got < total; {
				d := next(t, s)
				ev := decodeEvent(t, d.Frame)
				if tc.mods.Has(felix.FlagEventBatchOffsets) {
					require.Equal(t, uint64(got), ev.base)
				}
				pages = append(pages, len(ev.payloads))
				got += len(ev.payloads)
				d.Release()
			}
			require.Equal(t, tc.pages, pages)
			require.Equal(t, tc.encodes, e.Stats().EventEncodes-enc0, "frames encoded (the others are the log's own)")
		})
	}
}

func slicesRepeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// A history page refilled after it carried a frame too large for the
// frame pools gets a frame of its own records, not the last page's.
func TestHistoryPageRefilledAfterAnUnpooledFrame(t *testing.T) {
	const size = 1<<maxFrameClass + 1
	e := New(Config{DefaultStream: durable, MaxFrameBytes: 4 << maxFrameClass})
	defer e.Close()
	a, b := strings.Repeat("a", size), strings.Repeat("b", size)
	pub(t, e, tp, a)
	pub(t, e, tp, b)
	s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartEarliest},
		Mods: felix.FlagEventBatchOffsets | felix.FlagEventBatchTimestamps})
	require.NoError(t, err)
	defer s.Close()
	for i, want := range []string{a, b} {
		d := next(t, s)
		f, err := felix.DecodeFrame(d.Frame, 4<<maxFrameClass)
		require.NoError(t, err)
		ev, err := felix.DecodeEventBatch(f.Flags, f.Payload)
		require.NoError(t, err)
		require.Equal(t, uint64(i), ev.BaseOffset)
		require.True(t, string(ev.Payloads[0]) == want, "page %d carries its own record", i)
		d.Release()
	}
}

// A segment's bookkeeping is charged until its last record is dropped.
func TestLogCostCountsASegmentUntilItsLastRecord(t *testing.T) {
	e := New(Config{DefaultStream: StreamConfig{Durable: true, RetainRecords: 2}})
	defer e.Close()
	cost := func(payload, records, segments int64) int64 {
		return payload + records*logRecordOverhead + segments*logSegmentOverhead
	}
	pub(t, e, tp, "a", "b", "c") // a dropped: b, c of one segment
	require.Equal(t, cost(2, 2, 1), e.LogBytes())
	pub(t, e, tp, "d") // b dropped: c's segment stays
	require.Equal(t, cost(2, 2, 2), e.LogBytes())
	pub(t, e, tp, "e") // c dropped, and its segment
	require.Equal(t, cost(2, 2, 2), e.LogBytes())
}

// Under a small frame limit, a live batch is split into frames that each
// carry their own records, copied from the segment, and history pages fit
// the limit too (the segment's stored frame does not), whatever the
// reader's modifiers.
func TestFramesFromTheLogFitASmallLimit(t *testing.T) {
	const limit = 4 << 10
	e := New(Config{DefaultStream: durable, MaxFrameBytes: limit})
	defer e.Close()
	modSets := []felix.Flags{0, felix.FlagEventBatchOffsets, felix.FlagEventBatchOffsets | felix.FlagEventBatchTimestamps}
	var subs []*Subscription
	for _, mods := range modSets {
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: mods})
		require.NoError(t, err)
		defer s.Close()
		subs = append(subs, s)
	}
	var ps [][]byte
	for i := range 100 {
		ps = append(ps, bytes.Repeat([]byte{byte(i)}, 50+i))
	}
	_, err := e.Publish(PublishRequest{Topic: tp, Payloads: ps})
	require.NoError(t, err)
	for _, mods := range modSets {
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartEarliest}, Mods: mods})
		require.NoError(t, err)
		defer s.Close()
		subs = append(subs, s)
	}
	for _, s := range subs {
		frames := 0
		for got := 0; got < len(ps); frames++ {
			d := next(t, s)
			require.LessOrEqual(t, len(d.Frame)-felix.HeaderLen, limit)
			ev := decodeEvent(t, d.Frame)
			if ev.flags.Has(felix.FlagEventBatchOffsets) {
				require.Equal(t, uint64(got), ev.base)
			}
			for _, p := range ev.payloads {
				require.Equal(t, string(ps[got]), p, "record %d", got)
				got++
			}
			d.Release()
		}
		require.Greater(t, frames, 1, "the batch was split")
	}
}

// History pages fill up to the frame limit exactly: at a limit that ten
// 100-byte records with every modifier fit and eleven do not (by 12
// bytes), pages hold ten records.
func TestHistoryPagesFillTheFrameLimit(t *testing.T) {
	const n, per = 100, eventPerRecord + 100
	const limit = eventFixedMax + 10*per + n // an eleventh record's length and timestamp do not fit
	e := New(Config{DefaultStream: durable, MaxFrameBytes: limit})
	defer e.Close()
	var ps [][]byte
	for range 30 {
		ps = append(ps, bytes.Repeat([]byte("r"), n))
	}
	_, err := e.Publish(PublishRequest{Topic: tp, Payloads: ps})
	require.NoError(t, err)
	s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartEarliest},
		Mods: felix.FlagEventBatchOffsets | felix.FlagEventBatchTimestamps})
	require.NoError(t, err)
	defer s.Close()
	for range 3 {
		d := next(t, s)
		require.LessOrEqual(t, len(d.Frame)-felix.HeaderLen, limit)
		require.Len(t, decodeEvent(t, d.Frame).payloads, 10)
		d.Release()
	}
}
