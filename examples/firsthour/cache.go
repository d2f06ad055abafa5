package main

// The cache program watches a key prefix on every shard of a cache, writes
// values with and without a TTL, makes conditional puts and deletes,
// counts with counters, and checks what docs/caches.md promises: values
// and counters are separate keyspaces, an expired value reads as a miss
// and sends no watch event, counter adds send none either, and the watch
// sees every value write of the prefix once, in order.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/flxproto/felix/client"
)

// ttl is the lifetime of the short-lived session.
const ttl = 300 * time.Millisecond

func runCache(ctx context.Context, fx fixture, out io.Writer) error {
	ref := client.CacheRef{TenantID: fx.TenantID, Namespace: fx.Namespace, Cache: fx.Cache}
	c, err := client.Dial(ctx, fx.config())
	if err != nil {
		return err
	}
	defer c.Close()

	// Every key of this run is under a prefix of its own, so that a run
	// against a long-lived cluster finds no earlier run's keys.
	p := "session-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/"
	w, err := c.CacheWatchSharded(ctx, ref, client.ShardedWatchOptions{Prefix: p})
	if err != nil {
		return err
	}
	defer w.Close()
	fmt.Fprintf(out, "watching %s on %d shard(s)\n", p, w.Shards())
	check := checker{out}.check
	var want []string // the watch events expected, "put KEY=VALUE" or "del KEY"

	// A value with a TTL and one without.
	if err := c.CachePut(ctx, ref, p+"short", []byte("alice"), ttl); err != nil {
		return err
	}
	want = append(want, "put "+p+"short=alice")
	if err := c.CachePut(ctx, ref, p+"long", []byte("bob"), 0); err != nil {
		return err
	}
	want = append(want, "put "+p+"long=bob")

	// Conditional puts: "absent" fails on a live key, a matching version wins,
	// a stale one loses.
	r, err := c.CachePutIf(ctx, ref, p+"long", []byte("mallory"), client.IfAbsent, 0)
	if err != nil {
		return err
	}
	if err := check(!r.Applied, "put-if-absent on a live key is not applied"); err != nil {
		return err
	}
	item, err := c.CacheGetVersioned(ctx, ref, p+"long")
	if err != nil {
		return err
	}
	if err := check(item.Found && item.HasVersion, "a versioned read returns the version (%d)", item.Version); err != nil {
		return err
	}
	r, err = c.CachePutIf(ctx, ref, p+"long", []byte("bob-2"), client.IfVersion(item.Version), 0)
	if err != nil {
		return err
	}
	if err := check(r.Applied, "put-if-version with the current version is applied"); err != nil {
		return err
	}
	want = append(want, "put "+p+"long=bob-2")
	r, err = c.CachePutIf(ctx, ref, p+"long", []byte("bob-3"), client.IfVersion(item.Version), 0)
	if err != nil {
		return err
	}
	if err := check(!r.Applied, "put-if-version with a stale version is not applied"); err != nil {
		return err
	}
	r, err = c.CachePutIf(ctx, ref, p+"new", []byte("carol"), client.IfAbsent, 0)
	if err != nil {
		return err
	}
	if err := check(r.Applied, "put-if-absent on a new key is applied"); err != nil {
		return err
	}
	want = append(want, "put "+p+"new=carol")
	dr, err := c.CacheDeleteIf(ctx, ref, p+"new", r.Version)
	if err != nil {
		return err
	}
	if err := check(dr.Applied, "delete-if-version with the current version is applied"); err != nil {
		return err
	}
	want = append(want, "del "+p+"new")

	// Counters: their own keyspace, and no watch events.
	for range 5 {
		if _, _, err := c.CounterAdd(ctx, ref, p+"hits", 1); err != nil {
			return err
		}
	}
	n, found, err := c.CounterGet(ctx, ref, p+"hits")
	if err != nil {
		return err
	}
	if err := check(found && n == 5, "five adds of 1 count 5 (got %d)", n); err != nil {
		return err
	}
	_, found, err = c.CacheGet(ctx, ref, p+"hits")
	if err != nil {
		return err
	}
	if err := check(!found, "a counter is not a value: CacheGet of a counted key misses"); err != nil {
		return err
	}
	n, _, err = c.CounterAdd(ctx, ref, p+"long", 10)
	if err != nil {
		return err
	}
	v, _, err := c.CacheGet(ctx, ref, p+"long")
	if err != nil {
		return err
	}
	if err := check(n == 10 && string(v) == "bob-2", "CounterAdd on a key holding a value starts a counter and leaves the value (%d, %q)", n, v); err != nil {
		return err
	}
	_, found, err = c.CounterGet(ctx, ref, p+"never")
	if err != nil {
		return err
	}
	if err := check(!found, "a counter never added to is absent, not 0"); err != nil {
		return err
	}

	// The TTL: the short session expires; the read misses.
	select {
	case <-time.After(ttl + 100*time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	_, found, err = c.CacheGet(ctx, ref, p+"short")
	if err != nil {
		return err
	}
	if err := check(!found, "the value with a %s TTL reads as a miss after it", ttl); err != nil {
		return err
	}

	// A last write marks the end: everything the watch delivers before it
	// must be exactly want (no expiry event, no counter event).
	if err := c.CachePut(ctx, ref, p+"zz-end", []byte("end"), 0); err != nil {
		return err
	}
	want = append(want, "put "+p+"zz-end=end")
	var got []string
	for len(got) < len(want) {
		ev, err := w.Next(ctx)
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		if ev.Deleted {
			got = append(got, "del "+ev.Key)
		} else {
			got = append(got, "put "+ev.Key+"="+string(ev.Value))
		}
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("watch event %d: got %q, want %q (all: %q)", i, got[i], want[i], got)
		}
	}
	if err := check(true, "the sharded watch saw the %d value writes once and in order, no expiry and no counter events", len(want)); err != nil {
		return err
	}
	// Nothing else is pending on the watch.
	nctx, ncancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer ncancel()
	if ev, err := w.Next(nctx); !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("watch: unexpected %+v, %v after the end marker", ev, err)
	}
	return nil
}
