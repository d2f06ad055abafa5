package client

import (
	"context"
	"log/slog"
	"time"

	"github.com/flxproto/felix/internal/fanout"
)

// NoticeKind says what a Notice reports.
type NoticeKind uint8

// Notice kinds.
const (
	// NoticeConnected: a connection to Addr was established.
	NoticeConnected NoticeKind = iota + 1
	// NoticeDisconnected: the connection to Addr was lost (Err says why).
	NoticeDisconnected
	// NoticeDialFailed: dialling Addr failed (Err); Delay is how long the
	// broker is avoided.
	NoticeDialFailed
	// NoticeDiscovered: Addr was learnt (topology, listener port or owner
	// hint; Detail says which).
	NoticeDiscovered
	// NoticeRedirect: Op was sent to Addr, which named Target as the shard
	// owner; the request goes there (Attempt counts the hops).
	NoticeRedirect
	// NoticeRetry: Op failed on Addr with a retryable error (Err) and is
	// retried after Delay (Attempt counts the retries of the call).
	NoticeRetry
	// NoticeResumed: a subscription or watch resumed on Addr at Offset after
	// Err ended its previous event stream.
	NoticeResumed
	// NoticeShardLost: a shard of a sharded subscription ended with Err
	// while the other shards keep delivering.
	NoticeShardLost
	// NoticeLagged: a subscription (Op "subscribe") or cache watch (Op
	// "cache_watch") on Addr fell too far behind and the broker ended it
	// (Err is the *felix.LaggedError; Offset is where the client resumes,
	// or would resume: the one after the last delivered record, the
	// broker's resume_from before any). A subscription resumes there
	// unless SubscribeOptions.LagAsError; a watch ends with the error.
	NoticeLagged
	// NoticeDropped: a subscription on Addr was delivered a record beyond
	// the previous one + 1 + its skipped_before: Count offsets from Offset
	// on were never delivered (Subscription.Dropped counts them).
	NoticeDropped
	// NoticeOneShard: a Subscribe of shard 0 (the default) of Stream, which
	// has Count shards, reads that one shard only: the records keyed to
	// the other shards are not delivered to it. Use SubscribeSharded to
	// read every shard. It is logged at Warn level.
	NoticeOneShard
)

var kindNames = [...]string{"", "connected", "disconnected", "dial_failed", "discovered", "redirect", "retry", "resumed", "shard_lost", "lagged", "dropped", "one_shard"}

// String returns the kind's name.
func (k NoticeKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Notice reports something the client did on its own: enough for an
// operator to tell a healthy failover from a flapping one.
type Notice struct {
	Kind NoticeKind
	// Op is the operation concerned ("publish", "subscribe", ...), if any.
	Op string
	// Addr is the broker the event happened on.
	Addr string
	// Target is the broker a redirect points to.
	Target string
	// Stream and Shard name the shard concerned, if any.
	Stream string
	Shard  uint32
	// Attempt counts redirect hops or retries of the call.
	Attempt int
	// Delay is the backoff before a retry, or how long a broker is avoided.
	Delay time.Duration
	// Offset is where a subscription or watch resumed (or, for
	// NoticeDropped, the first offset missing).
	Offset uint64
	// Count is the number of offsets missing (NoticeDropped), or the
	// stream's shard count (NoticeOneShard).
	Count uint64
	// Detail is free text (e.g. how an address was discovered).
	Detail string
	// Err is the failure that caused the event, if any.
	Err error
}

// JoinNotices returns one observer that calls each non-nil element of fns
// in order: several observers (a metrics adapter, a test's recorder, a
// logger from LogNotices) attach to one Config.OnNotice. It returns nil
// when every element is nil, and the element itself when only one is not.
func JoinNotices(fns ...func(Notice)) func(Notice) { return fanout.Join(fns...) }

// emit reports ev to the client's observers: its own counters (Stats),
// Config.OnNotice and Config.Logger, joined once at New.
func (c *Client) emit(ev Notice) { c.notify(ev) }

// LogNotices returns an observer that writes each Notice to l as one
// structured record (message "felix client", attribute "event" the kind's
// name): state changes, redirects, retries and resumes at Info,
// discoveries at Debug, a subscription reading one shard of several
// (NoticeOneShard) at Warn. A failure is attribute "err"; a resume, which
// succeeded, names what ended the previous event stream as "after".
// Config.Logger is this observer joined to
// Config.OnNotice; a nil l yields nil.
func LogNotices(l *slog.Logger) func(Notice) {
	if l == nil {
		return nil
	}
	return func(ev Notice) { logNotice(l, ev) }
}

// logNotice writes ev to l (see LogNotices).
func logNotice(l *slog.Logger, ev Notice) {
	lvl := slog.LevelInfo
	switch ev.Kind {
	case NoticeDiscovered:
		lvl = slog.LevelDebug
	case NoticeOneShard:
		lvl = slog.LevelWarn
	}
	if !l.Enabled(context.Background(), lvl) {
		return
	}
	attrs := []slog.Attr{slog.String("event", ev.Kind.String())}
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	add("op", ev.Op)
	add("addr", ev.Addr)
	add("target", ev.Target)
	add("stream", ev.Stream)
	add("detail", ev.Detail)
	if ev.Stream != "" {
		attrs = append(attrs, slog.Uint64("shard", uint64(ev.Shard)))
	}
	if ev.Attempt != 0 {
		attrs = append(attrs, slog.Int("attempt", ev.Attempt))
	}
	if ev.Delay != 0 {
		attrs = append(attrs, slog.Duration("delay", ev.Delay))
	}
	if ev.Kind == NoticeResumed || ev.Kind == NoticeLagged || ev.Kind == NoticeDropped {
		attrs = append(attrs, slog.Uint64("offset", ev.Offset))
	}
	if ev.Count != 0 {
		attrs = append(attrs, slog.Uint64("count", ev.Count))
	}
	if ev.Err != nil {
		// A resume succeeded: its Err is what ended the previous event
		// stream, not a failure of the resume.
		key := "err"
		if ev.Kind == NoticeResumed {
			key = "after"
		}
		attrs = append(attrs, slog.String(key, ev.Err.Error()))
	}
	l.LogAttrs(context.Background(), lvl, "felix client", attrs...)
}
