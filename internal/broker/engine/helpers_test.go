package engine

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a settable clock for Config.Now.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// event is a decoded 0x0004 event frame.
type event struct {
	flags     felix.Flags
	base      uint64
	skipped   uint64
	publisher string
	ts        []uint64
	payloads  []string
}

// decodeEvent decodes a shared event frame per docs/binary.md §8,
// rejecting truncation and trailing bytes.
func decodeEvent(t testing.TB, frame []byte) event {
	t.Helper()
	f, err := felix.DecodeFrame(frame, 0)
	if err != nil {
		t.Fatalf("frame: %v", err)
	}
	if err := f.Flags.CheckLayout(felix.LayoutEventBatch); err != nil {
		t.Fatalf("flags: %v", err)
	}
	if !f.Flags.Has(felix.FlagBinaryEventBatchShared) {
		t.Fatalf("not a shared batch: %v", f.Flags)
	}
	p := f.Payload
	need := func(n int) {
		if len(p) < n {
			t.Fatalf("truncated: need %d have %d", n, len(p))
		}
	}
	ev := event{flags: f.Flags}
	if f.Flags.Has(felix.FlagEventBatchOffsets) {
		need(8)
		ev.base, p = binary.BigEndian.Uint64(p), p[8:]
	}
	if f.Flags.Has(felix.FlagEventBatchSkipped) {
		need(8)
		ev.skipped, p = binary.BigEndian.Uint64(p), p[8:]
	}
	if f.Flags.Has(felix.FlagEventBatchPublisher) {
		need(1)
		n := int(p[0])
		need(1 + n)
		ev.publisher, p = string(p[1:1+n]), p[1+n:]
	}
	need(4)
	count := binary.BigEndian.Uint32(p)
	p = p[4:]
	for range count {
		if f.Flags.Has(felix.FlagEventBatchTimestamps) {
			need(8)
			ev.ts = append(ev.ts, binary.BigEndian.Uint64(p))
			p = p[8:]
		}
		need(4)
		n := int(binary.BigEndian.Uint32(p))
		need(4 + n)
		ev.payloads = append(ev.payloads, string(p[4:4+n]))
		p = p[4+n:]
	}
	if len(p) != 0 {
		t.Fatalf("%d trailing bytes", len(p))
	}
	return ev
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	// Bounded by the test binary's -timeout only: the machine running the
	// tests may be heavily loaded, so no guess of how long calls take.
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Until(d)/10))
		}
	}
	t.Cleanup(cancel)
	return ctx
}

func next(t testing.TB, s *Subscription) Delivery {
	t.Helper()
	d, err := s.Next(ctxT(t))
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return d
}

// noDelivery checks that nothing is ready on s within a short wait.
func noDelivery(t testing.TB, s *Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	d, err := s.Next(ctx)
	if err == nil {
		t.Fatalf("unexpected delivery %+v", d)
	}
}

func pub(t testing.TB, e *Engine, topic Topic, payloads ...string) PublishResult {
	t.Helper()
	ps := make([][]byte, len(payloads))
	for i, p := range payloads {
		ps[i] = []byte(p)
	}
	r, err := e.Publish(PublishRequest{Topic: topic, Payloads: ps, Publisher: "alice"})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return r
}

var durable = StreamConfig{Durable: true}
