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

// BenchmarkQUICFanout is BenchmarkFanout of package engine over real QUIC
// on loopback: one publisher sends acked batches of 16 records of 64 bytes;
// 1, 10 or 100 subscribers (spread over up to 4 client connections) read
// them. One op is one published batch. Metrics: events/s delivered to all
// subscribers, encodes/batch (event frames the broker encoded per published
// batch), allocs/delivered-batch (all allocations of the process, clients
// included, per batch delivered to one subscriber).
//
// The size=1KiB (16 records of 1 KiB) and size=64KiB (4 records of 64
// KiB) rows, at 1 and 10 subscribers, profile the send path with records
// the size of the subscriber benchmarks'.
func BenchmarkQUICFanout(b *testing.B) {
	for _, subs := range []int{1, 10, 100} {
		b.Run("subs="+strconv.Itoa(subs), func(b *testing.B) { benchQUICFanout(b, subs, 16, 64) })
	}
	for _, sz := range []struct {
		name          string
		records, size int
	}{{"1KiB", 16, 1 << 10}, {"64KiB", 4, 64 << 10}} {
		for _, subs := range []int{1, 10} {
			b.Run("size="+sz.name+"/subs="+strconv.Itoa(subs), func(b *testing.B) { benchQUICFanout(b, subs, sz.records, sz.size) })
		}
	}
}

func benchQUICFanout(b *testing.B, nsubs, records, size int) {
	const capacity = 4096
	cfg := durableCfg()
	cfg.Engine.DefaultQueueCapacity = capacity
	cfg.Engine.DefaultStream.RetainRecords = 1 << 16
	srv := startBroker(b, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := make([]*conn.Client, min(nsubs, 4))
	for i := range clients {
		clients[i] = dial(b, srv, nil)
	}
	consumed := make([]atomic.Int64, nsubs)
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
				}
			}
		}()
	}
	pub := dial(b, srv, nil)
	payloads := make([][]byte, records)
	for i := range payloads {
		payloads[i] = make([]byte, size)
	}
	waitAll := func(n int64) {
		for i := range consumed {
			for consumed[i].Load() < n {
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
	// The publisher runs at most lead batches ahead of the slowest
	// subscriber: half the queue, and at most 8 MiB of records.
	lead := int64(min(capacity/2, max(16, (8<<20)/(records*size))))
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	enc0 := srv.Stats().Engine.EventEncodes
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if _, err := pub.PublishBatch(ctx, topic, payloads, conn.PublishOptions{Ack: felix.AckPerBatch}); err != nil {
			b.Fatal(err)
		}
		if lag := int64(i) - lead; lag > 0 && i%16 == 0 {
			waitAll(lag)
		}
	}
	waitAll(int64(b.N))
	elapsed := time.Since(start)
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
	delivered := float64(b.N * nsubs)
	b.SetBytes(int64(records * size))
	b.ReportMetric(delivered*float64(records)/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(st.EventEncodes-enc0)/float64(b.N), "encodes/batch")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/delivered, "allocs/delivered-batch")
}
