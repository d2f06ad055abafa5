package client

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"
	"sync/atomic"

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
// live), so nothing is missed. cache_watch_lagged stays a typed
// *felix.LaggedError for the caller to act on; it never ends quietly on a
// dead connection.
type Watch struct {
	c    *Client
	ref  CacheRef
	o    WatchOptions
	pos  resumer
	addr string
	info *felix.CacheWatchStarted

	mu     sync.Mutex
	cur    *conn.Watch
	closed atomic.Bool
	err    error
}

// CacheWatch starts a resumable watch.
func (c *Client) CacheWatch(ctx context.Context, ref CacheRef, o WatchOptions) (*Watch, error) {
	if err := c.checkCache("cache_watch", ref); err != nil {
		return nil, err
	}
	w := &Watch{c: c, ref: ref, o: o}
	// cache_watch_lagged stays an error: the cache keeps no log to resume
	// a lagged watch from without a gap.
	w.pos = resumer{c: c, op: "cache_watch", lagAsError: true,
		key: ownerKey{kind: felix.ShardKindCache, tenant: ref.TenantID, namespace: ref.Namespace, name: ref.Cache, shard: o.Shard.V}}
	if err := w.open(ctx, o, nil); err != nil {
		return nil, err
	}
	if !c.track(w) {
		w.Close()
		return nil, ErrClosed
	}
	return w, nil
}

func (w *Watch) open(ctx context.Context, o WatchOptions, cause error) error {
	k := w.pos.key
	var cw *conn.Watch
	var addr string
	err := w.c.run(ctx, call{op: "cache_watch", key: &k, safe: true}, func(ctx context.Context, cc *conn.Client, b *broker) error {
		var err error
		cw, err = cc.CacheWatch(ctx, w.ref, o)
		addr = b.addr
		return err
	})
	if err != nil {
		return err
	}
	w.mu.Lock()
	if w.closed.Load() {
		w.mu.Unlock()
		cw.Close()
		return ErrClosed
	}
	w.cur, w.addr = cw, addr
	if w.info == nil {
		w.info = cw.Info()
	}
	// Changes from here on are live: a resume before any change starts
	// here.
	w.pos.began(cw.Info().ResumeOffset, true)
	w.mu.Unlock()
	if cause != nil {
		w.c.emit(Notice{Kind: NoticeResumed, Op: "cache_watch", Addr: addr, Stream: w.ref.Cache, Offset: o.FromOffset.V, Err: cause})
	}
	return nil
}

// Info returns the broker's answer to the first watch.
func (w *Watch) Info() *felix.CacheWatchStarted { return w.info }

// Next returns the next change; see Watch for how it ends.
func (w *Watch) Next(ctx context.Context) (CacheEvent, error) {
	for {
		if w.err != nil {
			return CacheEvent{}, w.err
		}
		if w.closed.Load() {
			return CacheEvent{}, ErrClosed
		}
		w.mu.Lock()
		cur := w.cur
		w.mu.Unlock()
		if cur == nil {
			if err := w.resume(ctx, nil); err != nil {
				return CacheEvent{}, err
			}
			continue
		}
		ev, err := cur.Next(ctx)
		if err == nil {
			if !w.pos.deliver(w.addr, ev.Offset, 0) {
				continue // already delivered (replayed after a resume)
			}
			return ev, nil
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return CacheEvent{}, err
		}
		if w.closed.Load() {
			return CacheEvent{}, ErrClosed
		}
		if err := w.handleEnd(ctx, cur, err); err != nil {
			if ctx.Err() == nil {
				w.err = err
			}
			return CacheEvent{}, err
		}
	}
}

func (w *Watch) handleEnd(ctx context.Context, cur *conn.Watch, err error) error {
	cur.Close()
	w.mu.Lock()
	w.cur = nil
	addr := w.addr
	w.mu.Unlock()
	if end := w.pos.ended(ctx, addr, err); end != nil {
		return end
	}
	return w.resume(ctx, err)
}

func (w *Watch) resume(ctx context.Context, cause error) error {
	o := w.o
	o.Retained = false // the retained state was delivered already
	off, _ := w.pos.at()
	o.FromOffset = felix.Some(off)
	return w.open(ctx, o, cause)
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
	if w.closed.Swap(true) {
		return nil
	}
	w.mu.Lock()
	cur := w.cur
	w.mu.Unlock()
	if cur != nil {
		cur.Close()
	}
	w.c.untrack(w)
	return nil
}
