package main

import (
	"encoding/binary"
	"slices"
)

// The bench header every record carries at its start, big-endian:
//
//	0..4   magic "FXB1"
//	4..8   run id (random per felix bench process)
//	8..12  publisher index within the run
//	12..20 sequence number of the record within its publisher, from 0
//	20..28 send time, Unix nanoseconds
//
// The rest of the record is filler up to -size.
const (
	benchMagic     = "FXB1"
	benchHeaderLen = 28
)

// benchHeader is a decoded bench header.
type benchHeader struct {
	run, pub uint32
	seq      uint64
	sentNano int64
}

// putBenchHeader writes h into the first benchHeaderLen bytes of b.
func putBenchHeader(b []byte, h benchHeader) {
	copy(b, benchMagic)
	binary.BigEndian.PutUint32(b[4:], h.run)
	binary.BigEndian.PutUint32(b[8:], h.pub)
	binary.BigEndian.PutUint64(b[12:], h.seq)
	binary.BigEndian.PutUint64(b[20:], uint64(h.sentNano))
}

// parseBenchHeader reads the bench header of a record; ok is false for a
// record that does not start with one (another publisher's traffic).
func parseBenchHeader(b []byte) (h benchHeader, ok bool) {
	if len(b) < benchHeaderLen || string(b[:4]) != benchMagic {
		return h, false
	}
	return benchHeader{
		run:      binary.BigEndian.Uint32(b[4:]),
		pub:      binary.BigEndian.Uint32(b[8:]),
		seq:      binary.BigEndian.Uint64(b[12:]),
		sentNano: int64(binary.BigEndian.Uint64(b[20:])),
	}, true
}

// seqRange is the half-open range of sequence numbers [lo, hi).
type seqRange struct{ lo, hi uint64 }

// Bounds of the per-publisher bookkeeping of a subscriber: the window of
// sequence numbers not yet resolved (in bits) and the number of distinct
// hole ranges remembered. Past maxHoleRanges, holes are only counted and
// the verification is marked incomplete.
const (
	maxSeqWindowBits = 1 << 20 // 128 KiB of bitmap per publisher and subscriber
	maxHoleRanges    = 4096
	// maxBenchSeq bounds the sequence numbers tracked: a header claiming
	// a larger one is not a bench publisher's (counted as untracked).
	maxBenchSeq = 1 << 62
)

// seqSet records which sequence numbers of one publisher a subscriber
// received, in bounded memory: a sliding bitmap over the sequence numbers
// not yet resolved, and the ranges found missing below it. Records arrive
// almost in order (per shard they do), so the window stays small; a
// sequence number that falls out of the window unseen is recorded as a
// hole, and removed from it should it arrive late.
type seqSet struct {
	base   uint64   // every sequence number below base is resolved (or, in bench sub, was sent before the subscription)
	bits   []uint64 // bit i of word w: base+64w+i was received
	holes  rangeList
	unique uint64 // distinct sequence numbers received
	dups   uint64 // sequence numbers received more than once
	top    uint64 // one past the highest sequence number received
}

// add records the receipt of seq.
func (s *seqSet) add(seq uint64) {
	s.top = max(s.top, seq+1)
	if seq < s.base {
		if s.removeHole(seq) {
			s.unique++
		} else {
			s.dups++
		}
		return
	}
	off := seq - s.base
	if off >= maxSeqWindowBits {
		// Slide the window: what falls out of it unseen is missing.
		s.resolve(seq - maxSeqWindowBits + 1)
		off = seq - s.base
	}
	w := int(off / 64)
	if w >= len(s.bits) {
		s.bits = append(s.bits, make([]uint64, w+1-len(s.bits))...)
	}
	m := uint64(1) << (off % 64)
	if s.bits[w]&m != 0 {
		s.dups++
		return
	}
	s.bits[w] |= m
	s.unique++
	// Drop the full words at the front.
	n := 0
	for n < len(s.bits) && s.bits[n] == ^uint64(0) {
		n++
	}
	if n > 0 {
		s.bits = s.bits[:copy(s.bits, s.bits[n:])]
		s.base += 64 * uint64(n)
	}
}

// resolve moves the window's start to upTo (rounded up to a whole word),
// recording every sequence number below it that was not received as a
// hole. A stretch past the bitmap is one hole, recorded at once (a
// sequence number far ahead costs no time).
func (s *seqSet) resolve(upTo uint64) {
	for s.base < upTo && len(s.bits) > 0 {
		word := s.bits[0]
		s.bits = s.bits[:copy(s.bits, s.bits[1:])]
		for i := uint64(0); i < 64; i++ {
			if word&(1<<i) == 0 {
				s.addHoles(s.base+i, s.base+i+1)
			}
		}
		s.base += 64
	}
	if s.base < upTo {
		next := s.base + (upTo-s.base+63)&^63
		s.addHoles(s.base, next)
		s.base = next
	}
}

// finish resolves every sequence number below sent (the number of records
// the publisher sent): what was not received is a hole. It is called once,
// after the last add.
func (s *seqSet) finish(sent uint64) {
	if sent <= s.base {
		return
	}
	// resolve works in whole words: the whole words first, then the bits
	// of the last partial one.
	if whole := s.base + (sent-s.base)&^63; whole > s.base {
		s.resolve(whole)
	}
	for q := s.base; q < sent; q++ {
		off := q - s.base
		if w := int(off / 64); w >= len(s.bits) || s.bits[w]&(1<<(off%64)) == 0 {
			s.addHoles(q, q+1)
		}
	}
}

// addHoles records [lo, hi) as missing; holes arrive in increasing order.
func (s *seqSet) addHoles(lo, hi uint64) { s.holes.add(lo, hi) }

// removeHole takes a late arrival out of the holes; false when seq was not
// missing (a duplicate).
func (s *seqSet) removeHole(seq uint64) bool {
	i, found := slices.BinarySearchFunc(s.holes.r, seq, func(r seqRange, q uint64) int {
		switch {
		case r.hi <= q:
			return -1
		case r.lo > q:
			return 1
		}
		return 0
	})
	if !found {
		return false
	}
	h := s.holes.r
	r := h[i]
	switch {
	case r.lo == seq && r.hi == seq+1:
		h = slices.Delete(h, i, i+1)
	case r.lo == seq:
		h[i].lo++
	case r.hi == seq+1:
		h[i].hi--
	default:
		h[i].hi = seq
		h = slices.Insert(h, i+1, seqRange{seq + 1, r.hi})
	}
	s.holes.r = h
	return true
}

// missing is the number of sequence numbers found missing.
func (s *seqSet) missing() uint64 { return s.holes.count() }

// missingExcept counts the holes outside excused (sorted, disjoint ranges:
// the batches whose publish was not acknowledged) and returns up to limit
// of those sequence numbers' ranges.
func (s *seqSet) missingExcept(excused []seqRange, limit int) (n uint64, first []seqRange) {
	j := 0
	for _, h := range s.holes.r {
		lo := h.lo
		for lo < h.hi {
			for j < len(excused) && excused[j].hi <= lo {
				j++
			}
			if j < len(excused) && excused[j].lo <= lo {
				lo = min(excused[j].hi, h.hi) // excused part
				continue
			}
			hi := h.hi
			if j < len(excused) && excused[j].lo < hi {
				hi = excused[j].lo
			}
			n += hi - lo
			if len(first) < limit {
				first = append(first, seqRange{lo, hi})
			}
			lo = hi
		}
	}
	return n, first
}

// rangeList is a list of sequence ranges in increasing order (a
// subscriber's holes, a publisher's unacknowledged batches), bounded by
// maxHoleRanges: past it, ranges are only counted (overflow, and the
// verification is incomplete).
type rangeList struct {
	r        []seqRange
	overflow bool
	dropped  uint64 // sequence numbers in ranges not kept
}

// add appends [lo, hi), merging it with the last range when they touch.
func (l *rangeList) add(lo, hi uint64) {
	if n := len(l.r); n > 0 && l.r[n-1].hi == lo {
		l.r[n-1].hi = hi
		return
	}
	if len(l.r) >= maxHoleRanges {
		l.overflow = true
		l.dropped += hi - lo
		return
	}
	l.r = append(l.r, seqRange{lo, hi})
}

// count is the number of sequence numbers in the list, kept or not.
func (l *rangeList) count() uint64 {
	n := l.dropped
	for _, r := range l.r {
		n += r.hi - r.lo
	}
	return n
}
