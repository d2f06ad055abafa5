package client

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"
)

// fanIn merges the items of one iterator per shard into one channel: the
// mechanism under ShardedSubscription and ShardedWatch. Order holds
// within a shard, not across shards; a shard that ends with an error is
// reported once (a *ShardLostError) while the others go on.
type fanIn[E any] struct {
	ch     chan fanItem[E]
	live   int
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type fanItem[E any] struct {
	shard uint32
	ev    E
	err   error // set on the shard's last item
}

// newFanIn returns a fan-in of n shards buffering up to buffer items
// ahead of its consumer.
func newFanIn[E any](n, buffer int) *fanIn[E] {
	f := &fanIn[E]{ch: make(chan fanItem[E], buffer+n), live: n}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	return f
}

// lost reports a shard that never started (before any start call).
func (f *fanIn[E]) lost(shard uint32, err error) {
	f.ch <- fanItem[E]{shard: shard, err: err}
}

// start pumps one shard's items until next fails; onEnd, when set, is
// called with a shard's end other than io.EOF (not after stop).
func (f *fanIn[E]) start(shard uint32, next func(context.Context) (E, error), onEnd func(error)) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			ev, err := next(f.ctx)
			if err != nil {
				if f.ctx.Err() != nil {
					return
				}
				if err != io.EOF && onEnd != nil {
					onEnd(err)
				}
				select {
				case f.ch <- fanItem[E]{shard: shard, err: err}:
				case <-f.ctx.Done():
				}
				return
			}
			select {
			case f.ch <- fanItem[E]{shard: shard, ev: ev}:
			case <-f.ctx.Done():
				return
			}
		}
	}()
}

// next returns the next item of any shard, a *ShardLostError when a shard
// ended with an error, io.EOF once every shard ended, ctx's error.
func (f *fanIn[E]) next(ctx context.Context) (uint32, E, error) {
	var zero E
	for {
		if f.live == 0 {
			return 0, zero, io.EOF
		}
		select {
		case it := <-f.ch:
			if it.err != nil {
				f.live--
				if it.err == io.EOF {
					continue
				}
				return it.shard, zero, &ShardLostError{Shard: it.shard, Err: it.err}
			}
			return it.shard, it.ev, nil
		case <-ctx.Done():
			return 0, zero, ctx.Err()
		}
	}
}

// stop ends every pump and waits for them.
func (f *fanIn[E]) stop() {
	f.cancel()
	f.wg.Wait()
}

// allShards iterates over next until io.EOF: a *ShardLostError is yielded
// and iteration goes on; any other error is yielded and ends it.
func allShards[E any](ctx context.Context, next func(context.Context) (E, error)) iter.Seq2[E, error] {
	return func(yield func(E, error) bool) {
		for {
			ev, err := next(ctx)
			if err == io.EOF {
				return
			}
			if !yield(ev, err) {
				return
			}
			var lost *ShardLostError
			if err != nil && !errors.As(err, &lost) {
				return
			}
		}
	}
}
