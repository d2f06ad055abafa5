package client

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"
)

// shardIter is one shard's resumable iterator (*Subscription, *Watch).
type shardIter[E any] interface {
	Next(ctx context.Context) (E, error)
	Close() error
	// where returns the broker its event stream is on.
	where() string
}

// shardSet is the mechanism under ShardedSubscription and ShardedWatch:
// one iterator per shard merged into one channel (order holds within a
// shard, not across shards), the offset after the last item of each
// shard, and a shard that ends with an error reported once (a
// *ShardLostError) while the others go on.
type shardSet[E any, S shardIter[E]] struct {
	c       *Client
	op      string // the notices' Op and Stream
	name    string
	shards  []S
	started []bool
	ch      chan fanItem[E]
	live    int
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	offsets map[uint32]uint64
	once    sync.Once

	// release, when set, is told of the item next returned last when the
	// consumer calls next again (it moved past it).
	release func(E)
	prev    E
	hasPrev bool
}

type fanItem[E any] struct {
	shard uint32
	ev    E
	err   error // set on the shard's last item
}

// start starts every one of n shards with open (which also returns the
// shard's starting offset, when it has one), buffering up to buffer
// items ahead of the consumer (0: DefaultShardEvents), and has the client
// track x (the sharded iterator) until it closes. A shard that cannot
// start is lost from the outset (a NoticeShardLost, and Next reports it)
// while the others deliver; when none can start, or ctx ends or the
// client closes, the error is returned and every started shard closed. A
// started shard that ends with an error other than io.EOF is lost the
// same way.
func (ss *shardSet[E, S]) start(ctx context.Context, c *Client, x closer, op, name string, n uint32, buffer int,
	open func(shard uint32) (s S, start uint64, hasStart bool, err error)) error {
	if buffer <= 0 {
		buffer = DefaultShardEvents
	}
	ss.c, ss.live, ss.op, ss.name = c, int(n), op, name
	ss.shards, ss.started = make([]S, n), make([]bool, n)
	ss.ch = make(chan fanItem[E], buffer+int(n))
	ss.offsets = make(map[uint32]uint64, n)
	ss.ctx, ss.cancel = context.WithCancel(context.Background())
	failed := make(map[uint32]error)
	for i := range n {
		s, start, hasStart, err := open(i)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrClosed) || len(failed) == int(n)-1 {
				ss.close()
				return err
			}
			failed[i] = err
			continue
		}
		ss.shards[i], ss.started[i] = s, true
		if hasStart {
			ss.offsets[i] = start
		}
	}
	for i := range n {
		if !ss.started[i] {
			ss.lost(i, "", failed[i])
			ss.ch <- fanItem[E]{shard: i, err: failed[i]}
			continue
		}
		ss.pump(i, ss.shards[i])
	}
	if !c.track(x) {
		ss.close()
		return ErrClosed
	}
	return nil
}

// lost reports a shard that ended with err (on addr, when known).
func (ss *shardSet[E, S]) lost(shard uint32, addr string, err error) {
	ss.c.emit(Notice{Kind: NoticeShardLost, Op: ss.op, Addr: addr, Stream: ss.name, Shard: shard, Err: err})
}

// end closes every shard and the client stops tracking x.
func (ss *shardSet[E, S]) end(x closer) error {
	ss.close()
	ss.c.untrack(x)
	return nil
}

// pump moves one shard's items to the merged channel until it ends.
func (ss *shardSet[E, S]) pump(shard uint32, s S) {
	ss.wg.Add(1)
	go func() {
		defer ss.wg.Done()
		for {
			ev, err := s.Next(ss.ctx)
			if err != nil {
				if ss.ctx.Err() != nil {
					return
				}
				if err != io.EOF {
					ss.lost(shard, s.where(), err)
				}
				select {
				case ss.ch <- fanItem[E]{shard: shard, err: err}:
				case <-ss.ctx.Done():
				}
				return
			}
			select {
			case ss.ch <- fanItem[E]{shard: shard, ev: ev}:
			case <-ss.ctx.Done():
				return
			}
		}
	}()
}

// next returns the next item of any shard, a *ShardLostError when a shard
// ended with an error, io.EOF once every shard ended, ctx's error. When
// the item has an offset (ok), the shard's resume offset becomes the one
// after it.
func (ss *shardSet[E, S]) next(ctx context.Context, offset func(E) (uint64, bool)) (uint32, E, error) {
	var zero E
	if ss.hasPrev {
		ss.release(ss.prev)
		ss.prev, ss.hasPrev = zero, false
	}
	for {
		if ss.live == 0 {
			return 0, zero, io.EOF
		}
		select {
		case it := <-ss.ch:
			if it.err != nil {
				ss.live--
				if it.err == io.EOF {
					continue
				}
				return it.shard, zero, &ShardLostError{Shard: it.shard, Err: it.err}
			}
			if off, ok := offset(it.ev); ok {
				ss.mu.Lock()
				ss.offsets[it.shard] = off + 1
				ss.mu.Unlock()
			}
			if ss.release != nil {
				ss.prev, ss.hasPrev = it.ev, true
			}
			return it.shard, it.ev, nil
		case <-ctx.Done():
			return 0, zero, ctx.Err()
		}
	}
}

// resumeOffsets returns a copy of the per-shard resume offsets.
func (ss *shardSet[E, S]) resumeOffsets() map[uint32]uint64 {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	out := make(map[uint32]uint64, len(ss.offsets))
	for k, v := range ss.offsets {
		out[k] = v
	}
	return out
}

// close ends every pump and every started shard; it is idempotent.
func (ss *shardSet[E, S]) close() {
	ss.once.Do(func() {
		ss.cancel()
		ss.wg.Wait()
		for i, s := range ss.shards {
			if ss.started[i] {
				s.Close()
			}
		}
	})
}

// all iterates over next until it returns io.EOF (which just stops),
// ctx ends or the loop breaks: an error goOn accepts (a sharded
// iterator's *ShardLostError) is yielded and iteration goes on, any other
// is yielded once, last. It is the All of every iterator of the package.
func all[E any](ctx context.Context, next func(context.Context) (E, error), goOn func(error) bool) iter.Seq2[E, error] {
	return func(yield func(E, error) bool) {
		for {
			ev, err := next(ctx)
			if err == io.EOF {
				return
			}
			if !yield(ev, err) || err != nil && (goOn == nil || !goOn(err)) {
				return
			}
		}
	}
}

// shardLost reports a *ShardLostError: one shard ended, the others go on.
func shardLost(err error) bool {
	var lost *ShardLostError
	return errors.As(err, &lost)
}
