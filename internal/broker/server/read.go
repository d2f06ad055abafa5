package server

import (
	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/engine"
)

// Stream read page limits.
const (
	maxReadRecords = 1000
	maxReadBytes   = 4 << 20
)

// streamRead answers stream_read from a durable shard's log.
func (h *handler) streamRead(m *felix.StreamRead) bool {
	if why := h.deny(m.TenantID, PermSubscribe); why != "" {
		return h.refuse(felix.CodeForbidden, why)
	}
	limit := maxReadRecords
	if m.MaxRecords > 0 {
		limit = min(limit, int(m.MaxRecords))
	}
	byteLimit := uint64(maxReadBytes)
	if m.MaxBytes > 0 {
		byteLimit = min(byteLimit, m.MaxBytes)
	}
	t := engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
	if p := h.placeRead(t, m.Shard); !p.Local || p.Refuse != nil {
		return h.redirect(p)
	}
	recs, _, err := h.s.eng.Read(t, m.Shard, m.From, limit)
	if err != nil {
		return h.write(errorMessage(err))
	}
	ans := &felix.StreamRecords{NextOffset: m.From, RequestID: m.RequestID}
	size := uint64(0)
	// The answer must fit the frame limit: payloads grow by a third in
	// base64, so a page holds fewer bytes than the records' own size.
	frameLimit := h.s.eng.MaxFrame() // defaulted: a shared engine's config may leave it 0
	encoded := int64(engine.StreamReadPageFixed)
	for _, r := range recs {
		if m.End.Set && r.Offset >= m.End.V {
			break
		}
		rec := engine.StreamReadRecordMax(len(r.Payload), r.Publisher)
		if len(ans.Records) > 0 && (size+uint64(len(r.Payload)) > byteLimit || encoded+rec > frameLimit) {
			break
		}
		size += uint64(len(r.Payload))
		encoded += rec
		sr := felix.StreamRecord{Offset: r.Offset, Payload: r.Payload, TimestampMicros: r.Timestamp}
		if r.Publisher != "" {
			sr.Publisher = felix.Some(r.Publisher)
		}
		ans.Records = append(ans.Records, sr)
		ans.NextOffset = r.Offset + 1
	}
	return h.write(ans)
}
