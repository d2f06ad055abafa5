package main

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// -ack decides what crosses the wire, not only what the report shows: the
// broker reads every publish batch of -ack none without the acknowledged
// flag (publishes are acknowledged unless the client says otherwise, so
// bench must ask for none explicitly), and every batch of -ack batch with
// it.
func TestBenchAckModeOnTheWire(t *testing.T) {
	var acked, unacked atomic.Int64
	hooks := &conn.Hooks{FrameRead: func(fi conn.FrameInfo) {
		if fi.Flags&felix.FlagBinaryPublishBatch == 0 {
			return
		}
		if fi.Flags&felix.FlagBinaryPublishAcked != 0 {
			acked.Add(1)
		} else {
			unacked.Add(1)
		}
	}}
	_, b := listenTestBroker(t, server.Config{Hooks: hooks, Engine: engine.Config{DefaultStream: engine.StreamConfig{Durable: true}}})
	for _, c := range []struct {
		ack           string
		acked, others *atomic.Int64
	}{{benchAckNone, &unacked, &acked}, {benchAckBatch, &acked, &unacked}} {
		acked.Store(0)
		unacked.Store(0)
		const n, batch = 64, 8
		r, _ := runBenchJSON(t, append(append([]string{"pub"}, b...), "-json", "-progress", "0", "-n", fmt.Sprint(n),
			"-batch", fmt.Sprint(batch), "-size", "100", "-ack", c.ack, "-warmup", "0s", "wire-"+c.ack)...)
		require.Equal(t, int64(n), r.Published.Records, c.ack)
		require.GreaterOrEqual(t, c.acked.Load(), int64(n/batch), "-ack %s: batches read with the expected ack flag", c.ack)
		require.Zero(t, c.others.Load(), "-ack %s: batches read with the other ack flag", c.ack)
	}
}
