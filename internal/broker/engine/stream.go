package engine

import (
	"encoding/binary"
	"hash/crc64"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/flxproto/felix"
)

type stream struct {
	e      *Engine
	ten    *tenantUse
	topic  Topic
	cfg    StreamConfig
	shards []*shard
}

// newStream makes a stream of t's tenant. The caller holds e.mu.
func newStream(e *Engine, t Topic, c StreamConfig) *stream {
	s := &stream{e: e, topic: t, cfg: c, ten: e.tenant(t.Tenant)}
	s.shards = make([]*shard, c.shards())
	for i := range s.shards {
		s.shards[i] = &shard{st: s, index: uint32(i), subs: make(map[*Subscription]struct{}), producers: newProducerTable()}
	}
	s.ten.shards = append(s.ten.shards, s.shards...)
	return s
}

// segment holds the records of one appended batch in one buffer, wire:
// the whole event frame a default subscriber gets for the batch (0x0004,
// with the base offset on a durable shard: the modifier set mods), its
// records laid out as such a frame carries them (u32 length, bytes) from
// wire[head:]. A live batch or a history page that is exactly the
// segment is sent as wire itself, to a subscriber whose modifiers are
// mods; one within the segment is a frame head and a copy of its bytes.
// The segment is immutable once appended (its base offset is written
// under the shard lock before).
type segment struct {
	wire      []byte
	head      uint32
	n         uint32 // records
	mods      felix.Flags
	publisher string
	ts        uint64 // µs since the epoch; 0 on ephemeral shards
}

// newSegment copies payloads into a segment whose frame carries offsets
// when durable; its base offset is set by setBase.
func newSegment(payloads [][]byte, publisher string, durable bool) (*segment, [][]byte) {
	var mods felix.Flags
	if durable {
		mods = felix.FlagEventBatchOffsets
	}
	size := 4 * len(payloads)
	for _, p := range payloads {
		size += len(p)
	}
	eb := felix.EventBatch{HasBaseOffset: durable}
	head := eb.FrameLen(mods)
	// A batch came in one frame, so its records and their count fit a
	// frame's u32 fields: the head cannot fail.
	wire, _ := felix.AppendEventBatchHead(make([]byte, 0, head+size), &eb, mods, len(payloads), size)
	seg := &segment{head: uint32(head), n: uint32(len(payloads)), mods: mods, publisher: publisher}
	out := make([][]byte, len(payloads))
	for i, p := range payloads {
		wire = binary.BigEndian.AppendUint32(wire, uint32(len(p)))
		wire = append(wire, p...)
		out[i] = wire[len(wire)-len(p) : len(wire) : len(wire)]
	}
	seg.wire = wire
	return seg, out
}

// setBase writes the offset of the segment's first record into its
// frame (durable shards).
func (g *segment) setBase(off uint64) {
	if g.mods.Has(felix.FlagEventBatchOffsets) {
		binary.BigEndian.PutUint64(g.wire[felix.HeaderLen:], off)
	}
}

// records returns the segment's records section.
func (g *segment) records() []byte { return g.wire[g.head:] }

// record is one retained record: bytes at..at+n of its segment's wire
// buffer (its u32 length is the 4 bytes before at).
type record struct {
	seg   *segment
	at, n uint32
}

// payload returns the record's bytes, capacity capped.
func (r record) payload() []byte { return r.seg.wire[r.at : r.at+r.n : r.at+r.n] }

// first reports whether r is its segment's first record.
func (r record) first() bool { return r.at == r.seg.head+4 }

// wireSpan returns the bytes of the records from..to (inclusive) of one
// segment as they are laid out on the wire.
func wireSpan(from, to record) []byte { return from.seg.wire[from.at-4 : to.at+to.n : to.at+to.n] }

// shard is one ordered log (durable) or one fan-out point with a replay
// ring (ephemeral); recs holds either.
type shard struct {
	st    *stream
	index uint32

	mu    sync.Mutex
	recs  []record // recs[head:] are retained, recs[head] has offset base
	head  int
	base  uint64
	next  uint64 // tail: offset of the next record
	bytes int64  // payload bytes of recs[head:]
	segs  int    // segments of recs[head:]
	subs  map[*Subscription]struct{}

	accounted int64        // cost reported to Engine.logBytes (retention.go)
	costSnap  atomic.Int64 // accounted, for Engine.enforceLogBudget's choice

	producers producerTable

	// Consumer groups, commit state and long-poll wake-ups (group.go,
	// commit.go); guarded by mu.
	groups map[string]*group
	state  *shardState
	wake   chan struct{}
}

type seqEntry struct {
	seq    uint64
	valid  bool
	digest uint64
	offset uint64
	shard  uint32
}

var crcTable = crc64.MakeTable(crc64.ECMA)

func digest(key []byte, keyed bool, payloads [][]byte) uint64 {
	var n [4]byte
	c := uint64(0)
	if keyed {
		c = crc64.Update(c, crcTable, []byte{1})
		c = crc64.Update(c, crcTable, key)
	}
	for _, p := range payloads {
		l := len(p)
		n[0], n[1], n[2], n[3] = byte(l>>24), byte(l>>16), byte(l>>8), byte(l)
		c = crc64.Update(c, crcTable, n[:])
		c = crc64.Update(c, crcTable, p)
	}
	return c
}

// PublishRequest is one publish of any form (binary or JSON, plain, acked,
// keyed or idempotent).
type PublishRequest struct {
	Topic
	// Payloads are the records. The engine copies them, so the caller may
	// reuse the memory after Publish returns.
	Payloads [][]byte
	// Keyed says Key routes the batch (a zero-length key is a real key).
	Keyed bool
	Key   []byte
	// Publisher is the principal the batch was accepted from.
	Publisher string
	// Idempotent marks a publish_idempotent / 0x0100 publish.
	Idempotent bool
	ProducerID uint64
	Sequence   uint64
	// HasExpected makes the publish conditional (publish_if, commit with
	// expected_offset): it is refused with RefusedOffsetMismatch, nothing
	// written, unless the shard's tail is ExpectedOffset.
	HasExpected    bool
	ExpectedOffset uint64
	// commit, when set, checks and applies a commit's state changes at the
	// offset the batch is about to take, under the shard lock; an error
	// refuses the publish with nothing written (commit.go).
	commit func(sh *shard, offset uint64) error
}

// PublishResult is the outcome of an applied (or duplicate) publish.
type PublishResult struct {
	// Shard is the shard the batch went to.
	Shard uint32
	// Offset is the offset of the batch's first record (durable streams;
	// for an empty batch, the tail). HasOffset is false on ephemeral
	// streams.
	Offset    uint64
	HasOffset bool
	// Duplicate is true when an idempotent batch had already been written
	// with the same sequence and content: nothing was written again and
	// Offset is the original one.
	Duplicate bool
}

// Publish appends a batch to its shard and fans it out to the shard's
// subscribers. It never blocks on a subscriber. Idempotent publishes may
// fail with *Refusal; unknown streams (without auto-creation) with *Error.
func (e *Engine) Publish(req PublishRequest) (PublishResult, error) {
	if err := e.gate.enter(); err != nil {
		return PublishResult{}, err
	}
	defer e.gate.mu.RUnlock()
	s, err := e.stream(req.Topic)
	if err != nil {
		return PublishResult{}, err
	}
	if err := e.checkDeliverable(&req, s.cfg.Durable); err != nil {
		return PublishResult{}, err
	}
	return s.shards[s.cfg.Routing.ShardOf(req.Key, req.Keyed, uint32(len(s.shards)))].publish(req)
}

// publish appends under the shard lock, then trims the stream logs of the
// tenants over their share should the engine-wide total be over its bound.
func (sh *shard) publish(req PublishRequest) (PublishResult, error) {
	res, err := sh.append(req)
	sh.st.e.enforceLogBudget()
	return res, err
}

func (sh *shard) append(req PublishRequest) (PublishResult, error) {
	e := sh.st.e
	durable := sh.st.cfg.Durable
	// Copy the payloads into one segment before taking the lock.
	seg, payloads := newSegment(req.Payloads, req.Publisher, durable)
	var dg uint64
	if req.Idempotent {
		dg = digest(req.Key, req.Keyed, payloads)
	}

	sh.mu.Lock()
	defer sh.mu.Unlock()
	res := PublishResult{Shard: sh.index, Offset: sh.next, HasOffset: durable}
	var prod *producer
	if req.Idempotent {
		var dup *seqEntry
		var err error
		prod, dup, err = sh.checkSequence(req.ProducerID, req.Sequence, dg)
		if err != nil {
			e.st.refusedBatches.Add(1)
			return PublishResult{}, err
		}
		if dup != nil {
			e.st.duplicateBatches.Add(1)
			return PublishResult{Shard: sh.index, Offset: dup.offset, HasOffset: durable, Duplicate: true}, nil
		}
	}
	if req.HasExpected && req.ExpectedOffset != sh.next {
		e.st.refusedBatches.Add(1)
		return PublishResult{}, offsetMismatch(req.ExpectedOffset, sh.next)
	}
	if req.commit != nil {
		if err := req.commit(sh, sh.next); err != nil {
			return PublishResult{}, err
		}
	}
	if prod != nil {
		if err := sh.recordSequence(prod, req.Sequence, seqEntry{seq: req.Sequence, valid: true, digest: dg,
			offset: sh.next, shard: sh.index}, len(payloads) == 0); err != nil {
			return PublishResult{}, err
		}
	}
	if len(payloads) == 0 {
		return res, nil
	}
	seg.setBase(sh.next)
	b := &Batch{Shard: sh.index, BaseOffset: sh.next, HasOffsets: durable, Payloads: payloads,
		Publisher: req.Publisher, whole: seg, span: seg.records(), encodes: &e.st.eventEncodes, eng: e}
	// Durable shards log every record with its append time; ephemeral
	// shards keep them in their replay ring without times.
	if durable {
		seg.ts = e.nowMicros()
		b.Timestamps = make([]uint64, len(payloads))
		for i := range b.Timestamps {
			b.Timestamps[i] = seg.ts
		}
	}
	at := seg.head
	for _, p := range payloads {
		at += 4
		sh.recs = append(sh.recs, record{seg: seg, at: at, n: uint32(len(p))})
		at += uint32(len(p))
		sh.bytes += int64(len(p))
	}
	sh.segs++
	sh.next += uint64(len(payloads))
	sh.retain()
	e.st.publishedBatches.Add(1)
	e.st.publishedRecords.Add(uint64(len(payloads)))
	sh.signalLocked()
	sh.offerSplit(b)
	return res, nil
}

// retain drops the oldest records beyond the retention bounds (the ring
// size on ephemeral shards), keeping at least the newest record, and
// compacts the slice now and then.
func (sh *shard) retain() {
	c := sh.st.cfg
	limit := c.retainRecords()
	for n := len(sh.recs) - sh.head; n > 1; n-- {
		over := (limit > 0 && n > limit) || (c.RetainBytes > 0 && sh.bytes > c.RetainBytes) || sh.overBudget(n)
		if !over {
			break
		}
		sh.dropOldestLocked()
	}
	sh.accountLog()
	if sh.head > 1024 && sh.head > len(sh.recs)/2 {
		n := copy(sh.recs, sh.recs[sh.head:])
		clear(sh.recs[n:])
		sh.recs = sh.recs[:n]
		sh.head = 0
	}
}

// bounds returns the oldest retained offset and the tail.
func (sh *shard) bounds() (oldest, tail uint64) { return sh.base, sh.next }

// maxWholePage bounds the records of a history page that is one whole
// segment (what its payload slices cost a reader: 24 KiB).
const maxWholePage = 16 * DefaultHistoryBatch

// history returns the next history page from offset from (offsets are
// ring sequence numbers on an ephemeral shard), at least one record unless
// the range is empty, stopping before end, filled into reuse when it is not
// nil (a batch nobody holds any more), for a reader that offered the
// modifier flags offered. The caller holds sh.mu. from must be ≥ sh.base.
//
// A page is a whole segment when from starts one that goes out as its
// stored frame (wholePage). Otherwise it holds up to DefaultHistoryBatch
// records, stopping at a publisher change, near DefaultHistoryBatchBytes,
// or before a segment that goes out whole, so that a reader that started
// within a published batch is in step with the batches from its next page
// on, while small batches are still gathered into full pages. A page
// within one segment is encoded as a head and one copy of its records'
// bytes; a page over several, record by record.
func (sh *shard) history(from, end uint64, offered felix.Flags, reuse *Batch) *Batch {
	if from >= end || from >= sh.next {
		return nil
	}
	i := sh.head + int(from-sh.base)
	first := sh.recs[i]
	b := reuse
	if b == nil {
		b = &Batch{}
	}
	pub := first.seg.publisher
	b.Shard, b.BaseOffset, b.HasOffsets, b.Publisher = sh.index, from, true, pub
	clear(b.Payloads) // the records of its last page are not kept alive
	b.Payloads, b.Timestamps, b.Skipped, b.size = b.Payloads[:0], b.Timestamps[:0], 0, 0
	b.whole, b.span = nil, nil
	b.encodes = &sh.st.e.st.eventEncodes
	durable := sh.st.cfg.Durable
	if !durable {
		b.Timestamps = nil
	}
	add := func(r record) {
		b.Payloads = append(b.Payloads, r.payload())
		if durable { // ring records have no stored time
			b.Timestamps = append(b.Timestamps, r.seg.ts)
		}
	}
	if g := first.seg; first.first() && sh.wholePage(g, offered) {
		for _, r := range sh.recs[i : i+int(g.n)] {
			add(r)
		}
		b.whole, b.span = g, g.records()
		return b
	}
	// size is the records' bytes; the page's frame with every modifier
	// (eventFrameMax) must fit the frame limit.
	size, fixed, limit := 0, eventFixedMax+eventPublisherLen(pub), sh.st.e.maxFrame()
	last, oneSeg := first, true
	for off := from; off < end && off < sh.next && len(b.Payloads) < DefaultHistoryBatch; off++ {
		r := sh.recs[i]
		if r.seg != last.seg {
			if r.seg.publisher != pub || sh.wholePage(r.seg, offered) {
				break
			}
			oneSeg = false
		}
		framed := fixed + eventPerRecord*int64(len(b.Payloads)+1) + int64(size) + int64(r.n)
		if len(b.Payloads) > 0 && (size+int(r.n) > DefaultHistoryBatchBytes || framed > limit) {
			break
		}
		add(r)
		size += int(r.n)
		last = r
		i++
	}
	if oneSeg {
		b.span = wireSpan(first, last)
	}
	return b
}

// wholePage reports whether segment g goes out as one history page from
// its first record: when it holds at least a quarter of a page (in
// records or bytes; smaller batches are gathered) and at most
// maxWholePage records, its frame fits the frame limit, and the reader's
// modifiers for it are its frame's (Batch.Mods). (A segment is appended
// whole, so one that starts before the end of a reader's history ends
// before it.)
func (sh *shard) wholePage(g *segment, offered felix.Flags) bool {
	if g.n < DefaultHistoryBatch/4 && len(g.wire)-int(g.head) < DefaultHistoryBatchBytes/4 {
		return false
	}
	if g.n > maxWholePage || int64(len(g.wire)-felix.HeaderLen) > sh.st.e.maxFrame() {
		return false
	}
	// A history page has offsets (ring sequence numbers when ephemeral)
	// and, when durable, timestamps.
	return eventMods(offered, true, 0, g.publisher, sh.st.cfg.Durable) == g.mods
}

// ReadRecord is one record returned by Read.
type ReadRecord struct {
	Offset    uint64
	Payload   []byte
	Publisher string
	Timestamp uint64 // µs since the epoch
}

// Read returns up to limit records of a durable shard from offset from
// (stream_read), and the offset where the next page starts. A from below
// the retained range is a *CursorError too_old; above the tail in_future.
func (e *Engine) Read(t Topic, shardIdx uint32, from uint64, limit int) ([]ReadRecord, uint64, error) {
	sh, err := e.shard(t, shardIdx)
	if err != nil {
		return nil, 0, err
	}
	if !sh.st.cfg.Durable {
		return nil, 0, errorf(felix.CodeInvalidRequest, "stream has no history (ephemeral)")
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if from < sh.base {
		return nil, 0, &CursorError{Reason: CursorTooOld, Requested: from, Available: sh.base}
	}
	if from > sh.next {
		return nil, 0, &CursorError{Reason: CursorInFuture, Requested: from, Available: sh.next}
	}
	var out []ReadRecord
	for off := from; off < sh.next && len(out) < limit; off++ {
		r := sh.recs[sh.head+int(off-sh.base)]
		out = append(out, ReadRecord{Offset: off, Payload: r.payload(), Publisher: r.seg.publisher, Timestamp: r.seg.ts})
	}
	return out, from + uint64(len(out)), nil
}

// Tail returns the oldest retained offset and the tail of a shard.
func (e *Engine) Tail(t Topic, shardIdx uint32) (oldest, tail uint64, err error) {
	sh, err := e.shard(t, shardIdx)
	if err != nil {
		return 0, 0, err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	oldest, tail = sh.bounds()
	return oldest, tail, nil
}

func (e *Engine) shard(t Topic, idx uint32) (*shard, error) {
	s, err := e.stream(t)
	if err != nil {
		return nil, err
	}
	if int(idx) >= len(s.shards) {
		return nil, errorf(felix.CodeInvalidRequest, "stream "+t.Stream+" has no shard "+strconv.FormatUint(uint64(idx), 10))
	}
	return s.shards[idx], nil
}
