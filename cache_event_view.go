package felix

import "unsafe"

// CacheEventView is a "cache_event" message decoded by ParseCacheEvent:
// the fields of CacheEvent, with Key and Value in the caller's buffer
// rather than in allocations of their own.
type CacheEventView struct {
	// Key is the changed key.
	Key []byte
	// Value is the new value; absent (or null) for a delete.
	Value Opt[[]byte]
	// Offset is the cache-log offset of the change.
	Offset uint64
	// ExpiresAtMillis is the entry's absolute expiry in Unix ms, 0 for
	// none (and when the member is missing).
	ExpiresAtMillis uint64
}

// ParseCacheEvent decodes payload, a JSON control payload, as a
// "cache_event" message with the rules of DecodeMessage (the same
// payloads are accepted, with the same errors), appending the decoded key
// and value to dst and returning the extended buffer: the view's Key and
// Value alias it, not payload, which is only read. A payload of another
// type is an *Error of class ErrInvalidJSON on "type" (decode it with
// DecodeMessage).
//
// It is DecodeMessage for the one message a cache watch delivers at data
// rates: the decoded bytes never outnumber len(payload), so a dst with
// that much spare capacity is never grown and nothing is allocated (a
// watch reads every change into recycled buffers this way).
func ParseCacheEvent(dst, payload []byte) (CacheEventView, []byte, error) {
	d := jsonDecoder{buf: payload, arena: dst, appendTo: true}
	typ, i0 := d.head()
	if d.err == nil && string(typ) != "cache_event" {
		return CacheEventView{}, dst, &Error{Class: ErrInvalidJSON, Layout: jsonLayout, Field: "type", Offset: -1,
			Detail: "message type " + string(typ) + ", want cache_event"}
	}
	var m CacheEvent
	m.decodeJSON(&d, i0)
	d.end()
	if d.err != nil {
		return CacheEventView{}, dst, d.err
	}
	// m.Key is a string over d.arena (alloc in appendTo mode): handed back
	// as the bytes it is, it never leaves this call as a string.
	return CacheEventView{Key: unsafe.Slice(unsafe.StringData(m.Key), len(m.Key)), Value: m.Value,
		Offset: m.Offset, ExpiresAtMillis: m.ExpiresAtMillis}, d.arena, nil
}
