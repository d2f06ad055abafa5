package engine

import (
	"encoding/base64"
	"strconv"

	"github.com/flxproto/felix"
)

// Every frame the broker derives from a record must fit the frame limit
// (Config.MaxFrameBytes), whatever modifiers the reader negotiated: event
// frames are split (offerSplit), and a record that could never be
// delivered is refused at publish time, before anything is written.

// Worst-case sizes of the parts of a shared event frame (docs/binary.md §8)
// with every modifier: base offset, skipped_before, publisher, and one
// timestamp per record.
const (
	eventFixedMax   = 8 + 8 + 4 // base offset, skipped_before, count
	eventPerRecord  = 8 + 4     // timestamp, length
	jsonPageFixed   = 256       // stream_records envelope, next_offset, request_id
	jsonRecordFixed = 128       // {"offset":…,"payload":"","timestamp_micros":…,"publisher":""},
	jsonEscapeMax   = 6         // a string byte may become \u00XX
)

// MaxFrame returns the frame limit every derived frame must fit:
// Config.MaxFrameBytes, or felix.DefaultMaxFrameBytes when that is 0.
func (e *Engine) MaxFrame() int64 { return e.maxFrame() }

func (e *Engine) maxFrame() int64 {
	if e.cfg.MaxFrameBytes == 0 {
		return felix.DefaultMaxFrameBytes
	}
	return int64(e.cfg.MaxFrameBytes)
}

// eventPublisherLen is the publisher section of an event frame for pub
// (Batch.Mods only sends publishers of 1 to 255 bytes).
func eventPublisherLen(pub string) int64 {
	if pub == "" || len(pub) > 255 {
		return 0
	}
	return 1 + int64(len(pub))
}

// eventFrameMax is the largest payload of an event frame carrying these
// records, over every modifier set.
func eventFrameMax(pub string, payloads [][]byte) int64 {
	n := eventFixedMax + eventPublisherLen(pub)
	for _, p := range payloads {
		n += eventPerRecord + int64(len(p))
	}
	return n
}

// StreamReadRecordMax is an upper bound of one record's share of a
// stream_records answer: the base64 payload, its numbers and its escaped
// publisher.
func StreamReadRecordMax(payloadLen int, publisher string) int64 {
	return int64(base64.StdEncoding.EncodedLen(payloadLen)) + jsonRecordFixed + jsonEscapeMax*int64(len(publisher))
}

// StreamReadPageFixed is the part of a stream_records answer that does not
// depend on its records.
const StreamReadPageFixed = jsonPageFixed

// checkDeliverable refuses a batch holding a record that could never be
// delivered within the frame limit: in an event frame with every
// modifier, or (durable streams) alone in a stream_read answer.
func (e *Engine) checkDeliverable(req *PublishRequest, durable bool) error {
	limit := e.maxFrame()
	largest := MaxRecordBytes(limit, req.Publisher, durable)
	for i, p := range req.Payloads {
		if int64(len(p)) > largest {
			why := "an event frame"
			if durable {
				why = "a stream_read answer, base64-encoded,"
			}
			return &Error{Code: felix.CodeInvalidRequest, Retry: felix.RetryFatal,
				Message: "record " + strconv.Itoa(i) + " of " + strconv.Itoa(len(p)) +
					" bytes is over the largest record this stream takes, " + strconv.FormatInt(largest, 10) +
					" bytes (every record must fit " + why + " within the frame limit of " + strconv.FormatInt(limit, 10) + " bytes)"}
		}
	}
	return nil
}

// MaxRecordBytes is the largest record a stream takes from publisher
// under the frame limit: one that fits an event frame with every
// modifier and, on a durable stream, a stream_read answer on its own
// (its payload base64-encoded in JSON: about 3/4 of the limit,
// 12,582,615 bytes at the default 16 MiB for a 2-byte publisher).
func MaxRecordBytes(limit int64, publisher string, durable bool) int64 {
	n := limit - (eventFixedMax + eventPublisherLen(publisher) + eventPerRecord)
	if durable {
		avail := limit - StreamReadPageFixed - jsonRecordFixed - jsonEscapeMax*int64(len(publisher))
		n = min(n, avail/4*3) // base64: 4 bytes per 3
	}
	return max(n, 0)
}

// offerSplit hands b to the shard's subscribers, split into batches whose
// event frames fit the frame limit with every modifier. The caller holds
// sh.mu.
func (sh *shard) offerSplit(b *Batch) {
	limit := sh.st.e.maxFrame()
	if eventFrameMax(b.Publisher, b.Payloads) <= limit {
		sh.offerAll(b)
		return
	}
	fixed := eventFixedMax + eventPublisherLen(b.Publisher)
	start, size := 0, fixed
	w0, w := 0, 0 // the part's records in b.span: w0..w
	flush := func(end int) {
		part := &Batch{Shard: b.Shard, BaseOffset: b.BaseOffset + uint64(start), HasOffsets: b.HasOffsets,
			Payloads: b.Payloads[start:end:end], Publisher: b.Publisher, encodes: b.encodes, eng: b.eng}
		if b.Timestamps != nil {
			part.Timestamps = b.Timestamps[start:end:end]
		}
		if b.span != nil {
			part.span = b.span[w0:w:w]
		}
		sh.offerAll(part)
		start, size, w0 = end, fixed, w
	}
	for i, p := range b.Payloads {
		rec := eventPerRecord + int64(len(p))
		if i > start && size+rec > limit {
			flush(i)
		}
		size += rec
		w += 4 + len(p)
	}
	flush(len(b.Payloads))
}

// offerAll hands b to every subscriber of the shard, pinned meanwhile so
// that a subscriber done with it before the last one took it does not
// recycle its frame (which would be encoded again). The caller holds sh.mu.
func (sh *shard) offerAll(b *Batch) {
	b.pin()
	defer b.unpin()
	for s := range sh.subs {
		s.offer(b)
	}
}

// checkCacheValue refuses a cache write whose value could not be sent
// back within the frame limit (cache_value to a reader, cache_event to a
// watcher: base64 value, echoed names and key, numbers).
func (e *Engine) checkCacheValue(r CacheRef, key string, value []byte) error {
	names := int64(len(r.Tenant) + len(r.Namespace) + len(r.Cache) + len(key))
	need := int64(base64.StdEncoding.EncodedLen(len(value))) + jsonEscapeMax*names + jsonPageFixed
	if limit := e.maxFrame(); need > limit {
		return &Error{Code: felix.CodeInvalidRequest, Retry: felix.RetryFatal,
			Message: "cache value of " + strconv.Itoa(len(value)) + " bytes could never be read back within the frame limit of " +
				strconv.FormatInt(limit, 10) + " bytes"}
	}
	return nil
}
