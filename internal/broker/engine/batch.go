package engine

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/flxproto/felix"
)

// Batch is one published batch (or one page of history) as it is delivered
// to subscribers. A Batch is immutable once built and shared by every
// subscriber of its shard; its encoded frames are cached per modifier set.
type Batch struct {
	// Shard is the shard the batch was appended to.
	Shard uint32
	// BaseOffset is the offset of Payloads[0]; meaningful only when
	// HasOffsets is true (durable streams).
	BaseOffset uint64
	// HasOffsets is true for durable streams.
	HasOffsets bool
	// Payloads are the records, in offset order. They must not be modified.
	Payloads [][]byte
	// Publisher is the principal the batch was accepted from ("" = none).
	Publisher string
	// Timestamps holds one append time (µs since the epoch) per payload,
	// or is nil when the records have no stored time (ephemeral streams).
	Timestamps []uint64
	// Skipped is the number of offsets just below BaseOffset that hold no
	// deliverable event (skipped_before); this broker never produces any,
	// so it is 0 except in tests.
	Skipped uint64

	// whole is the log segment the batch is exactly (a live batch not
	// split, a history page of one segment), whose stored frame it is for
	// a subscriber with the segment's modifiers; else nil. span is the
	// records as an event frame without timestamps carries them (u32
	// length, bytes, each), in the one segment they all lie in; nil when
	// they span segments.
	whole *segment
	span  []byte

	frames  [16]encoded  // by modIndex
	pins    atomic.Int32 // queues holding the batch, deliveries not released
	encodes *atomic.Uint64
	eng     *Engine // for queued-bytes accounting (nil: none)
	size    int64   // cost(), computed once
	acct    batchAcct
}

// encoded is one cached frame of a Batch.
type encoded struct {
	once  sync.Once
	frame []byte
	buf   *[]byte     // the pooled buffer frame lives in; nil: not pooled
	kept  atomic.Bool // handed out by Frame: never recycled
	// stored: frame is the log segment's own (Batch.whole), neither
	// pooled nor charged.
	stored bool
}

// Mods returns the subset of the offered modifier flags that applies to
// this batch (eventMods).
func (b *Batch) Mods(offered felix.Flags) felix.Flags {
	return eventMods(offered, b.HasOffsets, b.Skipped, b.Publisher, b.Timestamps != nil)
}

// eventMods returns the subset of the offered modifier flags that applies
// to records with these properties: offsets only on durable records,
// skipped only with offsets and a non-zero count, publisher only when
// there is one, timestamps only when the records have them.
func eventMods(offered felix.Flags, offsets bool, skipped uint64, publisher string, timestamps bool) felix.Flags {
	var m felix.Flags
	if offsets && offered.Has(felix.FlagEventBatchOffsets) {
		m |= felix.FlagEventBatchOffsets
		if skipped > 0 && offered.Has(felix.FlagEventBatchSkipped) {
			m |= felix.FlagEventBatchSkipped
		}
	}
	if publisher != "" && len(publisher) <= 255 && offered.Has(felix.FlagEventBatchPublisher) {
		m |= felix.FlagEventBatchPublisher
	}
	if timestamps && offered.Has(felix.FlagEventBatchTimestamps) {
		m |= felix.FlagEventBatchTimestamps
	}
	return m
}

// modIndex maps a modifier set to a slot 0..15.
func modIndex(m felix.Flags) int {
	i := 0
	if m.Has(felix.FlagEventBatchOffsets) {
		i |= 1
	}
	if m.Has(felix.FlagEventBatchSkipped) {
		i |= 2
	}
	if m.Has(felix.FlagEventBatchPublisher) {
		i |= 4
	}
	if m.Has(felix.FlagEventBatchTimestamps) {
		i |= 8
	}
	return i
}

// Frame returns the whole shared event frame (0x0004 plus the modifiers of
// Mods(offered)) for a subscriber that offered the given flags. The frame is
// encoded on first use for each distinct modifier set and then shared: the
// caller must not modify it. A frame returned by Frame stays valid for as
// long as the caller keeps it (it is never recycled); subscriptions get
// theirs through Delivery, which recycles it once released.
func (b *Batch) Frame(offered felix.Flags) []byte {
	slot := b.encode(b.Mods(offered))
	slot.kept.Store(true)
	return slot.frame
}

// encode returns the slot of modifier set m, on first use: the stored
// frame of the segment the batch is exactly when m is its modifier set,
// else encoded into a pooled buffer, with one copy of the records' bytes
// when they lie in one segment and no timestamps are written.
func (b *Batch) encode(m felix.Flags) *encoded {
	slot := &b.frames[modIndex(m)]
	slot.once.Do(func() {
		if g := b.whole; g != nil && m == g.mods {
			slot.frame, slot.stored = g.wire, true
			return
		}
		if b.encodes != nil {
			b.encodes.Add(1)
		}
		eb := felix.EventBatch{
			HasBaseOffset: m.Has(felix.FlagEventBatchOffsets), BaseOffset: b.BaseOffset,
			SkippedBefore: b.Skipped,
			HasPublisher:  m.Has(felix.FlagEventBatchPublisher), Publisher: []byte(b.Publisher),
			HasTimestamps: m.Has(felix.FlagEventBatchTimestamps), Timestamps: b.Timestamps,
			Payloads: b.Payloads,
		}
		if !eb.HasBaseOffset {
			eb.SkippedBefore = 0
		}
		n := eb.FrameLen(m)
		var dst []byte
		if slot.buf = getFrameBuf(n); slot.buf != nil {
			dst = (*slot.buf)[:0]
		} else {
			dst = make([]byte, 0, n)
		}
		// Mods only selects sections the batch really has (publisher at
		// most 255 bytes, one timestamp per payload), and payloads come
		// from frames far below 4 GiB, so encoding cannot fail.
		if b.span != nil && !eb.HasTimestamps {
			slot.frame, _ = felix.AppendEventBatchHead(dst, &eb, m, len(b.Payloads), len(b.span))
			slot.frame = append(slot.frame, b.span...)
		} else {
			slot.frame, _ = felix.AppendEventBatch(dst, &eb, m)
		}
		b.acct.framed(b.eng, len(slot.frame))
	})
	return slot
}

// reusable returns b when nothing holds it any more (every delivery of it
// released, no frame handed out by Frame), so that it may be refilled;
// nil otherwise. b may be nil. Only the goroutine that delivered b may
// call it (a subscription's own history page).
func (b *Batch) reusable() *Batch {
	if b == nil || b.pins.Load() > 0 {
		return nil
	}
	for i := range b.frames {
		if b.frames[i].kept.Load() {
			return nil
		}
	}
	return b
}

// Pins: a live batch is pinned by its publisher while it is offered
// (offerAll), by each queue holding it and by each delivery not released;
// a history page by its one delivery (a queue's pin becomes its
// delivery's when the batch is dequeued). Every pin is taken while another is
// held, or by the only goroutine that knows the batch, so once the count
// drops to zero no one holds the batch: its frames go back to their pools.

// pin keeps b's frames from being recycled (a queue took b).
func (b *Batch) pin() { b.pins.Add(1) }

// unpin drops a pin; the last one gives b's pooled frames back and drops
// the others (those Frame did not hand out), to be encoded again if b is
// delivered later or refilled (a history page).
func (b *Batch) unpin() {
	if b.pins.Add(-1) > 0 {
		return
	}
	for i := range b.frames {
		slot := &b.frames[i]
		if slot.frame == nil || slot.kept.Load() {
			continue
		}
		if !slot.stored {
			b.acct.framed(b.eng, -len(slot.frame))
		}
		if slot.buf != nil {
			putFrameBuf(slot.buf, slot.frame)
		}
		slot.frame, slot.buf, slot.stored = nil, nil, false
		slot.once = sync.Once{}
	}
}

// Event frames are encoded into buffers pooled by size class: powers of
// two from 512 bytes (smaller frames share that class) to 16 MiB (the default
// frame limit; larger frames are allocated and left to the collector). A
// frame's buffer goes back to its pool when the last queue and the last
// delivery holding the batch let go (Batch.unpin), so a steady fan-out
// encodes without allocating or zeroing.
const (
	minFrameClass = 9
	maxFrameClass = 24
)

var framePools [maxFrameClass - minFrameClass + 1]sync.Pool

// frameClass returns the class whose buffers hold n bytes, and false when
// n is over the largest class.
func frameClass(n int) (int, bool) {
	c := max(bits.Len(uint(n-1)), minFrameClass)
	return c, c <= maxFrameClass
}

// getFrameBuf returns an empty pooled buffer of at least n bytes, or nil
// when n is over the largest class.
func getFrameBuf(n int) *[]byte {
	c, ok := frameClass(n)
	if !ok {
		return nil
	}
	if p, _ := framePools[c-minFrameClass].Get().(*[]byte); p != nil {
		return p
	}
	buf := make([]byte, 0, 1<<c)
	return &buf
}

// putFrameBuf gives frame, encoded into p, back to p's pool (unless the
// encoding outgrew the pooled buffer).
func putFrameBuf(p *[]byte, frame []byte) {
	c, _ := frameClass(cap(frame))
	if cap(frame) != 1<<c {
		return
	}
	*p = frame[:0]
	framePools[c-minFrameClass].Put(p)
}

// Len returns the number of records in the batch.
func (b *Batch) Len() int { return len(b.Payloads) }

// EndOffset returns the offset just after the batch's last record.
func (b *Batch) EndOffset() uint64 { return b.BaseOffset + uint64(len(b.Payloads)) }
