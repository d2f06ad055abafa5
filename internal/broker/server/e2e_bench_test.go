package server_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// BenchmarkEndToEnd measures the broker end to end over QUIC on loopback:
// one publisher client pipelines acked binary batches (PublishBatchAsync,
// up to the granted publish window in flight) to one durable stream, and
// 1, 10 or 100 subscribers (spread over up to 4 client connections, default
// delivery mode) read every record with Next. Records are 100 B, 1 KiB or
// 64 KiB; a batch holds 64 records (4 of 64 KiB). One op is one published
// batch, acknowledged and delivered to every subscriber. The publisher
// stays at most 64 batches ahead of the slowest subscriber, so no queue
// drops (checked).
//
// Metrics: MB/s (SetBytes: payload bytes published), pub-rec/s (records
// published per second), deliv-rec/s and deliv-MB/s (records and payload
// bytes delivered, summed over the subscribers), encodes/batch (event frames
// the broker encoded per batch: 1 whatever the subscriber count),
// allocs/delivered-batch (every allocation of the process, clients
// included, per batch delivered to one subscriber), cpu-µs/op and
// cpu-µs/delivered-batch (process CPU time, which the load of other
// processes on a shared machine inflates far less than wall time).
func BenchmarkEndToEnd(b *testing.B) {
	for _, size := range []int{100, 1 << 10, 64 << 10} {
		for _, subs := range []int{1, 10, 100} {
			b.Run("rec="+sizeName(size)+"/subs="+strconv.Itoa(subs), func(b *testing.B) { benchEndToEnd(b, size, subs) })
		}
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

func benchEndToEnd(b *testing.B, size, nsubs int) {
	records := 64
	if size >= 64<<10 {
		records = 4
	}
	const capacity, ahead = 256, 64
	cfg := durableCfg()
	cfg.Engine.DefaultQueueCapacity = capacity
	cfg.Engine.DefaultStream.RetainRecords = 4 * ahead * records
	srv := startBroker(b, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := make([]*conn.Client, min(nsubs, 4))
	for i := range clients {
		clients[i] = dial(b, srv, nil)
	}
	// consumed[i] counts the batches subscriber i has read to the end;
	// progress wakes the publisher when the slowest one may have moved.
	consumed := make([]atomic.Int64, nsubs)
	progress := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for i := range nsubs {
		sub, err := clients[i%len(clients)].Subscribe(ctx, topic, conn.SubscribeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.Close()
			for {
				ev, err := sub.Next(ctx)
				if err != nil {
					return
				}
				if ev.Offset%uint64(records) == uint64(records)-1 {
					consumed[i].Add(1)
					select {
					case progress <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	slowest := func() int64 {
		m := consumed[0].Load()
		for i := range consumed {
			m = min(m, consumed[i].Load())
		}
		return m
	}
	waitAll := func(n int64) {
		for slowest() < n {
			<-progress
		}
	}
	pub := dial(b, srv, nil)
	payloads := make([][]byte, records)
	for i := range payloads {
		payloads[i] = make([]byte, size)
	}
	var acked sync.WaitGroup
	done := func(_ felix.PublishResult, err error) {
		if err != nil {
			b.Error(err)
		}
		acked.Done()
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	enc0 := srv.Stats().Engine.EventEncodes
	b.SetBytes(int64(records * size))
	b.ResetTimer()
	cpu0, _ := processCPU()
	start := time.Now()
	for i := range b.N {
		if lag := int64(i) - ahead; lag > 0 {
			waitAll(lag)
		}
		acked.Add(1)
		if err := pub.PublishBatchAsync(ctx, topic, payloads, conn.PublishOptions{Ack: felix.AckPerBatch}, done); err != nil {
			b.Fatal(err)
		}
	}
	acked.Wait()
	waitAll(int64(b.N))
	elapsed := time.Since(start)
	cpu1, cpuOK := processCPU()
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	st := srv.Stats().Engine
	cancel()
	for _, c := range clients {
		_ = c.Close()
	}
	wg.Wait()
	if st.DroppedBatches != 0 {
		b.Fatalf("%d batches dropped", st.DroppedBatches)
	}
	published := float64(b.N * records)
	delivered := published * float64(nsubs)
	b.ReportMetric(published/elapsed.Seconds(), "pub-rec/s")
	b.ReportMetric(delivered/elapsed.Seconds(), "deliv-rec/s")
	b.ReportMetric(delivered*float64(size)/1e6/elapsed.Seconds(), "deliv-MB/s")
	b.ReportMetric(float64(st.EventEncodes-enc0)/float64(b.N), "encodes/batch")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/(float64(b.N)*float64(nsubs)), "allocs/delivered-batch")
	if cpuOK {
		// CPU time of the whole process (broker, publisher and
		// subscribers) per delivered batch: flat in the subscriber count
		// when fanout costs the broker nothing per extra subscriber beyond
		// the transport.
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/(float64(b.N)*float64(nsubs)), "cpu-µs/delivered-batch")
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	}
}
