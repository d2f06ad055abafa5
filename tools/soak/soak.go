// Command soak runs the three-node reference cluster (internal/broker/cluster)
// with its link interposer under random faults — node kills and restarts,
// quorum partitions, dropped, stalled and reset links, planned shard moves —
// while an idempotent producer publishes keyed records, two sharded
// subscribers read every shard, and a cache watcher follows a key its
// writer keeps changing. At the end it checks that every acknowledged
// record was delivered to each subscriber exactly once and in order per
// shard, that the watcher saw the key's changes in order up to the last
// acknowledged one, and that the process's RSS and goroutine count were
// flat after warm-up (clients and brokers run in this one process).
//
//	nice -n 19 go run ./tools/soak -duration 30m -out soak.json
//
// The result is printed and, with -out, written as JSON; the exit status
// is 1 when a check failed. TestSoak runs a short version
// (-soak.duration, 20 s by default).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
)

// Options configures a run.
type Options struct {
	// Duration is how long faults are injected and records published.
	Duration time.Duration
	// Warmup is the part of Duration after which memory must stay flat
	// (0: a quarter of Duration). Warm-up lasts longer when the shard
	// logs or the cache's write log have not reached their bounds by
	// then (they grow until they do), unless the run ends first.
	Warmup time.Duration
	// FaultEvery is the mean time between faults (0: 2 s).
	FaultEvery time.Duration
	// Rate bounds the records published per second (0: 400).
	Rate int
	// Seed seeds the fault schedule (0: random).
	Seed uint64
	// Drain bounds the wait, after Duration, for the subscribers and the
	// watcher to catch up (0: 2 min).
	Drain time.Duration
	// Log receives progress lines (nil: none).
	Log io.Writer
	// HeapProfile, when set, names the heap profiles written when
	// warm-up ends (HeapProfile+".warm") and at the end (+".end"), to
	// compare with go tool pprof -base.
	HeapProfile string
}

// Sample is one reading of the process's figures.
type Sample struct {
	At         time.Duration // since the start
	RSS        int64         // bytes (VmRSS)
	RSSAnon    int64         // bytes (RssAnon: heap, stacks, runtime metadata)
	RSSFile    int64         // bytes (RssFile: the mapped binary's pages)
	AnonHuge   int64         // bytes of anonymous transparent huge pages (smaps_rollup AnonHugePages)
	HeapInuse  uint64
	HeapLive   uint64 // /gc/heap/live: the heap marked live by the last GC
	Goroutines int
	Mem        MemClasses
}

// MemClasses is the Go runtime's account of the memory it mapped
// (runtime/metrics /memory/classes/...), in bytes.
type MemClasses struct {
	Objects   uint64 // heap/objects: live and not yet swept objects
	Unused    uint64 // heap/unused: reserved for objects, not in use (fragmentation)
	Free      uint64 // heap/free: free pages not returned to the OS
	Released  uint64 // heap/released: free pages returned to the OS (not resident)
	Stacks    uint64 // heap/stacks + os-stacks
	Metadata  uint64 // metadata/*
	Profiling uint64 // profiling/buckets
	Other     uint64 // other
	Total     uint64 // total
}

// Resident is the part of the runtime's memory that may be resident:
// everything it mapped but what it returned to the OS.
func (m MemClasses) Resident() uint64 { return m.Total - m.Released }

// Result is what a run found.
type Result struct {
	Duration   string
	Seed       uint64
	Faults     map[string]int
	Published  int // records acknowledged
	Ambiguous  int // records whose outcome was unknown (re-sent by the producer)
	Retried    int // publishes refused or failed before sending, sent again
	Shards     int
	Delivered  []int // records delivered, per subscriber
	Missing    []int // acknowledged records a subscriber never got
	Duplicated []int // records delivered twice or out of order, per subscriber
	Resumes    []int // times a subscriber was reopened after a lost shard
	WatchPuts  int   // acknowledged puts of the watched key
	WatchSeen  int   // changes the watcher saw
	WatchBad   int   // changes seen out of order
	WatchLast  bool  // the watcher saw the last acknowledged put
	WatchLags  int
	Samples    []Sample
	WarmAt     time.Duration // when warm-up ended: the samples from there are judged
	LogsFull   bool          // the logs reached their bounds by WarmAt (else the judged memory includes their growth)
	Trends     []Trend       // the figures judged flat after warm-up
	Failures   []string

	warm int // index of the first sample after warm-up
}

// OK reports whether every check passed.
func (r *Result) OK() bool { return len(r.Failures) == 0 }

// Summary is a one-paragraph account of the result.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak %s (seed %d): %d records acknowledged, %d ambiguous, %d retried over %d shards; faults %v\n",
		r.Duration, r.Seed, r.Published, r.Ambiguous, r.Retried, r.Shards, r.Faults)
	for i := range r.Delivered {
		fmt.Fprintf(&b, "subscriber %d: %d delivered, %d missing, %d duplicated or out of order, %d resumes\n",
			i, r.Delivered[i], r.Missing[i], r.Duplicated[i], r.Resumes[i])
	}
	fmt.Fprintf(&b, "watcher: %d acknowledged puts, %d changes seen, %d out of order, last seen %v, %d lags\n",
		r.WatchPuts, r.WatchSeen, r.WatchBad, r.WatchLast, r.WatchLags)
	if w := r.warmIndex(); w < len(r.Samples) {
		fmt.Fprintf(&b, "after warm-up (from %v, logs full %v): RSS %s, heap in use %s, live heap %s, goroutines %s\n", r.WarmAt.Round(time.Second), r.LogsFull,
			span(r.Samples[w:], func(s Sample) int64 { return s.RSS >> 20 }, "MiB"),
			span(r.Samples[w:], func(s Sample) int64 { return int64(s.HeapInuse >> 20) }, "MiB"),
			span(r.Samples[w:], func(s Sample) int64 { return int64(s.HeapLive >> 20) }, "MiB"),
			span(r.Samples[w:], func(s Sample) int64 { return int64(s.Goroutines) }, ""))
		for _, t := range r.Trends {
			fmt.Fprintf(&b, "trend: %v\n", t)
		}
	}
	if r.OK() {
		b.WriteString("PASS\n")
	} else {
		fmt.Fprintf(&b, "FAIL: %s\n", strings.Join(r.Failures, "; "))
	}
	return b.String()
}

func span(ss []Sample, f func(Sample) int64, unit string) string {
	lo, hi := f(ss[0]), f(ss[0])
	for _, s := range ss {
		lo, hi = min(lo, f(s)), max(hi, f(s))
	}
	return fmt.Sprintf("%d..%d%s (first %d, last %d)", lo, hi, unit, f(ss[0]), f(ss[len(ss)-1]))
}

// warmIndex is the first sample after warm-up.
func (r *Result) warmIndex() int { return r.warm }

const (
	soakStream = "soak"
	soakShards = 4
	soakCache  = "soak-cache"
	watchedKey = "w"
	keys       = 64
	// retainRecords is each shard's log bound in records, cacheLogRetain
	// the cache's write log's in events: far more than a subscriber or
	// the watcher lags by, and reached within a few minutes at 200
	// records a second on a loaded machine.
	retainRecords  = 10_000
	cacheLogRetain = 5_000
)

// Run runs the soak. An error means it could not run; a failed check is
// in Result.Failures.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Duration <= 0 {
		return nil, errors.New("soak: a positive duration is needed")
	}
	if o.Warmup <= 0 {
		o.Warmup = o.Duration / 4
	}
	if o.FaultEvery <= 0 {
		o.FaultEvery = 2 * time.Second
	}
	if o.Rate <= 0 {
		o.Rate = 400
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	if o.Drain <= 0 {
		o.Drain = 2 * time.Minute
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
		}
	}
	// The cache keeps its last cacheLogRetain writes for watch replay, so
	// its write log, too, stops growing once warm.
	cl, err := cluster.Start(ctx, cluster.Config{Nodes: 3, Engine: engine.Config{MaxRetainBytes: 8 << 20, CacheLogRetain: cacheLogRetain}})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	topic := engine.Topic{Tenant: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Stream: soakStream}
	// A shard keeps its last retainRecords records: the log stops growing
	// once warm, far ahead of what a subscriber lags by.
	if err := cl.CreateStream(topic, engine.StreamConfig{Durable: true, Shards: soakShards, RetainRecords: retainRecords}); err != nil {
		return nil, err
	}
	ctp := client.Topic{TenantID: topic.Tenant, Namespace: topic.Namespace, Stream: topic.Stream}
	cref := client.CacheRef{TenantID: topic.Tenant, Namespace: topic.Namespace, Cache: soakCache}
	seeds := append([]string{cl.Fixture().LinkAddr}, cl.Addrs()...)
	newClient := func() (*client.Client, error) {
		return client.New(client.Config{Seeds: seeds, TenantID: cluster.DefaultTenant, Token: cluster.DefaultToken,
			Conn:        conn.Config{TLS: cl.TLS(), IdleTimeout: 1500 * time.Millisecond, KeepAlive: 300 * time.Millisecond},
			BackoffBase: 10 * time.Millisecond, BackoffMax: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	}

	res := &Result{Duration: o.Duration.String(), Seed: o.Seed, Faults: map[string]int{}, Shards: soakShards}
	shardAcks := make([]int, soakShards) // acknowledged records per shard, under fail
	start := time.Now()
	runCtx, stopRun := context.WithTimeout(ctx, o.Duration)
	defer stopRun()
	allCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()

	// The acknowledged records, per shard, in publish order (each shard's
	// records are acknowledged in offset order: one publisher, one batch
	// of a route at a time), checked off by each subscriber.
	const subscribers = 2
	checkers := make([]*checker, subscribers)
	for i := range checkers {
		checkers[i] = newChecker(soakShards)
	}
	var wg sync.WaitGroup
	var fail sync.Mutex
	failf := func(format string, args ...any) {
		fail.Lock()
		res.Failures = append(res.Failures, fmt.Sprintf(format, args...))
		fail.Unlock()
	}

	// Subscribers: each reads every shard from the earliest offset and
	// reopens from its resume offsets when a shard is lost.
	subDone := make([]chan struct{}, subscribers)
	for i := range subscribers {
		subDone[i] = make(chan struct{})
		c, err := newClient()
		if err != nil {
			return nil, err
		}
		defer c.Close()
		res.Resumes = append(res.Resumes, 0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(subDone[i])
			ck := checkers[i]
			subCtx, cancel := context.WithCancel(allCtx)
			defer cancel()
			go func() {
				select {
				case <-ck.caught:
					cancel()
				case <-subCtx.Done():
				}
			}()
			from := map[uint32]uint64{}
			for subCtx.Err() == nil {
				ss, err := c.SubscribeSharded(subCtx, ctp, client.ShardedOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}, From: from})
				if err != nil {
					if sleep(subCtx, 100*time.Millisecond) != nil {
						return
					}
					continue
				}
				for subCtx.Err() == nil {
					ev, err := ss.Next(subCtx)
					if err != nil {
						break
					}
					if !ev.HasOffset {
						failf("subscriber %d: a record without an offset", i)
						continue
					}
					ck.deliver(ev.Shard, ev.Offset, string(ev.Payload))
				}
				from = ss.Offsets()
				ss.Close()
				if subCtx.Err() == nil {
					fail.Lock()
					res.Resumes[i]++
					fail.Unlock()
				}
			}
		}()
	}

	// The publisher: one idempotent producer, keyed single-record batches.
	pc, err := newClient()
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	pubDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(pubDone)
		var prod *client.Producer
		tick := time.NewTicker(time.Second / time.Duration(o.Rate))
		defer tick.Stop()
		for id := 0; runCtx.Err() == nil; id++ {
			key := []byte("k" + strconv.Itoa(id%keys))
			shard := felix.RoutingModulo.ShardOf(key, true, soakShards)
			payload := strconv.Itoa(id)
			for runCtx.Err() == nil {
				if prod == nil {
					p, err := pc.NewProducer(runCtx)
					if err != nil {
						_ = sleep(runCtx, 50*time.Millisecond)
						continue
					}
					prod = p
				}
				cctx, cancel := context.WithTimeout(allCtx, 20*time.Second)
				r, err := prod.PublishBatch(cctx, ctp, [][]byte{[]byte(payload)}, client.PublishOptions{Key: key})
				cancel()
				if err == nil {
					for _, ck := range checkers {
						ck.acked(shard, id, r.Offset, r.HasOffset)
					}
					fail.Lock()
					res.Published++
					shardAcks[shard]++
					fail.Unlock()
					break
				}
				if errors.Is(err, client.ErrAmbiguous) {
					fail.Lock()
					res.Ambiguous++ // the producer re-sends it, same sequence
					fail.Unlock()
					for _, ck := range checkers {
						ck.maybe(shard, id)
					}
					break
				}
				if errors.Is(err, client.ErrProducerStopped) {
					failf("producer stopped: %v", err)
					prod = nil
				}
				fail.Lock()
				res.Retried++
				fail.Unlock()
				_ = sleep(runCtx, 20*time.Millisecond)
			}
			select {
			case <-tick.C:
			case <-runCtx.Done():
			}
		}
	}()

	// The cache writer and its watcher.
	wc, err := newClient()
	if err != nil {
		return nil, err
	}
	defer wc.Close()
	var watchMu sync.Mutex
	lastPut, seenMax := -1, -1
	wg.Add(1)
	go func() { // writer
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for v := 0; runCtx.Err() == nil; v++ {
			cctx, cancel := context.WithTimeout(runCtx, 10*time.Second)
			err := wc.CachePut(cctx, cref, watchedKey, []byte(strconv.Itoa(v)), 0)
			cancel()
			if err == nil {
				watchMu.Lock()
				lastPut = v
				res.WatchPuts++
				watchMu.Unlock()
			}
			select {
			case <-tick.C:
			case <-runCtx.Done():
			}
		}
	}()
	watchDone := make(chan struct{})
	watchCtx, stopWatch := context.WithCancel(allCtx)
	defer stopWatch()
	wg.Add(1)
	go func() { // watcher
		defer wg.Done()
		defer close(watchDone)
		caughtUp := func() bool {
			watchMu.Lock()
			defer watchMu.Unlock()
			return runCtx.Err() != nil && seenMax >= lastPut
		}
		for watchCtx.Err() == nil && !caughtUp() {
			w, err := wc.CacheWatch(watchCtx, cref, client.WatchOptions{Key: felix.Some(watchedKey), Retained: true})
			if err != nil {
				_ = sleep(watchCtx, 100*time.Millisecond)
				continue
			}
			for watchCtx.Err() == nil && !caughtUp() {
				ev, err := w.Next(watchCtx)
				if err != nil {
					var lag *felix.LaggedError
					if errors.As(err, &lag) {
						watchMu.Lock()
						res.WatchLags++
						watchMu.Unlock()
					}
					break
				}
				v, _ := strconv.Atoi(string(ev.Value))
				watchMu.Lock()
				res.WatchSeen++
				if v < seenMax {
					res.WatchBad++
				}
				seenMax = max(seenMax, v)
				watchMu.Unlock()
			}
			w.Close()
		}
	}()

	// Faults, one at a time, until the run ends; then every node is up
	// and every fault healed.
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	faultsDone := make(chan struct{})
	go func() {
		defer close(faultsDone)
		for runCtx.Err() == nil {
			hold := time.Duration(500+rng.IntN(2500)) * time.Millisecond
			if sleep(runCtx, time.Duration(float64(o.FaultEvery)*(0.5+rng.Float64()))) != nil {
				return
			}
			var name string
			switch rng.IntN(6) {
			case 0:
				n := rng.IntN(cl.Nodes())
				name = "kill"
				if err := cl.Kill(n); err != nil {
					continue
				}
				_ = sleep(runCtx, hold)
				_ = cl.Restart(n)
			case 1:
				name = "partition"
				if _, err := cl.Partition(cluster.QuorumStream); err != nil {
					continue
				}
				_ = sleep(runCtx, hold)
				cl.Heal()
			case 2:
				name = "drop"
				cl.Link().Drop(hold)
				_ = sleep(runCtx, hold)
			case 3:
				name = "slow"
				for t := time.Duration(0); t < hold && runCtx.Err() == nil; t += 250 * time.Millisecond {
					cl.Link().Stall(100 * time.Millisecond) // a link with 100 ms bursts of delay
					_ = sleep(runCtx, 250*time.Millisecond)
				}
			case 4:
				name = "reset"
				cl.Link().Reset()
			case 5:
				name = "move"
				if _, err := cl.Fence(soakStream, uint32(rng.IntN(soakShards)), hold/4); err != nil {
					continue
				}
				_ = sleep(runCtx, hold/4)
			}
			fail.Lock()
			res.Faults[name]++
			fail.Unlock()
			logf("fault %s (hold %v)", name, hold)
		}
	}()

	// Memory samples, once a second (or 60 per run when shorter).
	every := min(time.Second, o.Duration/60)
	sampDone := make(chan struct{})
	go func() {
		defer close(sampDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-allCtx.Done():
				return
			}
			s := sample(start)
			watchMu.Lock()
			puts := res.WatchPuts
			watchMu.Unlock()
			fail.Lock()
			res.Samples = append(res.Samples, s)
			// Warm once every log has reached its bound: only then is
			// the memory the run holds steady.
			full := logsFull(shardAcks, puts)
			if res.warm == 0 && s.At >= o.Warmup && full {
				res.warm, res.WarmAt, res.LogsFull = len(res.Samples)-1, s.At, true
				logf("warm-up over at %v", s.At.Round(time.Second))
				writeHeapProfile(o.HeapProfile, ".warm")
			}
			n, acked := len(res.Samples), res.Published
			fail.Unlock()
			if n%30 == 0 {
				logf("%v: %d acked, RSS %d MiB (anon %d, file %d, huge %d), Go resident %d MiB (objects %d, unused %d, free %d, stacks %d, meta %d, other %d; released %d), live heap %d MiB, %d goroutines",
					s.At.Round(time.Second), acked, s.RSS>>20, s.RSSAnon>>20, s.RSSFile>>20, s.AnonHuge>>20, s.Mem.Resident()>>20,
					s.Mem.Objects>>20, s.Mem.Unused>>20, s.Mem.Free>>20, s.Mem.Stacks>>20, s.Mem.Metadata>>20, s.Mem.Other>>20, s.Mem.Released>>20, s.HeapLive>>20, s.Goroutines)
			}
		}
	}()

	<-runCtx.Done()
	<-faultsDone
	<-pubDone
	for i := range cl.Nodes() {
		if !cl.Alive(i) {
			_ = cl.Restart(i)
		}
	}
	cl.Heal()
	logf("run over: %d acked; waiting for the readers", res.Published)
	for _, ck := range checkers {
		ck.finish()
	}
	watchMu.Lock()
	if seenMax >= lastPut { // else the watcher stops once it sees it
		stopWatch()
	}
	watchMu.Unlock()
	drain := time.NewTimer(o.Drain)
	defer drain.Stop()
	waits := append(slices.Clone(subDone), watchDone)
	for i, done := range waits {
		select {
		case <-done:
			continue
		case <-drain.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if i < subscribers {
			failf("subscriber %d did not catch up within %v: %s", i, o.Drain, checkers[i].state())
		} else {
			watchMu.Lock()
			failf("the watcher did not catch up within %v: saw %d, last put %d", o.Drain, seenMax, lastPut)
			watchMu.Unlock()
		}
		break
	}
	stopAll()
	<-sampDone
	wg.Wait()
	writeHeapProfile(o.HeapProfile, ".end")

	for i, ck := range checkers {
		d, m, dup := ck.result()
		res.Delivered, res.Missing, res.Duplicated = append(res.Delivered, d), append(res.Missing, m), append(res.Duplicated, dup)
		if m > 0 || dup > 0 {
			failf("subscriber %d: %d acknowledged records missing, %d duplicated or out of order", i, m, dup)
		}
		for _, p := range ck.problems {
			failf("subscriber %d: %s", i, p)
		}
	}
	res.WatchLast = seenMax >= lastPut
	if !res.WatchLast {
		failf("the watcher's last value %d is below the last acknowledged put %d", seenMax, lastPut)
	}
	if res.WatchBad > 0 {
		failf("the watcher saw %d changes out of order", res.WatchBad)
	}
	if res.Published == 0 {
		failf("nothing was acknowledged")
	}
	if res.warm == 0 { // the logs did not fill in a short run: judge from Warmup, their growth included
		logf("the logs did not reach their bounds: memory judged from %v while they grew", o.Warmup)
		res.warm = len(res.Samples)
		for i, s := range res.Samples {
			if s.At >= o.Warmup {
				res.warm, res.WarmAt = i, s.At
				break
			}
		}
	}
	res.Trends = flat(res.Samples[res.warm:])
	for _, t := range res.Trends {
		if !t.OK {
			failf("%s grew after warm-up: %v", t.Name, t)
		}
	}
	return res, nil
}

// Trend is the judged growth of one figure after warm-up: the
// Theil–Sen slope of its samples (the median of the slopes between every
// two of them), per minute, and the rise that slope makes over the
// judged window, which must not pass Bound = PerMinute × window + Slack.
// The median slope follows a steady growth, a leak, while a swing at a
// fault that returns (a killed node's goroutines and buffers, a stalled
// link's held datagrams) moves few of the pairs' slopes and so barely
// tilts it, as it would a least-squares fit's. The slack absorbs what a
// short window's noise can still make of the slope: the 20 s CI run
// judges 15 s of samples, where a garbage collection or a restart is a
// large part of the window.
type Trend struct {
	Name   string
	Unit   string  // "MiB" or "" (a count)
	Slope  float64 // per minute
	Rise   float64 // Slope × the window
	Bound  float64
	Window time.Duration
	OK     bool
}

func (t Trend) String() string {
	return fmt.Sprintf("%s %+.2f%s/min (%+.1f%s over %v, bound %.1f%s)", t.Name, t.Slope, t.Unit, t.Rise, t.Unit,
		t.Window.Round(time.Second), t.Bound, t.Unit)
}

// trendRule bounds the growth of one figure.
type trendRule struct {
	name, unit string
	value      func(Sample) float64
	perMinute  float64 // growth allowed per minute
	slack      float64 // growth allowed over the whole window
	notRace    bool    // not judged under the race detector
}

const mib = 1 << 20

// trendRules are the figures flat judges (see docs/limits.md §3.7 for the
// measured noise they leave room for).
//
//   - live heap (/gc/heap/live, what the last GC marked): a leak of ours.
//     0.2 MiB a minute and 4 MiB: a leak of 0.6 MiB a minute rises 12 MiB
//     over the 20 judged minutes of a 30-minute run, against a bound of
//     8 MiB.
//   - Go's own memory outside the heap (goroutine stacks, runtime
//     metadata, profiling buckets, other): what grows with goroutines or
//     spans, bounded alike.
//   - RSS beyond what the runtime holds (VmRSS minus the runtime's
//     mapped-and-not-released memory): memory the runtime does not
//     account, which would be a leak outside Go's heap. Not judged
//     under -race: the race detector's shadow memory is such memory,
//     and grows with the heap addresses touched (+6 MiB in a 15 s
//     window, measured).
//   - goroutines: 2 a minute and 150: a killed node takes about 100
//     goroutines with it and its restart brings them back (109 to 258
//     over a 30-minute run), which in the CI run's 15 s can be a step
//     the window does not see return. A leak of one goroutine every
//     other fault (15 a minute) rises 300 over 20 minutes.
//
// The runtime's free-but-unreleased and fragmented heap pages
// (/memory/classes/heap/free and unused) are not judged: their level
// follows the heap's peaks and the scavenger, not what the program holds.
var trendRules = []trendRule{
	{"live heap", "MiB", func(s Sample) float64 { return float64(s.HeapLive) / mib }, 0.2, 4, false},
	{"Go non-heap", "MiB", func(s Sample) float64 {
		return float64(s.Mem.Stacks+s.Mem.Metadata+s.Mem.Profiling+s.Mem.Other) / mib
	}, 0.2, 4, false},
	{"RSS beyond Go", "MiB", func(s Sample) float64 { return float64(s.RSS-int64(s.Mem.Resident())) / mib }, 0.2, 4, true},
	{"goroutines", "", func(s Sample) float64 { return float64(s.Goroutines) }, 2, 150, false},
}

// flat judges the samples after warm-up: each figure of trendRules must
// not grow, by its Theil–Sen slope, more than its bound over the window.
func flat(ss []Sample) []Trend {
	if len(ss) < 4 {
		return nil
	}
	window := ss[len(ss)-1].At - ss[0].At
	ts := make([]float64, len(ss))
	for i, s := range ss {
		ts[i] = (s.At - ss[0].At).Minutes()
	}
	ys := make([]float64, len(ss))
	var out []Trend
	for _, r := range trendRules {
		if r.notRace && raceEnabled {
			continue
		}
		for i, s := range ss {
			ys[i] = r.value(s)
		}
		sl := theilSen(ts, ys)
		t := Trend{Name: r.name, Unit: r.unit, Slope: sl, Rise: sl * window.Minutes(),
			Bound: r.perMinute*window.Minutes() + r.slack, Window: window}
		t.OK = t.Rise <= t.Bound
		out = append(out, t)
	}
	return out
}

// maxTrendPoints bounds the samples theilSen compares pairwise (a
// 30-minute run has 1,800): it takes every k-th.
const maxTrendPoints = 400

// theilSen returns the median of the slopes between every two points
// (x strictly increasing).
func theilSen(xs, ys []float64) float64 {
	step := (len(xs) + maxTrendPoints - 1) / maxTrendPoints
	var slopes []float64
	for i := 0; i < len(xs); i += step {
		for j := i + step; j < len(xs); j += step {
			if dx := xs[j] - xs[i]; dx > 0 {
				slopes = append(slopes, (ys[j]-ys[i])/dx)
			}
		}
	}
	if len(slopes) == 0 {
		return 0
	}
	slices.Sort(slopes)
	n := len(slopes)
	if n%2 == 1 {
		return slopes[n/2]
	}
	return (slopes[n/2-1] + slopes[n/2]) / 2
}

// writeHeapProfile writes the heap profile to prefix+suffix (nothing
// when prefix is empty); a failure is ignored: the profile is a help.
func writeHeapProfile(prefix, suffix string) {
	if prefix == "" {
		return
	}
	f, err := os.Create(prefix + suffix)
	if err != nil {
		return
	}
	defer f.Close()
	runtime.GC()
	_ = pprof.WriteHeapProfile(f)
}

// logsFull reports whether every shard's log (acks per shard) and the
// cache's write log (puts) have reached their bounds: until then they
// grow, and so does the memory the run holds.
func logsFull(shardAcks []int, puts int) bool {
	return slices.Min(shardAcks) >= retainRecords && puts >= cacheLogRetain
}

// memMetrics are the runtime/metrics a sample reads, in this order.
var memMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/memory/classes/os-stacks:bytes",
	"/memory/classes/metadata/mcache/free:bytes",
	"/memory/classes/metadata/mcache/inuse:bytes",
	"/memory/classes/metadata/mspan/free:bytes",
	"/memory/classes/metadata/mspan/inuse:bytes",
	"/memory/classes/metadata/other:bytes",
	"/memory/classes/profiling/buckets:bytes",
	"/memory/classes/other:bytes",
	"/memory/classes/total:bytes",
	"/gc/heap/live:bytes",
}

func sample(start time.Time) Sample {
	ms := make([]metrics.Sample, len(memMetrics))
	for i, n := range memMetrics {
		ms[i].Name = n
	}
	metrics.Read(ms)
	v := func(i int) uint64 {
		if ms[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return ms[i].Value.Uint64()
	}
	m := MemClasses{Objects: v(0), Unused: v(1), Free: v(2), Released: v(3), Stacks: v(4) + v(5),
		Metadata: v(6) + v(7) + v(8) + v(9) + v(10), Profiling: v(11), Other: v(12), Total: v(13)}
	st := procFields("/proc/self/status", "VmRSS:", "RssAnon:", "RssFile:")
	sr := procFields("/proc/self/smaps_rollup", "AnonHugePages:")
	return Sample{At: time.Since(start), RSS: st[0], RSSAnon: st[1], RSSFile: st[2], AnonHuge: sr[0],
		HeapInuse: m.Objects + m.Unused, HeapLive: v(14), Goroutines: runtime.NumGoroutine(), Mem: m}
}

// procFields reads the "Name: N kB" lines of a /proc file (Linux; 0
// elsewhere), in bytes, in the order of names.
func procFields(path string, names ...string) []int64 {
	out := make([]int64, len(names))
	b, err := os.ReadFile(path)
	if err != nil {
		return out
	}
	for line := range strings.Lines(string(b)) {
		for i, name := range names {
			if v, ok := strings.CutPrefix(line, name); ok {
				if f := strings.Fields(v); len(f) > 0 {
					n, _ := strconv.ParseInt(f[0], 10, 64)
					out[i] = n << 10
				}
			}
		}
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checker checks one subscriber's deliveries against the acknowledged
// records, shard by shard, as they come: offsets must be contiguous from
// 0 (each record once, in order), record ids increasing (the producer
// wrote none twice), and every acknowledged record delivered at its
// acknowledged offset. What it holds is bounded by the subscriber's lag.
type checker struct {
	mu       sync.Mutex
	shards   []*shardCheck
	done     bool          // no more acks
	caught   chan struct{} // closed once done and every ack was delivered
	problems []string
}

type ack struct {
	id        int
	offset    uint64
	hasOffset bool
	maybe     bool // ambiguous: may or may not be written
}

type shardCheck struct {
	pending   []ack // acknowledged (or ambiguous), not yet delivered, in id order
	next      uint64
	lastID    int
	delivered int
	missing   int
	dups      int
	recent    map[uint64]int // offset → id of the last recentDeliveries
}

// recentDeliveries is how many deliveries per shard a checker remembers
// for acks that arrive after their record was delivered (the publisher
// has one batch in flight, so a handful would do); it keeps the
// checker's own memory flat.
const recentDeliveries = 4096

func newChecker(n int) *checker {
	ck := &checker{caught: make(chan struct{})}
	for range n {
		ck.shards = append(ck.shards, &shardCheck{lastID: -1, recent: make(map[uint64]int)})
	}
	return ck
}

// acked records an acknowledged record. Its delivery may have come
// first (the broker fans a record out before the ack reaches the
// publisher): a record at an offset already passed was delivered, since
// offsets are checked contiguous; the recent deliveries say with what id.
func (ck *checker) acked(shard uint32, id int, off uint64, has bool) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	s := ck.shards[shard]
	if has && off < s.next {
		if got, ok := s.recent[off]; ok && got != id {
			s.dups++
			ck.problem("shard %d: id %d acknowledged at offset %d, which delivered id %d", shard, id, off, got)
		}
		return
	}
	if !has && id <= s.lastID {
		return
	}
	s.pending = append(s.pending, ack{id: id, offset: off, hasOffset: has})
}

func (ck *checker) maybe(shard uint32, id int) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	s := ck.shards[shard]
	if id <= s.lastID {
		return
	}
	s.pending = append(s.pending, ack{id: id, maybe: true})
}

func (ck *checker) problem(format string, args ...any) {
	if len(ck.problems) < 20 {
		ck.problems = append(ck.problems, fmt.Sprintf(format, args...))
	}
}

func (ck *checker) deliver(shard uint32, off uint64, payload string) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	if int(shard) >= len(ck.shards) {
		ck.problem("a record of shard %d", shard)
		return
	}
	s := ck.shards[shard]
	id, err := strconv.Atoi(payload)
	if err != nil {
		ck.problem("shard %d offset %d: payload %q", shard, off, payload)
		return
	}
	if off != s.next || id <= s.lastID {
		s.dups++
		ck.problem("shard %d: offset %d (expected %d), id %d after %d", shard, off, s.next, id, s.lastID)
		if off < s.next {
			return // a duplicate: nothing more to check
		}
	}
	s.next, s.lastID = off+1, id
	s.delivered++
	s.recent[off] = id
	delete(s.recent, off-recentDeliveries)
	// Acknowledged records before id were never delivered: lost.
	i := 0
	for i < len(s.pending) && s.pending[i].id < id {
		if !s.pending[i].maybe {
			s.missing++
			ck.problem("shard %d: acknowledged id %d (offset %d) missing", shard, s.pending[i].id, s.pending[i].offset)
		}
		i++
	}
	if i < len(s.pending) && s.pending[i].id == id {
		if a := s.pending[i]; a.hasOffset && a.offset != off {
			ck.problem("shard %d: id %d acknowledged at offset %d, delivered at %d", shard, id, a.offset, off)
			s.dups++
		}
		i++
	}
	s.pending = slices.Delete(s.pending, 0, i)
	ck.checkCaughtLocked()
}

// finish says no more records will be acknowledged.
func (ck *checker) finish() {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	ck.done = true
	ck.checkCaughtLocked()
}

// checkCaughtLocked closes caught once, publishing over, every
// acknowledged record was delivered (ambiguous ones may stay pending:
// they may not exist).
func (ck *checker) checkCaughtLocked() {
	if !ck.done {
		return
	}
	select {
	case <-ck.caught:
		return
	default:
	}
	for _, s := range ck.shards {
		for _, a := range s.pending {
			if !a.maybe {
				return
			}
		}
	}
	close(ck.caught)
}

// state describes what is still pending, per shard.
func (ck *checker) state() string {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	var b strings.Builder
	for i, s := range ck.shards {
		fmt.Fprintf(&b, "[shard %d: next offset %d, last id %d, %d pending", i, s.next, s.lastID, len(s.pending))
		if len(s.pending) > 0 {
			fmt.Fprintf(&b, " from id %d offset %d maybe %v", s.pending[0].id, s.pending[0].offset, s.pending[0].maybe)
		}
		b.WriteString("] ")
	}
	return b.String()
}

func (ck *checker) result() (delivered, missing, dups int) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	for _, s := range ck.shards {
		delivered += s.delivered
		dups += s.dups
		missing += s.missing
		for _, a := range s.pending {
			if !a.maybe {
				missing++
			}
		}
	}
	return delivered, missing, dups
}
