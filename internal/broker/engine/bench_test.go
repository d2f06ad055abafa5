package engine

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flxproto/felix"
)

// BenchmarkFanout publishes batches of 16 records of 64 bytes to one durable
// shard with 1, 10, 100 and 1,000 subscribers, each in its own goroutine
// blocked in Next, taking the shared frame of every batch; the /notify
// variants consume as the broker does (internal/broker/server/delivery.go):
// no goroutine per subscriber, Notify marks one ready and a few consumer
// goroutines (GOMAXPROCS) drain it with TryNext. One op is one published batch. Metrics:
// events/s delivered to all subscribers, encodes/batch (event frames
// encoded per published batch: one per distinct modifier set, whatever the
// number of subscribers), allocs/delivered-batch (every allocation of the
// run, publisher included, divided by the batches delivered).
func BenchmarkFanout(b *testing.B) {
	for _, subs := range []int{1, 10, 100, 1000} {
		for _, sets := range []int{1, 2} {
			name := "subs=" + strconv.Itoa(subs) + "/modsets=" + strconv.Itoa(sets)
			b.Run(name, func(b *testing.B) { benchFanout(b, subs, sets, false) })
			b.Run(name+"/notify", func(b *testing.B) { benchFanout(b, subs, sets, true) })
		}
	}
}

func benchFanout(b *testing.B, nsubs, sets int, notify bool) {
	const records, size, capacity = 16, 64, 4096
	e := New(Config{DefaultStream: StreamConfig{Durable: true, RetainRecords: 1 << 16}, DefaultQueueCapacity: capacity})
	defer e.Close()
	mods := []felix.Flags{felix.FlagEventBatchOffsets, felix.FlagEventBatchOffsets | felix.FlagEventBatchTimestamps}
	consumed := make([]atomic.Int64, nsubs)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drain := func(i int, s *Subscription, d Delivery) {
		_ = len(d.Frame)
		d.Release() // as the broker does once the frame is written
		consumed[i].Add(1)
	}
	if notify {
		// Subscriber i belongs to consumer i%nc, which alone calls its
		// TryNext; queued[i] keeps it at most once in ready[i%nc].
		nc := runtime.GOMAXPROCS(0)
		ready := make([]chan int, nc)
		for c := range ready {
			ready[c] = make(chan int, nsubs)
		}
		queued := make([]atomic.Bool, nsubs)
		subs := make([]*Subscription, nsubs)
		for i := range nsubs {
			s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: mods[i%sets], Notify: func() {
				if queued[i].CompareAndSwap(false, true) {
					ready[i%nc] <- i
				}
			}})
			if err != nil {
				b.Fatal(err)
			}
			subs[i] = s
			defer s.Close()
		}
		for c := range nc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case i := <-ready[c]:
						queued[i].Store(false)
						for {
							d, ok, err := subs[i].TryNext()
							if err != nil || !ok {
								break
							}
							drain(i, subs[i], d)
						}
					case <-ctx.Done():
						return
					}
				}
			}()
		}
	}
	for i := range nsubs {
		if notify {
			break
		}
		s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: mods[i%sets]})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			for {
				d, err := s.Next(ctx)
				if err != nil {
					return
				}
				drain(i, s, d)
			}
		}()
	}
	payloads := make([][]byte, records)
	for i := range payloads {
		payloads[i] = make([]byte, size)
	}
	req := PublishRequest{Topic: tp, Payloads: payloads, Publisher: "bench"}
	waitAll := func(n int64) {
		for i := range consumed {
			for consumed[i].Load() < n {
				runtime.Gosched()
			}
		}
	}
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	enc0 := e.Stats().EventEncodes
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if _, err := e.Publish(req); err != nil {
			b.Fatal(err)
		}
		if lag := int64(i) - capacity/2; lag > 0 && i%256 == 0 {
			waitAll(lag) // keep every queue below capacity: measure delivery, not drops
		}
	}
	waitAll(int64(b.N))
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	cancel()
	wg.Wait()
	st := e.Stats()
	if st.DroppedBatches != 0 {
		b.Fatalf("%d batches dropped", st.DroppedBatches)
	}
	delivered := float64(b.N * nsubs)
	b.ReportMetric(delivered*records/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(st.EventEncodes-enc0)/float64(b.N), "encodes/batch")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/delivered, "allocs/delivered-batch")
}
