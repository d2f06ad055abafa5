package conn_test

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// Over the reference broker: two hook sets joined with JoinHooks both see
// every frame the client writes, and TransportStats counts at least those
// frames' bytes (QUIC adds its own), grows with what is sent, and keeps
// its final counts after Close.
func TestTransportStatsAndJoinedHooks(t *testing.T) {
	srv := startRef(t, nil)
	var a, b atomic.Int64
	var frameBytes atomic.Int64
	ha := &conn.Hooks{FrameWritten: func(e conn.FrameInfo) { a.Add(1); frameBytes.Add(int64(e.Bytes)) }}
	hb := &conn.Hooks{FrameWritten: func(conn.FrameInfo) { b.Add(1) }}
	c := dialRef(t, srv, func(cfg *conn.Config) { cfg.Hooks = conn.JoinHooks(ha, hb) })
	topic := felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "bytes"}

	before := c.TransportStats()
	payload := bytes.Repeat([]byte("b"), 50_000)
	_, err := c.PublishBatch(testCtx(t), topic, [][]byte{payload}, conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	mid := c.TransportStats()
	require.Equal(t, a.Load(), b.Load(), "both joined sets saw every frame")
	require.NotZero(t, a.Load())
	require.GreaterOrEqual(t, mid.BytesSent, uint64(frameBytes.Load()), "QUIC carries at least the frames written")
	require.Greater(t, mid.BytesSent-before.BytesSent, uint64(len(payload)))
	require.Greater(t, mid.BytesReceived, before.BytesReceived, "the ack came back")
	require.NotZero(t, mid.PacketsSent)
	require.NotZero(t, mid.PacketsReceived)

	require.NoError(t, c.Close())
	after := c.TransportStats()
	require.GreaterOrEqual(t, after.BytesSent, mid.BytesSent)
	require.GreaterOrEqual(t, after.BytesReceived, mid.BytesReceived)
}
