package engine

import (
	"bytes"
	"context"
	"testing"

	"github.com/flxproto/felix"
)

// sendEngine returns an engine whose durable stream tp holds pages
// batches of records × size-byte records, retained whole.
func sendEngine(t testing.TB, batches, records, size int) *Engine {
	t.Helper()
	e := New(Config{DefaultStream: StreamConfig{Durable: true, RetainRecords: 1 << 20, RetainBytes: 1 << 32},
		DefaultQueueCapacity: 1024, MaxQueueCapacity: 1024,
		SubscriberQueueBytes: 1 << 32, MaxQueuedBytes: 1 << 33})
	payloads := make([][]byte, records)
	for i := range payloads {
		payloads[i] = bytes.Repeat([]byte{byte(i)}, size)
	}
	for range batches {
		if _, err := e.Publish(PublishRequest{Topic: tp, Payloads: payloads, Publisher: "bench"}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// A released delivery's frame is reused for later batches: once warm, a
// subscription's send path (Next, the frame encode, Release) allocates
// nothing per batch, from history and from its live queue.
func TestDeliveryAllocatesNothing(t *testing.T) {
	const pages = 64
	mods := felix.FlagEventBatchOffsets | felix.FlagEventBatchTimestamps | felix.FlagEventBatchPublisher
	e := sendEngine(t, 8*pages, 16, 1<<10) // 128 history pages of 64 records
	defer e.Close()
	ctx := context.Background()
	hist, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartEarliest}, Mods: mods})
	if err != nil {
		t.Fatal(err)
	}
	defer hist.Close()
	lt := Topic{Tenant: tp.Tenant, Namespace: tp.Namespace, Stream: "live"} // hist holds none of its batches
	live, _, err := e.Subscribe(SubscribeRequest{Topic: lt, Mods: mods})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	payloads := [][]byte{make([]byte, 1<<10), make([]byte, 1<<10)}
	for range pages + 2 {
		if _, err := e.Publish(PublishRequest{Topic: lt, Payloads: payloads, Publisher: "bench"}); err != nil {
			t.Fatal(err)
		}
	}
	for name, s := range map[string]*Subscription{"history": hist, "live": live} {
		allocs := testing.AllocsPerRun(pages, func() {
			d, err := s.Next(ctx)
			if err != nil || len(d.Frame) == 0 {
				t.Fatalf("Next: %v (frame %d bytes)", err, len(d.Frame))
			}
			d.Release()
		})
		if allocs != 0 {
			t.Errorf("%s: %.1f allocations per delivered batch, want 0", name, allocs)
		}
	}
}

// A frame shared by several subscribers stays intact until the last one
// released it, is encoded once, and a released Delivery no longer shows it.
// (With timestamps: a pooled frame, not the log's own.)
func TestSharedFrameOutlivesOneRelease(t *testing.T) {
	e := New(Config{DefaultStream: durable})
	defer e.Close()
	const mods = felix.FlagEventBatchOffsets | felix.FlagEventBatchTimestamps
	a, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: mods})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: mods})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pub(t, e, tp, "one", "two")
	da := next(t, a)
	want := bytes.Clone(da.Frame)
	da.Release()
	da.Release() // idempotent
	if da.Frame != nil {
		t.Fatal("a released delivery still shows its frame")
	}
	pub(t, e, tp, "three") // its frame must not take a's buffer while b holds it
	db := next(t, b)
	if !bytes.Equal(db.Frame, want) {
		t.Fatalf("b's frame changed after a released it:\n%x\nwant\n%x", db.Frame, want)
	}
	dc := next(t, a)
	if !bytes.Equal(db.Frame, want) {
		t.Fatal("b's frame was reused while b held it")
	}
	db.Release()
	dc.Release()
	dd := next(t, b)
	dd.Release()
	if got := e.Stats().EventEncodes; got != 2 {
		t.Fatalf("%d encodes, want 2 (one per batch)", got)
	}
	if q := e.QueuedBytes(); q != 0 {
		t.Fatalf("%d bytes still charged to the queues", q)
	}
}

// A frame handed out by Batch.Frame is never recycled.
func TestFrameKeptByCallerNotRecycled(t *testing.T) {
	e := New(Config{DefaultStream: durable})
	defer e.Close()
	s, _, err := e.Subscribe(SubscribeRequest{Topic: tp, Mods: felix.FlagEventBatchOffsets})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pub(t, e, tp, "kept")
	d := next(t, s)
	kept := d.Batch.Frame(felix.FlagEventBatchOffsets)
	want := bytes.Clone(kept)
	d.Release()
	pub(t, e, tp, "next")
	d2 := next(t, s)
	defer d2.Release()
	if !bytes.Equal(kept, want) {
		t.Fatal("a frame returned by Frame was recycled")
	}
}

// BenchmarkDelivery is the engine's half of the broker's send path: a
// subscription's Next (history pages of a durable stream, or its live
// queue), the event frame encode and Release, as pumpSubscription runs
// them. One op is one delivered batch; allocs/op must be 0.
func BenchmarkDelivery(b *testing.B) {
	for _, c := range []struct {
		name          string
		records, size int
	}{{"100B", 64, 100}, {"1KiB", 64, 1 << 10}, {"64KiB", 1, 64 << 10}} {
		for _, from := range []string{"history", "live"} {
			// Every modifier: frames encoded record by record. Offsets
			// only (a default client): the log's stored frames.
			all := felix.FlagEventBatchOffsets | felix.FlagEventBatchTimestamps | felix.FlagEventBatchPublisher
			b.Run("rec="+c.name+"/"+from, func(b *testing.B) { benchDelivery(b, from == "history", all, c.records, c.size) })
			b.Run("rec="+c.name+"/"+from+"/offsets", func(b *testing.B) {
				benchDelivery(b, from == "history", felix.FlagEventBatchOffsets, c.records, c.size)
			})
		}
	}
}

func benchDelivery(b *testing.B, history bool, mods felix.Flags, records, size int) {
	const batches = 256
	ctx := context.Background()
	var e *Engine
	var s *Subscription
	refill := func() {
		if e != nil {
			s.Close()
			e.Close()
		}
		start := Start{Kind: StartLatest}
		if history {
			e = sendEngine(b, batches, records, size)
			start = Start{Kind: StartEarliest}
		} else {
			e = sendEngine(b, 0, records, size)
		}
		var err error
		if s, _, err = e.Subscribe(SubscribeRequest{Topic: tp, Start: start, Mods: mods}); err != nil {
			b.Fatal(err)
		}
		if !history {
			payloads := make([][]byte, records)
			for i := range payloads {
				payloads[i] = make([]byte, size)
			}
			for range batches {
				if _, err := e.Publish(PublishRequest{Topic: tp, Payloads: payloads, Publisher: "bench"}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	refill()
	defer func() { s.Close(); e.Close() }()
	b.ReportAllocs()
	b.SetBytes(int64(records * size))
	b.ResetTimer()
	left := batches
	for range b.N {
		if left == 0 {
			b.StopTimer() // a new log: not the send path
			refill()
			left = batches
			b.StartTimer()
		}
		d, err := s.Next(ctx)
		if err != nil || len(d.Batch.Payloads) != records {
			b.Fatalf("Next: %v", err)
		}
		d.Release()
		left--
	}
}
