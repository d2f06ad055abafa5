package engine

import (
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

	frames  [16]encoded
	encodes *atomic.Uint64
	eng     *Engine // for queued-bytes accounting (nil: none)
	size    int64   // cost(), computed once
	acct    batchAcct
}

type encoded struct {
	once  sync.Once
	frame []byte
}

// Mods returns the subset of the offered modifier flags that applies to
// this batch: offsets only on durable batches, skipped only with offsets
// and a non-zero count, publisher only when there is one, timestamps only
// when the records have them.
func (b *Batch) Mods(offered felix.Flags) felix.Flags {
	var m felix.Flags
	if b.HasOffsets && offered.Has(felix.FlagEventBatchOffsets) {
		m |= felix.FlagEventBatchOffsets
		if b.Skipped > 0 && offered.Has(felix.FlagEventBatchSkipped) {
			m |= felix.FlagEventBatchSkipped
		}
	}
	if b.Publisher != "" && len(b.Publisher) <= 255 && offered.Has(felix.FlagEventBatchPublisher) {
		m |= felix.FlagEventBatchPublisher
	}
	if b.Timestamps != nil && offered.Has(felix.FlagEventBatchTimestamps) {
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
// caller must not modify it.
func (b *Batch) Frame(offered felix.Flags) []byte {
	m := b.Mods(offered)
	slot := &b.frames[modIndex(m)]
	slot.once.Do(func() {
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
		// Mods only selects sections the batch really has (publisher at
		// most 255 bytes, one timestamp per payload), and payloads come
		// from frames far below 4 GiB, so encoding cannot fail.
		slot.frame, _ = felix.AppendEventBatch(make([]byte, 0, eb.FrameLen(m)), &eb, m)
		if b.encodes != nil {
			b.encodes.Add(1)
		}
		b.acct.framed(b.eng, len(slot.frame))
	})
	return slot.frame
}

// Len returns the number of records in the batch.
func (b *Batch) Len() int { return len(b.Payloads) }

// EndOffset returns the offset just after the batch's last record.
func (b *Batch) EndOffset() uint64 { return b.BaseOffset + uint64(len(b.Payloads)) }
