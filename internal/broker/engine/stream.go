package engine

import (
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

type record struct {
	payload   []byte
	publisher string
	ts        uint64
}

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
	bytes int64
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
	// Copy the payloads into one allocation before taking the lock.
	total := 0
	for _, p := range req.Payloads {
		total += len(p)
	}
	buf := make([]byte, 0, total)
	payloads := make([][]byte, len(req.Payloads))
	for i, p := range req.Payloads {
		buf = append(buf, p...)
		payloads[i] = buf[len(buf)-len(p) : len(buf) : len(buf)]
	}
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
	b := &Batch{Shard: sh.index, BaseOffset: sh.next, HasOffsets: durable, Payloads: payloads,
		Publisher: req.Publisher, encodes: &e.st.eventEncodes, eng: e}
	// Durable shards log every record with its append time; ephemeral
	// shards keep them in their replay ring without times.
	var ts uint64
	if durable {
		ts = e.nowMicros()
		b.Timestamps = make([]uint64, len(payloads))
		for i := range b.Timestamps {
			b.Timestamps[i] = ts
		}
	}
	for _, p := range payloads {
		sh.recs = append(sh.recs, record{payload: p, publisher: req.Publisher, ts: ts})
		sh.bytes += int64(len(p))
	}
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

// history returns up to DefaultHistoryBatch records (with offsets: ring
// sequence numbers on an ephemeral shard) from offset from
// (at least one record unless the range is empty), stopping before end, at
// a publisher change, or near DefaultHistoryBatchBytes, filled into reuse
// when it is not nil (a batch nobody holds any more). The caller holds
// sh.mu. from must be ≥ sh.base.
func (sh *shard) history(from, end uint64, reuse *Batch) *Batch {
	if from >= end || from >= sh.next {
		return nil
	}
	i := sh.head + int(from-sh.base)
	first := sh.recs[i]
	b := reuse
	if b == nil {
		b = &Batch{}
	}
	b.Shard, b.BaseOffset, b.HasOffsets, b.Publisher = sh.index, from, true, first.publisher
	clear(b.Payloads) // the records of its last page are not kept alive
	b.Payloads, b.Timestamps, b.Skipped, b.size = b.Payloads[:0], b.Timestamps[:0], 0, 0
	b.encodes = &sh.st.e.st.eventEncodes
	if !sh.st.cfg.Durable {
		b.Timestamps = nil
	}
	size := 0
	for off := from; off < end && off < sh.next && len(b.Payloads) < DefaultHistoryBatch; off++ {
		r := sh.recs[i]
		if r.publisher != first.publisher || (len(b.Payloads) > 0 && size+len(r.payload) > DefaultHistoryBatchBytes) {
			break
		}
		b.Payloads = append(b.Payloads, r.payload)
		if sh.st.cfg.Durable { // ring records have no stored time
			b.Timestamps = append(b.Timestamps, r.ts)
		}
		size += len(r.payload)
		i++
	}
	return b
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
		out = append(out, ReadRecord{Offset: off, Payload: r.payload, Publisher: r.publisher, Timestamp: r.ts})
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
