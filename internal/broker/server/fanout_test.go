package server_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/stretchr/testify/require"
)

// 8 publishers x 10,000 acked messages to a durable stream, 4 subscribers
// (two from earliest, two live, each on its own connection): every
// subscriber receives every offset exactly once and in order, and each
// publisher's messages in the order it published them.
func TestFanout8x10000x4(t *testing.T) {
	const pubs, per, nsubs = 8, 10_000, 4
	cfg := durableCfg()
	cfg.Engine.DefaultQueueCapacity = pubs * per // no drops: this test is about exactly-once
	cfg.Engine.MaxQueueCapacity = pubs * per
	srv := startBroker(t, cfg)
	// 80,000 acked round trips: slow under -race on a shared 2-core machine,
	// so bounded only by the test binary's -timeout.
	ctx := ctxT(t)

	subs := make([]*conn.Subscription, nsubs)
	for i := range subs {
		c := dial(t, srv, nil)
		o := conn.SubscribeOptions{}
		if i%2 == 0 {
			o.Start = felix.StartPosition{Kind: felix.StartEarliest}
		}
		s, err := c.Subscribe(ctx, topic, o)
		require.NoError(t, err)
		subs[i] = s
	}
	errs := make(chan error, pubs+nsubs)
	var wg sync.WaitGroup
	for i, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			last := make([]int, pubs)
			for p := range last {
				last[p] = -1
			}
			for off := uint64(0); off < pubs*per; off++ {
				ev, err := s.Next(ctx)
				if err != nil {
					errs <- fmt.Errorf("subscriber %d at offset %d: %w", i, off, err)
					return
				}
				if !ev.HasOffset || ev.Offset != off {
					errs <- fmt.Errorf("subscriber %d: got offset %d (%v), want %d", i, ev.Offset, ev.HasOffset, off)
					return
				}
				var p, n int
				if _, err := fmt.Sscanf(string(ev.Payload), "%d-%d", &p, &n); err != nil || n != last[p]+1 {
					errs <- fmt.Errorf("subscriber %d: %q after %d (%v)", i, ev.Payload, last[p], err)
					return
				}
				last[p] = n
			}
		}()
	}
	for p := range pubs {
		c := dial(t, srv, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := int64(-1)
			for n := range per {
				res, err := c.Publish(ctx, topic, fmt.Appendf(nil, "%d-%d", p, n), conn.PublishOptions{Ack: felix.AckPerMessage})
				if err != nil {
					errs <- fmt.Errorf("publisher %d message %d: %w", p, n, err)
					return
				}
				if !res.HasOffset || int64(res.Offset) <= prev {
					errs <- fmt.Errorf("publisher %d: ack offset %d after %d", p, res.Offset, prev)
					return
				}
				prev = int64(res.Offset)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := srv.Stats().Engine
	require.Equal(t, uint64(pubs*per), st.PublishedRecords)
	require.Zero(t, st.DroppedBatches)
	require.Equal(t, uint64(pubs*per*nsubs), st.DeliveredRecords)
}
