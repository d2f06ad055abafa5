package conn

import (
	"context"
	"io"
	"iter"
	"time"

	"github.com/flxproto/felix"
)

// CacheEvent is one change delivered on a cache watch.
type CacheEvent struct {
	Key string
	// Value is the new value; Deleted reports a delete (Value nil).
	Value   []byte
	Deleted bool
	// Offset is the cache-log offset of the change.
	Offset uint64
	// ExpiresAt is the entry's expiry, zero for none (and for deletes).
	ExpiresAt time.Time
}

func cacheEventFrom(m *felix.CacheEvent) CacheEvent {
	ev := CacheEvent{Key: m.Key, Value: m.Value.V, Deleted: !m.Value.Set, Offset: m.Offset}
	if m.ExpiresAtMillis != 0 && m.ExpiresAtMillis <= 1<<62 {
		ev.ExpiresAt = time.UnixMilli(int64(m.ExpiresAtMillis))
	}
	return ev
}

// WatchOptions selects what a cache watch follows: exactly one of Key and
// Prefix must be set.
type WatchOptions struct {
	// Key watches one key.
	Key felix.Opt[string]
	// Prefix watches every key with the prefix ("" = every key of the shard).
	Prefix felix.Opt[string]
	// Shard selects the shard of a prefix watch (absent = 0).
	Shard felix.Opt[uint32]
	// FromOffset resumes from a cache-log offset (absent = live only).
	FromOffset felix.Opt[uint64]
	// Retained first replays the current values (FeatureCacheWatchRetained;
	// not together with FromOffset).
	Retained bool
}

// Watch delivers the changes of one cache watch. Next and All are not safe
// for concurrent use; Close may be called from any goroutine.
type Watch struct {
	es   *eventSub
	info *felix.CacheWatchStarted
}

// Info returns the broker's cache_watch_started answer.
func (w *Watch) Info() *felix.CacheWatchStarted { return w.info }

// Next returns the next change: io.EOF at a clean end, *felix.LaggedError
// (cache_watch_lagged), *felix.ShardMovedError or *felix.BrokerError for terminal
// frames, an error matching ErrBrokerShutdown when the broker closed the
// connection before Next read the end of the stream (see
// Subscription.Next), ErrClosed after Close.
func (w *Watch) Next(ctx context.Context) (CacheEvent, error) {
	for {
		if len(w.es.cevents) > 0 {
			ev := w.es.cevents[0]
			w.es.cevents = w.es.cevents[1:]
			return ev, nil
		}
		if err := w.es.fill(ctx); err != nil {
			return CacheEvent{}, err
		}
	}
}

// All iterates over the changes like Subscription.All.
func (w *Watch) All(ctx context.Context) iter.Seq2[CacheEvent, error] {
	return func(yield func(CacheEvent, error) bool) {
		for {
			ev, err := w.Next(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(CacheEvent{}, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// Close ends the watch; it is idempotent.
func (w *Watch) Close() error {
	w.es.close()
	return nil
}

// CacheWatch starts a watch (FeatureCacheWatch; Retained also needs
// FeatureCacheWatchRetained) on a stream of its own: auth, cache_watch,
// FIN, then cache_watch_started and the event stream matched by its hello.
func (c *Client) CacheWatch(ctx context.Context, ref felix.CacheRef, o WatchOptions) (*Watch, error) {
	if o.Key.Set == o.Prefix.Set {
		return nil, &felix.Error{Class: felix.ErrInvalidValue, Layout: "cache_watch", Field: "key", Offset: -1, Detail: "exactly one of Key and Prefix"}
	}
	cs, err := c.openStream(ctx)
	if err != nil {
		return nil, err
	}
	m := &felix.CacheWatch{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: o.Key, Prefix: o.Prefix,
		Shard: o.Shard, FromOffset: o.FromOffset, Retained: o.Retained}
	if what := cs.caps.Unadvertised(m); what != "" { // the request table's gates
		cs.abort()
		return nil, notAdvertised(what)
	}
	ans, err := cs.oneShot(ctx, m)
	if err != nil {
		return nil, err
	}
	started, ok := ans.(*felix.CacheWatchStarted)
	if !ok {
		return nil, answerError(ans, 0)
	}
	es, err := c.router.claim(ctx, started.SubscriptionID)
	if err != nil {
		return nil, err
	}
	return &Watch{es: c.startEventSub(es, true), info: started}, nil
}
