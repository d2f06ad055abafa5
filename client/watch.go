package client

import (
	"context"
	"iter"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// CacheEvent is one change seen by a cache watch.
type CacheEvent = conn.CacheEvent

// WatchOptions selects what a watch follows (exactly one of Key and
// Prefix), as conn.WatchOptions.
type WatchOptions = conn.WatchOptions

// Watch is a resumable cache watch: after a lost connection, a broker
// shutdown or a moved shard it re-watches from the offset after the last
// change it delivered (or, before any, from where the first watch went
// live), so nothing is missed, and never asks for retained values again
// (the broker refuses them together with from_offset). It is the
// Subscription's state machine over the cache log: the same ends, waits
// and bound on resumes, except that cache_watch_lagged stays a typed
// *felix.LaggedError for the caller to act on and gaps between the
// (sparse) cache-log offsets are not drops; it never ends quietly on a
// dead connection.
type Watch struct {
	st   stream[CacheEvent, *conn.Watch]
	ref  CacheRef
	o    WatchOptions
	info *felix.CacheWatchStarted // the first answer, under st.mu
}

// CacheWatch starts a resumable watch.
func (c *Client) CacheWatch(ctx context.Context, ref CacheRef, o WatchOptions) (*Watch, error) {
	if err := c.checkCache("cache_watch", ref); err != nil {
		return nil, err
	}
	w := &Watch{ref: ref, o: o}
	// cache_watch_lagged stays an error: the cache keeps no log to resume
	// a lagged watch from without a gap.
	w.st = stream[CacheEvent, *conn.Watch]{c: c, prepare: w.prepare, offset: changeOffset,
		pos: resumer{c: c, op: "cache_watch", lagAsError: true,
			key: ownerKey{kind: felix.ShardKindCache, tenant: ref.TenantID, namespace: ref.Namespace, name: ref.Cache, shard: o.Shard.V}},
		opened: func(cw *conn.Watch) (uint64, bool) {
			if w.info == nil {
				w.info = cw.Info()
			}
			// Changes from here on are live: a resume before any change
			// starts here.
			return cw.Info().ResumeOffset, true
		}}
	if err := w.st.begin(ctx, w); err != nil {
		return nil, err
	}
	return w, nil
}

// prepare returns how to watch: as asked the first time, then from the
// resumer's offset and without retained values (they were delivered
// already, and the broker refuses retained together with from_offset).
func (w *Watch) prepare(resume bool, _ error) (func(context.Context, *conn.Client) (*conn.Watch, error), error) {
	o := w.o
	if resume {
		off, _ := w.st.pos.at()
		o.Retained, o.FromOffset = false, felix.Some(off)
	}
	return func(ctx context.Context, cc *conn.Client) (*conn.Watch, error) { return cc.CacheWatch(ctx, w.ref, o) }, nil
}

// changeOffset returns a change's cache-log offset (sparse: no drops are
// told from its gaps).
func changeOffset(ev CacheEvent) (off, skipped uint64, ok bool) { return ev.Offset, 0, true }

// Info returns the broker's answer to the first watch.
func (w *Watch) Info() *felix.CacheWatchStarted {
	w.st.mu.Lock()
	defer w.st.mu.Unlock()
	return w.info
}

// Next returns the next change; see Watch for how it ends.
func (w *Watch) Next(ctx context.Context) (CacheEvent, error) { return w.st.next(ctx) }

// All iterates over the changes like Subscription.All.
func (w *Watch) All(ctx context.Context) iter.Seq2[CacheEvent, error] { return all(ctx, w.Next, nil) }

// Close ends the watch; it is idempotent.
func (w *Watch) Close() error {
	return w.st.end(w)
}

// where returns the broker the current event stream is on.
func (x *Watch) where() string { return x.st.where() }
