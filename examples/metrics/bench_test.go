package metrics_test

import (
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/examples/metrics"
)

// BenchmarkFrameHook is the cost of the Prometheus adapter per frame: the
// series are resolved up front, so a frame is one counter increment and
// one add (no allocation).
func BenchmarkFrameHook(b *testing.B) {
	h := metrics.New("").Hooks()
	ev := conn.FrameInfo{Side: conn.SideClient, StreamID: 4, Flags: felix.FlagBinaryPublishBatch | felix.FlagBinaryPublishAcked,
		Layout: felix.LayoutAckedPublishBatch, Bytes: 6500}
	b.ReportAllocs()
	for range b.N {
		h.FrameWritten(ev)
	}
}
