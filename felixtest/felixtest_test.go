package felixtest_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/felixtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ctxT ends shortly before the test's deadline, and with the test.
func ctxT(t *testing.T) context.Context {
	ctx := t.Context()
	if d, ok := t.Deadline(); ok {
		c, cancel := context.WithDeadline(ctx, d.Add(-time.Until(d)/10))
		t.Cleanup(cancel)
		ctx = c
	}
	return ctx
}

func dial(t *testing.T, cl *felixtest.Cluster, adjust func(*client.Config)) *client.Client {
	t.Helper()
	cfg := cl.ClientConfig()
	if adjust != nil {
		adjust(&cfg)
	}
	c, err := client.Dial(ctxT(t), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func publish(t *testing.T, c *client.Client, tp felix.Topic, p string) uint64 {
	t.Helper()
	res, err := c.Publish(ctxT(t), tp, []byte(p), client.PublishOptions{})
	require.NoError(t, err)
	return res.Offset
}

// next reads the next event and checks its payload.
func next(t *testing.T, sub *client.Subscription, want string) {
	t.Helper()
	ev, err := sub.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, want, string(ev.Payload))
}

func TestBrokerPublishSubscribe(t *testing.T) {
	cl := felixtest.NewBroker(t)
	require.Equal(t, 1, cl.Nodes())
	require.Equal(t, felixtest.DefaultTenant, cl.TenantID())
	require.NotEmpty(t, cl.Token())
	c := dial(t, cl, nil)
	tp := cl.Topic("shop", "orders")
	require.Equal(t, uint64(0), publish(t, c, tp, "a"))
	require.Equal(t, uint64(1), publish(t, c, tp, "b"))
	sub, err := c.Subscribe(ctxT(t), tp, client.SubscribeOptions{Start: client.Earliest})
	require.NoError(t, err)
	defer sub.Close()
	next(t, sub, "a")
	next(t, sub, "b")
	require.Equal(t, uint64(2), cl.Appended(tp, 0))
	st := cl.Stats()
	require.Equal(t, uint64(2), st.PublishedRecords)
	require.Equal(t, uint64(1), st.Subscriptions)
	require.GreaterOrEqual(t, st.Connections, uint64(1))
	require.GreaterOrEqual(t, st.OpenConnections, int64(1))
}

// A wrong token is refused: the broker accepts only its own.
func TestBrokerRefusesOtherTokens(t *testing.T) {
	cl := felixtest.NewBroker(t)
	cfg := cl.ClientConfig()
	cfg.Token = "demo-token"
	cfg.MaxAttempts = -1
	c, err := client.New(cfg)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Publish(ctxT(t), cl.Topic("ns", "s"), []byte("x"), client.PublishOptions{})
	require.ErrorIs(t, err, felix.ErrAuthRefused)
}

func TestDeclaredStreamsAndNoAutoCreate(t *testing.T) {
	cl := felixtest.NewBroker(t, felixtest.WithTenant("acme"),
		felixtest.WithStream("ns", "work", felixtest.Stream{Shards: 3, Routing: felix.RoutingJumpHash}),
		felixtest.WithCache("ns", "kv"), felixtest.WithoutAutoCreate())
	c := dial(t, cl, func(cfg *client.Config) { cfg.MaxAttempts = -1 })
	work := cl.Topic("ns", "work")
	require.Equal(t, "acme", work.TenantID)
	ans, err := c.Request(ctxT(t), &felix.StreamShards{TenantID: "acme", Namespace: "ns", Stream: "work"})
	require.NoError(t, err)
	view := ans.(*felix.StreamShardsView)
	require.Equal(t, uint32(3), view.Shards)
	require.Equal(t, felix.RoutingJumpHash, view.Routing.V)
	require.NoError(t, c.CachePut(ctxT(t), cl.CacheRef("ns", "kv"), "k", []byte("v"), 0))

	_, err = c.Publish(ctxT(t), cl.Topic("ns", "undeclared"), []byte("x"), client.PublishOptions{})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotFound, be.Code)
}

// Kill stops the owner of a shard: the shard has moved when Kill returns,
// publishing goes on, and Restart brings the node back.
func TestKillRestart(t *testing.T) {
	cl := felixtest.NewCluster(t, 3)
	c := dial(t, cl, nil)
	tp := cl.Topic("ns", "s")
	publish(t, c, tp, "before")
	owner := cl.Owner(tp, 0)
	require.NoError(t, cl.Kill(owner))
	require.False(t, cl.Running(owner))
	require.NotEqual(t, owner, cl.Owner(tp, 0), "the shard moved to a survivor")
	require.ErrorIs(t, cl.Kill(owner), felixtest.ErrFault, "already down")
	// A plain publish could be written to the dead connection before the
	// client notices the crash (and be ambiguous): a producer re-sends it.
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	res, err := p.PublishBatch(ctxT(t), tp, [][]byte{[]byte("after")}, client.PublishOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(1), res.Offset)

	require.NoError(t, cl.Restart(owner))
	require.True(t, cl.Running(owner))
	ans, err := c.At(cl.Addr(owner)).Request(ctxT(t), &felix.Topology{})
	require.NoError(t, err, "the restarted node answers")
	require.Len(t, ans.(*felix.TopologyView).Brokers, 3)
}

// Drain moves the node's shards first: a subscriber sees every record once
// across it.
func TestDrain(t *testing.T) {
	cl := felixtest.NewCluster(t, 2)
	gone := make(chan string, 16)
	c := dial(t, cl, func(cfg *client.Config) {
		cfg.OnNotice = func(n client.Notice) {
			if n.Kind == client.NoticeDisconnected {
				gone <- n.Addr
			}
		}
	})
	tp := cl.Topic("ns", "s")
	publish(t, c, tp, "r0")
	sub, err := c.Subscribe(ctxT(t), tp, client.SubscribeOptions{Start: client.Earliest})
	require.NoError(t, err)
	defer sub.Close()
	next(t, sub, "r0")
	owner := cl.Owner(tp, 0)
	require.NoError(t, cl.Drain(owner))
	require.False(t, cl.Running(owner))
	require.Equal(t, 1-owner, cl.Owner(tp, 0))
	// The client learns of the drained node's end on its own; a publish
	// written before that would be ambiguous (the test waits for it).
	for addr := ""; addr != cl.Addr(owner); {
		select {
		case addr = <-gone:
		case <-ctxT(t).Done():
			t.Fatal("the client did not see the drained node go")
		}
	}
	publish(t, c, tp, "r1")
	next(t, sub, "r1")
	require.ErrorIs(t, cl.Drain(owner), felixtest.ErrFault)
}

func TestMoveShard(t *testing.T) {
	cl := felixtest.NewCluster(t, 3, felixtest.WithStream("ns", "s", felixtest.Stream{Shards: 2}))
	c := dial(t, cl, nil)
	tp := cl.Topic("ns", "s")
	publish(t, c, tp, "r0")
	sub, err := c.Subscribe(ctxT(t), tp, client.SubscribeOptions{Start: client.Earliest})
	require.NoError(t, err)
	defer sub.Close()
	next(t, sub, "r0")
	to := (cl.Owner(tp, 0) + 1) % cl.Nodes()
	require.NoError(t, cl.MoveShard(tp, 0, to))
	require.Equal(t, to, cl.Owner(tp, 0))
	publish(t, c, tp, "r1")
	next(t, sub, "r1")
	require.ErrorIs(t, cl.MoveShard(tp, 5, to), felixtest.ErrFault, "no such shard")
	require.ErrorIs(t, cl.MoveShard(tp, 0, 9), felixtest.ErrFault, "no such node")
}

// A publish fails while the client is cut from the broker and succeeds
// after Heal, on the same connection.
func TestCutClientHeal(t *testing.T) {
	cl := felixtest.NewBroker(t)
	c := dial(t, cl, nil)
	tp := cl.Topic("ns", "s")
	publish(t, c, tp, "r0")
	require.NoError(t, cl.CutClient(0))
	ctx, cancel := context.WithTimeout(ctxT(t), 200*time.Millisecond)
	_, err := c.Publish(ctx, tp, []byte("lost"), client.PublishOptions{})
	cancel()
	require.Error(t, err, "nothing crosses the cut")
	cl.Heal()
	publish(t, c, tp, "r1")
}

// A stalled link holds the request until Heal.
func TestStallClientHeal(t *testing.T) {
	cl := felixtest.NewBroker(t)
	c := dial(t, cl, nil)
	tp := cl.Topic("ns", "s")
	publish(t, c, tp, "r0")
	require.NoError(t, cl.StallClient(0, time.Hour))
	ctx, cancel := context.WithTimeout(ctxT(t), 200*time.Millisecond)
	_, err := c.Publish(ctx, tp, []byte("held"), client.PublishOptions{})
	cancel()
	require.Error(t, err, "the stalled publish is not answered")
	cl.Heal()
	publish(t, c, tp, "r1")
}

// ResetClient breaks the open connection for good: the client notices and
// connects again.
func TestResetClient(t *testing.T) {
	cl := felixtest.NewBroker(t)
	var reconnected atomic.Int64
	c := dial(t, cl, func(cfg *client.Config) {
		cfg.OnNotice = func(n client.Notice) {
			if n.Kind == client.NoticeConnected {
				reconnected.Add(1)
			}
		}
	})
	tp := cl.Topic("ns", "s")
	publish(t, c, tp, "r0")
	conns := cl.Stats().Connections
	require.NoError(t, cl.ResetClient(0))
	res, err := c.PublishBatchMayDuplicate(ctxT(t), tp, [][]byte{[]byte("r1")}, client.PublishOptions{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, res.Offset, uint64(1))
	require.Greater(t, cl.Stats().Connections, conns, "a new connection")
	require.GreaterOrEqual(t, reconnected.Load(), int64(2))
}

// With the nodes cut from each other, node 0 cannot forward a publish to
// the owner, node 1; after Heal it can.
func TestCutNodesHeal(t *testing.T) {
	cl := felixtest.NewCluster(t, 2, felixtest.WithStream("ns", "s", felixtest.Stream{}))
	tp := cl.Topic("ns", "s")
	require.NoError(t, cl.MoveShard(tp, 0, 1))
	c := dial(t, cl, func(cfg *client.Config) {
		cfg.Seeds, cfg.NoDiscovery, cfg.MaxAttempts = cfg.Seeds[:1], true, -1
	})
	require.NoError(t, cl.CutNodes(0, 1))
	_, err := c.Publish(ctxT(t), tp, []byte("x"), client.PublishOptions{})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeShardUnavailable, be.Code)
	require.Equal(t, felix.ReasonOwnerUnavailable, be.Reason)
	cl.Heal()
	res, err := c.Publish(ctxT(t), tp, []byte("y"), client.PublishOptions{})
	require.NoError(t, err)
	require.True(t, res.HasOwner, "forwarded to the owner")
	require.Equal(t, cl.NodeID(1), res.Owner.NodeID)
	require.ErrorIs(t, cl.CutNodes(0, 0), felixtest.ErrFault)
}

// Intercept sees every request and answers one publish with retry_after:
// the client waits and retries, and the record is written once.
func TestInterceptRetryAfter(t *testing.T) {
	cl := felixtest.NewBroker(t)
	c := dial(t, cl, nil)
	tp := cl.Topic("ns", "s")
	var seen, answered atomic.Int64
	remove := cl.Intercept(func(r felixtest.Request) *felixtest.Answer {
		if r.Type != "publish_batch" && r.Type != "publish" || r.Topic != tp {
			return nil
		}
		seen.Add(1)
		if answered.CompareAndSwap(0, 1) {
			return felixtest.RetryAfter(20 * time.Millisecond)
		}
		return nil
	})
	publish(t, c, tp, "r0")
	require.Equal(t, int64(2), seen.Load(), "refused once, then served")
	require.Equal(t, uint64(1), cl.Appended(tp, 0))

	// Without retries the answer is the client's error, as sent.
	remove()
	cl.Intercept(func(r felixtest.Request) *felixtest.Answer {
		if r.Topic == tp {
			return felixtest.RetryAfter(time.Second)
		}
		return nil
	})
	c2 := dial(t, cl, func(cfg *client.Config) { cfg.MaxAttempts = -1 })
	_, err := c2.Publish(ctxT(t), tp, []byte("x"), client.PublishOptions{})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeOverloaded, be.Code)
	require.Equal(t, felix.RetryAfter, be.RetryClass())
	require.Equal(t, time.Second, be.RetryAfter)
}

// outcome_unknown is reported as ambiguous, never re-sent.
func TestInterceptOutcomeUnknown(t *testing.T) {
	cl := felixtest.NewBroker(t)
	c := dial(t, cl, nil)
	tp := cl.Topic("ns", "s")
	cl.Intercept(func(r felixtest.Request) *felixtest.Answer {
		if r.Topic == tp {
			return felixtest.OutcomeUnknown()
		}
		return nil
	})
	_, err := c.Publish(ctxT(t), tp, []byte("x"), client.PublishOptions{})
	require.ErrorIs(t, err, client.ErrAmbiguous)
	require.Equal(t, uint64(0), cl.Appended(tp, 0), "the intercepted publish was not applied")
}

// A subscribe answered not_leader naming node 1 is followed there.
func TestInterceptNotLeader(t *testing.T) {
	cl := felixtest.NewCluster(t, 2, felixtest.WithStream("ns", "s", felixtest.Stream{}))
	tp := cl.Topic("ns", "s")
	require.NoError(t, cl.MoveShard(tp, 0, 1))
	var redirected atomic.Bool
	var onNode [2]atomic.Int64
	cl.Intercept(func(r felixtest.Request) *felixtest.Answer {
		if r.Type != "subscribe" {
			return nil
		}
		onNode[r.Node].Add(1)
		if r.Node == 0 && redirected.CompareAndSwap(false, true) {
			return cl.NotLeader(1)
		}
		return nil
	})
	c := dial(t, cl, func(cfg *client.Config) { cfg.Seeds, cfg.NoDiscovery = cfg.Seeds[:1], true })
	sub, err := c.Subscribe(ctxT(t), tp, client.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	require.True(t, redirected.Load())
	require.Equal(t, int64(1), onNode[0].Load())
	require.Equal(t, int64(1), onNode[1].Load(), "followed to node 1")
	publish(t, c, tp, "live")
	next(t, sub, "live")
}

func TestFaultsRefuseBadNodes(t *testing.T) {
	cl := felixtest.NewBroker(t)
	for name, f := range map[string]func() error{
		"Kill": func() error { return cl.Kill(1) }, "Drain": func() error { return cl.Drain(-1) },
		"Restart": func() error { return cl.Restart(0) }, "CutClient": func() error { return cl.CutClient(3) },
		"StallClient": func() error { return cl.StallClient(3, time.Second) }, "ResetClient": func() error { return cl.ResetClient(3) },
	} {
		require.ErrorIs(t, f(), felixtest.ErrFault, name)
	}
	require.False(t, cl.Running(7))
}

// A publish answered not_leader naming node 1 is redirected there, and
// written once.
func TestInterceptNotLeaderPublish(t *testing.T) {
	cl := felixtest.NewCluster(t, 2, felixtest.WithStream("ns", "s", felixtest.Stream{}))
	tp := cl.Topic("ns", "s")
	require.NoError(t, cl.MoveShard(tp, 0, 0))
	var redirected atomic.Bool
	var onNode [2]atomic.Int64
	cl.Intercept(func(r felixtest.Request) *felixtest.Answer {
		if r.Topic != tp {
			return nil
		}
		onNode[r.Node].Add(1)
		if r.Node == 0 && redirected.CompareAndSwap(false, true) {
			return cl.NotLeader(1)
		}
		return nil
	})
	c := dial(t, cl, func(cfg *client.Config) { cfg.Seeds, cfg.NoDiscovery = cfg.Seeds[:1], true })
	publish(t, c, tp, "r0")
	require.True(t, redirected.Load())
	require.Equal(t, int64(1), onNode[1].Load(), "redirected to node 1")
	require.Equal(t, uint64(1), cl.Appended(tp, 0), "written once")
}

// Standalone runs its cleanups, the broker's stop among them, last first,
// when stop is called; Errorf marks it failed.
func TestStandalone(t *testing.T) {
	tb, stop := felixtest.Standalone()
	var order []int
	tb.Cleanup(func() { order = append(order, 1) })
	b := felixtest.NewBroker(tb)
	tb.Cleanup(func() { order = append(order, 2) })
	c := dial(t, b, nil)
	publish(t, c, b.Topic("ns", "s"), "x")
	require.False(t, tb.Failed())
	tb.Errorf("felixtest: a logged failure (expected by %s)", t.Name())
	require.True(t, tb.Failed())
	require.NoError(t, c.Close())
	stop()
	require.Equal(t, []int{2, 1}, order)
	require.False(t, b.Running(0), "the broker stopped with stop")
}

// Any request can be answered with any error: a cache write refused
// forbidden reaches the application as that error.
func TestInterceptCacheWrite(t *testing.T) {
	cl := felixtest.NewBroker(t)
	c := dial(t, cl, nil)
	kv := cl.CacheRef("ns", "kv")
	var types []string
	var mu sync.Mutex
	cl.Intercept(func(r felixtest.Request) *felixtest.Answer {
		mu.Lock()
		types = append(types, r.Type)
		mu.Unlock()
		if r.Type == "cache_put" {
			return &felixtest.Answer{Code: felix.CodeForbidden, Message: "no writes today"}
		}
		return nil
	})
	err := c.CachePut(ctxT(t), kv, "k", []byte("v"), 0)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
	require.Contains(t, be.Message, "no writes today")
	_, _, err = c.CacheGet(ctxT(t), kv, "k")
	require.NoError(t, err, "other requests are served")
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, types, "cache_put")
	require.Contains(t, types, "cache_get")
}

// WithLimits lowers the frame limit: a record above it is refused, one
// below it is written.
func TestLimitsFrame(t *testing.T) {
	cl := felixtest.NewBroker(t, felixtest.WithLimits(felixtest.Limits{MaxFrameBytes: 4096}))
	c := dial(t, cl, func(cfg *client.Config) { cfg.MaxAttempts = -1 })
	tp := cl.Topic("ns", "s")
	_, err := c.Publish(ctxT(t), tp, make([]byte, 8192), client.PublishOptions{})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeLimitExceeded, be.Code)
	publish(t, c, tp, "small")
	require.Equal(t, uint64(1), cl.Appended(tp, 0))
}

// A declared stream keeps RetainRecords per shard; streams created on first
// use take WithDefaultStream's configuration.
func TestRetention(t *testing.T) {
	cl := felixtest.NewBroker(t,
		felixtest.WithStream("ns", "short", felixtest.Stream{RetainRecords: 2}),
		felixtest.WithDefaultStream(felixtest.Stream{Shards: 2}))
	c := dial(t, cl, nil)
	short := cl.Topic("ns", "short")
	for i := range 5 {
		publish(t, c, short, fmt.Sprint("r", i))
	}
	sub, err := c.Subscribe(ctxT(t), short, client.SubscribeOptions{Start: client.Earliest})
	require.NoError(t, err)
	defer sub.Close()
	require.Equal(t, uint64(3), sub.Info().StartOffset.V, "the oldest retained record")
	next(t, sub, "r3")

	publish(t, c, cl.Topic("ns", "auto"), "x")
	ans, err := c.Request(ctxT(t), &felix.StreamShards{TenantID: cl.TenantID(), Namespace: "ns", Stream: "auto"})
	require.NoError(t, err)
	require.Equal(t, uint32(2), ans.(*felix.StreamShardsView).Shards)
}

// Fire-and-forget publishes are seen too, and dropped when answered.
func TestInterceptNoAck(t *testing.T) {
	cl := felixtest.NewBroker(t)
	c := dial(t, cl, nil)
	tp := cl.Topic("ns", "s")
	var seen atomic.Int64
	cl.Intercept(func(r felixtest.Request) *felixtest.Answer {
		if r.Topic != tp {
			return nil
		}
		if seen.Add(1) == 1 {
			return felixtest.RetryAfter(time.Second) // dropped: nowhere to answer
		}
		return nil
	})
	for _, p := range []string{"dropped", "kept"} {
		_, err := c.Publish(ctxT(t), tp, []byte(p), client.PublishOptions{NoAck: true})
		require.NoError(t, err)
	}
	require.NoError(t, c.Flush(ctxT(t)))
	require.Equal(t, int64(2), seen.Load())
	require.Equal(t, uint64(1), cl.Appended(tp, 0))
}
