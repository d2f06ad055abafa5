package conformance_test

import (
	"errors"
	"io"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/conn"
)

// The watch scenarios run through the cluster-aware client's resumable
// watches.

// nextChange reads the next change of w.
func (fx *Fx) nextChange(w *client.Watch) client.CacheEvent {
	fx.t.Helper()
	ev, err := w.Next(fx.ctx())
	require.NoError(fx.t, err)
	return ev
}

// scWatch starts a watch through c; it is closed when the test ends.
func (fx *Fx) scWatch(c *client.Client, ref felix.CacheRef, o client.WatchOptions) *client.Watch {
	fx.t.Helper()
	w, err := c.CacheWatch(fx.ctx(), ref, o)
	require.NoError(fx.t, err)
	fx.t.Cleanup(func() { _ = w.Close() })
	return w
}

func Test_watch_delivers_changes_for_the_filter(t *testing.T) {
	run(t, "watch.delivers_changes_for_the_filter", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		ref := fx.cache(fx.SingleShardCache)
		k, other, prefix := fx.key("wk"), fx.key("wo"), fx.key("wp")+"/"
		kw := fx.scWatch(c, ref, conn.WatchOptions{Key: felix.Some(k)})
		pw := fx.scWatch(c, ref, conn.WatchOptions{Prefix: felix.Some(prefix)})
		for _, key := range []string{other, prefix + "a", k, "x" + prefix + "b", prefix + "c"} {
			require.NoError(t, c.CachePut(fx.ctx(), ref, key, []byte("v-"+key), 0))
		}
		ev := fx.nextChange(kw)
		require.Equal(t, k, ev.Key, "a key watch sees its key and nothing else")
		require.Equal(t, "v-"+k, string(ev.Value))
		keyChanges, prefixChanges := 1, 0
		for _, want := range []string{prefix + "a", prefix + "c"} {
			ev := fx.nextChange(pw)
			require.Equal(t, want, ev.Key, "a prefix watch sees every key under it, nothing else")
			prefixChanges++
		}
		// The key watch saw nothing after k: a later change of k is next.
		require.NoError(t, c.CachePut(fx.ctx(), ref, k, []byte("again"), 0))
		ev = fx.nextChange(kw)
		require.Equal(t, k, ev.Key)
		require.Equal(t, "again", string(ev.Value))
		keyChanges++
		fx.Pass(conformance.Evidence{"key_changes": keyChanges, "prefix_changes": prefixChanges})
	})
}

func Test_watch_deletes_arrive_as_changes_without_values(t *testing.T) {
	run(t, "watch.deletes_arrive_as_changes_without_values", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		ref, k := fx.cache(fx.SingleShardCache), fx.key("wd")
		w := fx.scWatch(c, ref, conn.WatchOptions{Key: felix.Some(k)})
		require.NoError(t, c.CachePut(fx.ctx(), ref, k, []byte{}, 0))
		_, _, err := c.CacheDelete(fx.ctx(), ref, k)
		require.NoError(t, err)
		set := fx.nextChange(w)
		require.False(t, set.Deleted, "set to empty is not a delete")
		require.NotNil(t, set.Value)
		require.Empty(t, set.Value)
		del := fx.nextChange(w)
		require.True(t, del.Deleted)
		require.Nil(t, del.Value)
		require.Greater(t, del.Offset, set.Offset)
		fx.Pass(conformance.Evidence{"set_at": set.Offset, "deleted_at": del.Offset})
	})
}

func Test_watch_resumes_from_an_offset(t *testing.T) {
	run(t, "watch.resumes_from_an_offset", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		ref, prefix := fx.cache(fx.SingleShardCache), fx.key("wr")+"/"
		w := fx.scWatch(c, ref, conn.WatchOptions{Prefix: felix.Some(prefix)})
		require.NoError(t, c.CachePut(fx.ctx(), ref, prefix+"0", []byte("0"), 0))
		seen := fx.nextChange(w)
		require.NoError(t, w.Close())
		// Missed while no watch ran.
		for i := 1; i <= 3; i++ {
			require.NoError(t, c.CachePut(fx.ctx(), ref, prefix+strconv.Itoa(i), []byte(strconv.Itoa(i)), 0))
		}
		again := fx.scWatch(c, ref, conn.WatchOptions{Prefix: felix.Some(prefix), FromOffset: felix.Some(seen.Offset + 1)})
		last := seen.Offset
		replayed := 0
		for i := 1; i <= 3; i++ {
			ev := fx.nextChange(again)
			require.Equal(t, prefix+strconv.Itoa(i), ev.Key, "the missed changes are replayed in order")
			require.Greater(t, ev.Offset, last)
			last = ev.Offset
			replayed++
		}
		require.NoError(t, c.CachePut(fx.ctx(), ref, prefix+"live", []byte("live"), 0))
		ev := fx.nextChange(again)
		require.Equal(t, prefix+"live", ev.Key, "then the watch goes live")
		fx.Pass(conformance.Evidence{"resumed_from": seen.Offset + 1, "replayed": replayed})
	})
}

func Test_watch_lag_is_reported_rather_than_silent(t *testing.T) {
	run(t, "watch.lag_is_reported_rather_than_silent", func(t *testing.T, fx *Fx) {
		// The watching client grants a small stream window and reads
		// nothing until the writes are done: the broker's queue for the
		// watch overflows and it must end the watch with a lag signal.
		small, _ := fx.scClient(fx.Addrs, func(cfg *client.Config) {
			q := conn.DefaultQUICConfig()
			q.InitialStreamReceiveWindow, q.MaxStreamReceiveWindow = 8<<10, 8<<10
			cfg.Conn.QUIC = q
		})
		ref, prefix := fx.cache(fx.SingleShardCache), fx.key("wl")+"/"
		w := fx.scWatch(small, ref, conn.WatchOptions{Prefix: felix.Some(prefix)})
		writer, _ := fx.scClient(fx.Addrs, func(cfg *client.Config) { cfg.Conn.CacheStreams = 8 })
		const writes, workers = 3000, 8
		value := make([]byte, 256)
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for g := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < writes; i += workers {
					if err := writer.CachePut(fx.ctx(), ref, prefix+strconv.Itoa(i), value, 0); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		require.NoError(t, <-errs)
		var last uint64
		n := 0
		for {
			ev, err := w.Next(fx.ctx())
			if err != nil {
				require.False(t, errors.Is(err, io.EOF), "a lagging watch must not end like a normal end")
				var lag *felix.LaggedError
				require.ErrorAs(t, err, &lag, "the end is an explicit lag signal")
				require.True(t, lag.Watch)
				require.Greater(t, lag.ResumeFrom, last, "it carries the offset to resume from")
				fx.Pass(conformance.Evidence{"delivered": n, "resume_from": lag.ResumeFrom})
				return
			}
			last = ev.Offset
			n++
			require.Less(t, n, writes, "every change arrived: the watch never lagged")
		}
	})
}

func Test_watch_retained_delivers_state_before_changes(t *testing.T) {
	run(t, "watch.retained_delivers_state_before_changes", func(t *testing.T, fx *Fx) {
		c := fx.scDefault()
		ref, prefix := fx.cache(fx.SingleShardCache), fx.key("wt")+"/"
		empty := fx.scWatch(c, ref, conn.WatchOptions{Prefix: felix.Some(prefix), Retained: true})
		require.Equal(t, felix.Some(uint64(0)), empty.Info().RetainedCount, "0 is a definite answer")
		require.NoError(t, empty.Close())
		for _, k := range []string{"a", "b"} {
			require.NoError(t, c.CachePut(fx.ctx(), ref, prefix+k, []byte(k), 0))
		}
		w := fx.scWatch(c, ref, conn.WatchOptions{Prefix: felix.Some(prefix), Retained: true})
		require.Equal(t, felix.Some(uint64(2)), w.Info().RetainedCount)
		got := map[string]string{}
		for range 2 {
			ev := fx.nextChange(w)
			got[ev.Key] = string(ev.Value)
		}
		require.Equal(t, map[string]string{prefix + "a": "a", prefix + "b": "b"}, got)
		require.NoError(t, c.CachePut(fx.ctx(), ref, prefix+"c", []byte("c"), 0))
		ev := fx.nextChange(w)
		require.Equal(t, prefix+"c", ev.Key, "then live changes")
		fx.Pass(conformance.Evidence{"retained": w.Info().RetainedCount.V, "live_at": ev.Offset})
	})
}
