package server_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

const lagFlags = rawFlags | felix.FlagEventBatchOffsets
const lagFeats = felix.FeatureSubscriptionLagged | felix.FeatureSubscribeQueue | felix.FeatureErrorCodes

// stalledSubscriber subscribes on a raw connection asking for a huge
// queue and never reads its event stream.
func stalledSubscriber(t *testing.T, srv *server.Server) (*raw, uint64) {
	t.Helper()
	r := dialRaw(t, srv)
	s := r.stream(t, lagFlags, lagFeats)
	s.send(&felix.Subscribe{TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream,
		QueueCapacity: felix.Some(uint32(4096))})
	m := s.recv()
	sub, ok := m.(*felix.Subscribed)
	require.True(t, ok, "%T %v", m, m)
	return r, sub.SubscriptionID
}

// Finding 2: a subscriber that never reads, asking for 4096 queued
// batches, pins at most its byte bound: the heap stays within retention +
// queue bound + slack while 48 MiB flow past; the stalled subscriber is
// lagged, and once it reads it gets a contiguous prefix and then
// subscription_lagged naming its resume offset; a subscriber that keeps up
// gets everything.
func TestStalledSubscriberBoundedInBytes(t *testing.T) {
	const batches, size = 192, 256 << 10
	cfg := durableCfg()
	cfg.Engine.DefaultStream.RetainBytes = 4 << 20
	cfg.Engine.SubscriberQueueBytes = 4 << 20
	cfg.Engine.MaxQueuedBytes = 16 << 20
	// The stalled subscriber reads again only at the end, however long the
	// flow takes on a loaded machine: the write watchdog must not reset
	// its event stream first (TestStalledEventWriteTimesOut covers the watchdog).
	cfg.EventWriteTimeout = time.Hour
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	pub := dial(t, srv, nil)
	fastC := dial(t, srv, nil)
	fast, err := fastC.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer fast.Close()
	// The fast subscriber reads each record before the next is published
	// (lockstep), so it never falls behind, however loaded the machine.
	got := make(chan error)
	go func() {
		for off := uint64(0); off < batches; off++ {
			ev, err := fast.Next(ctx)
			if err == nil && ev.Offset != off {
				err = fmt.Errorf("offset %d, want %d", ev.Offset, off)
			}
			got <- err
			if err != nil {
				return
			}
		}
	}()
	r, subID := stalledSubscriber(t, srv)

	before := heapAfterGC()
	payload := bytes.Repeat([]byte("p"), size)
	var peak uint64
	for i := range batches {
		_, err := pub.Publish(ctx, topic, payload, conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
		require.NoError(t, <-got, "the fast subscriber gets every record")
		if i%16 == 15 {
			peak = max(peak, srv.Stats().Engine.QueuedBytes)
		}
	}
	after := heapAfterGC()
	grew := int64(after) - int64(before)
	t.Logf("heap grew %d KiB; peak queued %d KiB", grew>>10, peak>>10)
	require.Less(t, grew, int64(24<<20), "retention 4 MiB + queue 4 MiB + frames in flight, not %d MiB", batches*size>>20)
	require.LessOrEqual(t, peak, uint64(16<<20+2*size), "engine-wide queued bytes stay bounded")
	require.Positive(t, srv.Stats().Engine.LaggedSubscriptions+srv.Stats().Engine.DroppedBatches)

	// The stalled subscriber now reads: offsets from 0, contiguous, then
	// the lag report.
	us, err := r.qc.AcceptUniStream(ctx)
	require.NoError(t, err)
	rd := felix.NewReader(us)
	_ = us.SetReadDeadline(time.Now().Add(time.Minute))
	f, err := rd.ReadFrame()
	require.NoError(t, err)
	m, err := felix.DecodeMessage(f.Payload)
	require.NoError(t, err)
	require.Equal(t, subID, m.(*felix.EventStreamHello).SubscriptionID)
	next := uint64(0)
	for {
		f, err := rd.ReadFrame()
		require.NoError(t, err)
		if f.Flags == 0 {
			m, err := felix.DecodeMessage(f.Payload)
			require.NoError(t, err)
			lag, ok := m.(*felix.SubscriptionLagged)
			require.True(t, ok, "%T", m)
			require.Equal(t, next, lag.ResumeFrom)
			break
		}
		ev, err := felix.ParseEventBatch(f.Flags, f.Payload)
		require.NoError(t, err)
		require.Equal(t, next, ev.BaseOffset)
		next += uint64(ev.Len())
	}
	require.Less(t, next, uint64(batches))
	_, err = rd.ReadFrame()
	require.Error(t, err, "the lag report is last")
	checkServing(t, pub)
}

// A write to an event stream whose client stopped reading blocks only
// EventWriteTimeout: the stream is then reset and the subscription freed.
func TestStalledEventWriteTimesOut(t *testing.T) {
	cfg := durableCfg()
	cfg.EventWriteTimeout = 100 * time.Millisecond
	cfg.Engine.DefaultStream.RetainBytes = 4 << 20
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	pub := dial(t, srv, nil)
	stalledSubscriber(t, srv)
	require.Equal(t, uint64(1), srv.Stats().Engine.ActiveSubscriptions)
	payload := bytes.Repeat([]byte("p"), 256<<10)
	for srv.Stats().EventWriteTimeouts == 0 {
		_, err := pub.Publish(ctx, topic, payload, conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	waitFor(t, func() bool { return srv.Stats().Engine.ActiveSubscriptions == 0 }, "the stalled subscription is freed")
	require.Zero(t, srv.Stats().Engine.QueuedBytes, "its queue is given back")
	checkServing(t, pub)
}
