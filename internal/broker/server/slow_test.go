package server_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// A subscriber that stops reading while another keeps up: publishers are
// not held back (every acked publish completes while the slow one reads
// nothing), the fast subscriber gets everything, and the slow one, once it
// reads again, gets what was queued and then subscription_lagged naming the
// first offset it missed; resuming there loses nothing.
func TestSlowSubscriberLagged(t *testing.T) {
	const n = 3000
	payload := bytes.Repeat([]byte("x"), 4096) // 12 MiB in all: far more than the QUIC windows
	srv := startBroker(t, slowCfg())
	ctx := ctxT(t)

	slowC := dial(t, srv, nil)
	slow, err := slowC.Subscribe(ctx, topic, conn.SubscribeOptions{QueueCapacity: 16})
	require.NoError(t, err)
	defer slow.Close()
	require.Equal(t, uint32(16), slow.Info().QueueCapacity.V)

	fastC := dial(t, srv, nil)
	fast, err := fastC.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer fast.Close()
	fastDone := make(chan error, 1)
	go func() {
		for off := uint64(0); off < n; off++ {
			ev, err := fast.Next(ctx)
			if err != nil {
				fastDone <- err
				return
			}
			if ev.Offset != off {
				fastDone <- fmt.Errorf("fast subscriber: offset %d, want %d", ev.Offset, off)
				return
			}
		}
		fastDone <- nil
	}()

	pub := dial(t, srv, nil)
	for i := range n {
		_, err := pub.Publish(ctx, topic, append(fmt.Appendf(nil, "%06d", i), payload...), conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	require.NoError(t, <-fastDone, "the fast subscriber kept up")
	require.Positive(t, srv.Stats().Engine.LaggedSubscriptions+srv.Stats().Engine.DroppedBatches)

	// Now the slow one reads: a contiguous prefix, then the lag report.
	var next uint64
	var lagged *felix.LaggedError
	for {
		ev, err := slow.Next(ctx)
		if err != nil {
			require.ErrorAs(t, err, &lagged)
			break
		}
		require.Equal(t, next, ev.Offset)
		next++
	}
	require.Equal(t, next, lagged.ResumeFrom, "resume where delivery stopped")
	require.Less(t, next, uint64(n))
	require.Equal(t, uint64(1), srv.Stats().Engine.LaggedSubscriptions)

	again, err := slowC.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartAt(lagged.ResumeFrom)})
	require.NoError(t, err)
	defer again.Close()
	for off := lagged.ResumeFrom; off < n; off++ {
		ev, err := again.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, off, ev.Offset)
		require.Equal(t, fmt.Sprintf("%06d", off), string(ev.Payload[:6]))
	}
}

// Without FEATURE_SUBSCRIPTION_LAGGED a slow subscriber is not ended: the
// drop shows as a gap in the offsets.
func TestSlowSubscriberGapWithoutLagFeature(t *testing.T) {
	const n = 2000
	payload := bytes.Repeat([]byte("y"), 8192)
	srv := startBroker(t, slowCfg())
	ctx := ctxT(t)
	slowC := dial(t, srv, func(c *conn.Config) {
		c.Features = felix.DefaultClientFeatures() &^ felix.FeatureSubscriptionLagged
	})
	slow, err := slowC.Subscribe(ctx, topic, conn.SubscribeOptions{QueueCapacity: 8})
	require.NoError(t, err)
	defer slow.Close()
	pub := dial(t, srv, nil)
	for range n {
		_, err := pub.Publish(ctx, topic, payload, conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	// The slow subscriber's queue is full, so markers published now may be
	// dropped too: keep publishing one until it sees one.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := pub.Publish(ctx, topic, []byte("last"), conn.PublishOptions{Ack: felix.AckPerBatch}); err != nil {
				return
			}
		}
	}()
	prev := int64(-1)
	gaps := 0
	for {
		ev, err := slow.Next(ctx)
		require.NoError(t, err)
		require.Greater(t, int64(ev.Offset), prev)
		if int64(ev.Offset) != prev+1 {
			gaps++
		}
		prev = int64(ev.Offset)
		if string(ev.Payload) == "last" {
			break
		}
	}
	require.Positive(t, gaps, "the dropped batches show as an offset gap")
	require.Zero(t, srv.Stats().Engine.LaggedSubscriptions)
}

// slowCfg is durableCfg for tests whose slow subscriber reads nothing while
// the publishes run: on a loaded machine under -race that outlasts the
// default 30 s event-write bound, and the reset it causes must not be what
// these tests see (they assert the lag).
func slowCfg() server.Config {
	cfg := durableCfg()
	cfg.EventWriteTimeout = time.Hour
	return cfg
}
