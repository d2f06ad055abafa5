package client_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

var acked = client.PublishOptions{Ack: felix.AckPerBatch}

func publishN(t *testing.T, c *client.Client, tp client.Topic, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		_, err := c.Publish(ctxT(t), tp, []byte(fmt.Sprint("r", i)), acked)
		require.NoError(t, err)
	}
}

// readLog returns the payloads of shard 0 of tp on b.
func readLog(t *testing.T, b *broker, tp client.Topic) []string {
	t.Helper()
	recs, _, err := b.server().Engine().Read(engine.Topic{Tenant: tp.TenantID, Namespace: tp.Namespace, Stream: tp.Stream}, 0, 0, 1<<20)
	require.NoError(t, err)
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Payload)
	}
	return out
}

func TestPublishSubscribeRoundtrip(t *testing.T) {
	b := startBroker(t)
	c, _ := newClient(t, []string{b.addr}, nil)
	sub, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer sub.Close()
	res, err := c.Publish(ctxT(t), topic, []byte("hello"), acked)
	require.NoError(t, err)
	require.True(t, res.HasOffset)
	require.Equal(t, uint64(0), res.Offset)
	ev, err := sub.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, "hello", string(ev.Payload))
	require.Equal(t, uint64(0), ev.Offset)
	require.NoError(t, sub.Close())
	require.NoError(t, sub.Close())
	_, err = sub.Next(ctxT(t))
	require.ErrorIs(t, err, client.ErrClosed)
}

// reconnect.survives_broker_loss against independent brokers: the broker
// in use goes away; the next call succeeds against another.
func TestSurvivesBrokerLoss(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	c, n := newClient(t, []string{a.addr, b.addr}, nil)
	require.NoError(t, c.Connect(ctxT(t)))
	first := n.wait(t, client.NoticeConnected, nil).Addr
	publishN(t, c, topic, 0, 1)
	used, other := a, b
	if first == b.addr {
		used, other = b, a
	}
	used.stop()
	n.wait(t, client.NoticeDisconnected, func(ev client.Notice) bool { return ev.Addr == used.addr })
	publishN(t, c, topic, 1, 1)
	require.Equal(t, []string{"r1"}, readLog(t, other, topic))
}

// A broker that restarts on the same address mid-loop: every call returns,
// and publishing works again once it is back.
func TestRestartingBrokerPublishLoop(t *testing.T) {
	b := startBroker(t)
	c, n := newClient(t, []string{b.addr}, nil)
	publishN(t, c, topic, 0, 3)
	b.stop()
	n.wait(t, client.NoticeDisconnected, nil)
	b.start()
	publishN(t, c, topic, 3, 3)
	require.Equal(t, []string{"r3", "r4", "r5"}, readLog(t, b, topic))
	require.GreaterOrEqual(t, n.count(client.NoticeConnected), 2)
}

// reconnect.subscription_resumes_at_the_next_offset: two brokers hold the
// same log; the one serving the subscription goes away and delivery goes
// on at the next offset on the other, nothing skipped or repeated.
func TestSubscriptionResumesAtNextOffset(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	ca, _ := newClient(t, []string{a.addr}, nil)
	cb, _ := newClient(t, []string{b.addr}, nil)
	publishN(t, ca, topic, 0, 10)
	publishN(t, cb, topic, 0, 10)
	c, n := newClient(t, []string{a.addr, b.addr}, nil)
	sub, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{Start: felix.StartAt(2)})
	require.NoError(t, err)
	defer sub.Close()
	for i := 2; i < 5; i++ {
		ev, err := sub.Next(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, uint64(i), ev.Offset)
	}
	// Stop whichever broker serves it; consume to the end.
	serving := n.wait(t, client.NoticeConnected, nil).Addr
	if serving == a.addr {
		a.stop()
	} else {
		b.stop()
	}
	// The subscription read ahead may still hold a few records; what
	// matters is the sequence: contiguous to 9.
	for i := 5; i < 10; i++ {
		ev, err := sub.Next(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, uint64(i), ev.Offset, "contiguous offsets")
		require.Equal(t, fmt.Sprint("r", i), string(ev.Payload))
	}
	next, ok := sub.Offset()
	require.True(t, ok)
	require.Equal(t, uint64(10), next)
}

// A subscription whose broker shuts down with nothing left to read
// resumes on the other broker instead of ending quietly.
func TestSubscriptionNeverEndsQuietlyOnShutdown(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	c, n := newClient(t, []string{a.addr, b.addr}, nil)
	sub, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	serving, other := a, b
	if n.wait(t, client.NoticeConnected, nil).Addr == b.addr {
		serving, other = b, a
	}
	got := make(chan error, 1)
	var payload string
	go func() {
		ev, err := sub.Next(ctxT(t))
		payload = string(ev.Payload)
		got <- err
	}()
	serving.stop()
	n.wait(t, client.NoticeResumed, nil)
	po, _ := newClient(t, []string{other.addr}, nil)
	publishN(t, po, topic, 0, 1)
	require.NoError(t, <-got)
	require.Equal(t, "r0", payload)
}

// redirect.*: a subscribe sent to a non-owner follows not_leader to the
// owner with the ORIGINAL request (start offset kept), never reports it,
// and spends no retry budget (MaxAttempts < 0: no retries at all).
func TestRedirectCarriesStartOffset(t *testing.T) {
	real := startBroker(t)
	pc, _ := newClient(t, []string{real.addr}, nil)
	publishN(t, pc, topic, 0, 6)
	fake := startFake(t, real.addr, false)
	c, n := newClient(t, []string{fake.addr()}, func(cfg *client.Config) { cfg.MaxAttempts = -1; cfg.NoDiscovery = true })
	sub, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{Start: felix.StartAt(4)})
	require.NoError(t, err)
	defer sub.Close()
	ev, err := sub.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(4), ev.Offset)
	require.Equal(t, "r4", string(ev.Payload))
	require.Len(t, fake.subscribes(), 1)
	require.Equal(t, felix.StartAt(4), fake.subscribes()[0].Start.V)
	r := n.wait(t, client.NoticeRedirect, nil)
	require.Equal(t, real.addr, r.Target)
	require.Zero(t, n.count(client.NoticeRetry))
	// The owner is cached: the next subscribe goes straight there.
	sub2, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{Start: felix.StartAt(5)})
	require.NoError(t, err)
	defer sub2.Close()
	require.Len(t, fake.subscribes(), 1)
}

// reconnect.discovers_brokers_from_one_seed: the only seed names the
// cluster; after it is gone the client goes on with what it learnt.
func TestDiscoversBrokersFromOneSeed(t *testing.T) {
	real := startBroker(t)
	fake := startFake(t, real.addr, false)
	c, n := newClient(t, []string{fake.addr()}, nil)
	require.NoError(t, c.Connect(ctxT(t)))
	n.wait(t, client.NoticeDiscovered, func(ev client.Notice) bool { return ev.Addr == real.addr })
	require.Contains(t, c.Brokers(), real.addr)
	fake.stop()
	n.wait(t, client.NoticeDisconnected, nil)
	publishN(t, c, topic, 0, 2)
	require.Equal(t, []string{"r0", "r1"}, readLog(t, real, topic))
}

// retry.terminal_failures_are_not_retried: a forbidden publish (a token
// without the publish permission) is returned at once, typed, with no
// retry.
func TestTerminalFailureNotRetried(t *testing.T) {
	b := startBrokerCfg(t, func(cfg *server.Config) {
		cfg.Tokens = map[string]server.Identity{server.DemoToken: {Tenant: server.DemoTenant, Principal: "reader", Deny: server.PermAll}}
	})
	c, n := newClient(t, []string{b.addr}, nil)
	_, err := c.Publish(ctxT(t), topic, []byte("x"), acked)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
	require.Equal(t, felix.RetryFatal, client.RetryClassOf(err))
	require.NotErrorIs(t, err, client.ErrAmbiguous)
	require.Zero(t, n.count(client.NoticeRetry))
}

// retry.ambiguous_outcomes_are_not_silently_retried: the connection dies
// after the publish was written; the client reports it and does not
// re-send; the at-least-once variant re-sends (to the other broker).
func TestAmbiguousPublishNotResent(t *testing.T) {
	real := startBroker(t)
	fake := startFake(t, real.addr, true)
	// Seeds are picked at random: take a client whose first broker is the
	// fake one.
	var c *client.Client
	for c == nil {
		cc, n := newClient(t, []string{fake.addr(), real.addr}, func(cfg *client.Config) { cfg.NoDiscovery = true })
		require.NoError(t, cc.Connect(ctxT(t)))
		if n.wait(t, client.NoticeConnected, nil).Addr == fake.addr() {
			c = cc
		}
	}
	_, err := c.Publish(ctxT(t), topic, []byte("once"), acked)
	require.ErrorIs(t, err, client.ErrAmbiguous)
	require.Equal(t, felix.RetryOutcomeUnknown, client.RetryClassOf(err))
	require.Empty(t, readLog(t, real, topic), "not re-sent")

	res, err := c.PublishBatchMayDuplicate(ctxT(t), topic, [][]byte{[]byte("again")}, acked)
	require.NoError(t, err)
	require.True(t, res.HasOffset)
	require.Equal(t, []string{"again"}, readLog(t, real, topic))
}

func TestShardedSubscription(t *testing.T) {
	b := startBrokerCfg(t, func(c *server.Config) { c.Engine.NoAutoCreateStreams = true })
	sharded := client.Topic{TenantID: topic.TenantID, Namespace: "ns", Stream: "sharded"}
	require.NoError(t, b.server().Engine().CreateStream(engine.Topic{Tenant: sharded.TenantID, Namespace: "ns", Stream: "sharded"},
		engine.StreamConfig{Durable: true, Shards: 4}))
	c, _ := newClient(t, []string{b.addr}, nil)
	n, _, err := shardsOf(c.StreamShards(ctxT(t), sharded))
	require.NoError(t, err)
	require.Equal(t, uint32(4), n)
	// sharded.reports_the_shard_count: unknown stream → 0 and refused.
	n, _, err = shardsOf(c.StreamShards(ctxT(t), client.Topic{TenantID: topic.TenantID, Namespace: "ns", Stream: "nope"}))
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = c.SubscribeSharded(ctxT(t), client.Topic{TenantID: topic.TenantID, Namespace: "ns", Stream: "nope"}, client.ShardedOptions{})
	require.ErrorIs(t, err, client.ErrUnknownStream)

	ss, err := c.SubscribeSharded(ctxT(t), sharded, client.ShardedOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer ss.Close()
	const total = 40
	for i := 0; i < total; i++ {
		_, err := c.Publish(ctxT(t), sharded, []byte(fmt.Sprint("v", i)), client.PublishOptions{Ack: felix.AckPerBatch, Key: []byte(fmt.Sprint("key-", i))})
		require.NoError(t, err)
	}
	seen := map[string]bool{}
	shards := map[uint32]bool{}
	last := map[uint32]uint64{}
	for len(seen) < total {
		ev, err := ss.Next(ctxT(t))
		require.NoError(t, err)
		if prev, ok := last[ev.Shard]; ok {
			require.Equal(t, prev+1, ev.Offset, "contiguous within shard %d", ev.Shard)
		}
		last[ev.Shard] = ev.Offset
		seen[string(ev.Payload)] = true
		shards[ev.Shard] = true
	}
	require.Greater(t, len(shards), 1, "keys spread over shards")
	// sharded.resumes_per_shard: the offset map resumes each shard.
	offs := ss.Offsets()
	require.NoError(t, ss.Close())
	ss2, err := c.SubscribeSharded(ctxT(t), sharded, client.ShardedOptions{From: offs})
	require.NoError(t, err)
	defer ss2.Close()
	_, err = c.Publish(ctxT(t), sharded, []byte("after"), client.PublishOptions{Ack: felix.AckPerBatch, Key: []byte("key-0")})
	require.NoError(t, err)
	ev, err := ss2.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, "after", string(ev.Payload))
	require.Equal(t, offs[ev.Shard], ev.Offset)
}

func TestCacheAndCounters(t *testing.T) {
	b := startBroker(t)
	c, _ := newClient(t, []string{b.addr}, nil)
	ref := client.CacheRef{TenantID: topic.TenantID, Namespace: "ns", Cache: "c"}
	_, found, err := c.CacheGet(ctxT(t), ref, "k")
	require.NoError(t, err)
	require.False(t, found)
	require.NoError(t, c.CachePut(ctxT(t), ref, "k", []byte("v"), 0))
	v, found, err := c.CacheGet(ctxT(t), ref, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v", string(v))
	total, _, err := c.CounterAdd(ctxT(t), ref, "n", 3)
	require.NoError(t, err)
	require.Equal(t, int64(3), total)
}

// A watch resumes after its connection is reset, from the offset after
// the last change it delivered: the changes made meanwhile arrive, in
// order, none twice.
func TestWatchResumesAfterReset(t *testing.T) {
	b := startBroker(t)
	r := startRelay(t, b.addr)
	c, n := newClient(t, []string{r.addr()}, nil)
	direct, _ := newClient(t, []string{b.addr}, nil)
	ref := client.CacheRef{TenantID: topic.TenantID, Namespace: "ns", Cache: "c"}
	w, err := c.CacheWatch(ctxT(t), ref, client.WatchOptions{Prefix: felix.Some("")})
	require.NoError(t, err)
	defer w.Close()
	require.NoError(t, direct.CachePut(ctxT(t), ref, "a", []byte("1"), 0))
	ev, err := w.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, "a", ev.Key)
	r.reset()
	require.NoError(t, direct.CachePut(ctxT(t), ref, "b", []byte("2"), 0))
	_, _, err = direct.CacheDelete(ctxT(t), ref, "a")
	require.NoError(t, err)
	ev2, err := w.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, "b", ev2.Key)
	require.Equal(t, ev.Offset+1, ev2.Offset)
	ev3, err := w.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, "a", ev3.Key)
	require.True(t, ev3.Deleted)
	n.wait(t, client.NoticeResumed, nil)
}

func TestCloseIdempotent(t *testing.T) {
	b := startBroker(t)
	c, _ := newClient(t, []string{b.addr}, nil)
	require.NoError(t, c.Connect(ctxT(t)))
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	_, err := c.Publish(ctxT(t), topic, []byte("x"), acked)
	require.True(t, errors.Is(err, client.ErrClosed) || errors.Is(err, io.EOF), "%v", err)
}

// error.unknown_stream_is_typed: a stream the broker does not have is a
// typed not_found (after the short budget its retry class allows), not a
// transport failure.
func TestUnknownStreamIsTyped(t *testing.T) {
	b := startBrokerCfg(t, func(c *server.Config) { c.Engine.NoAutoCreateStreams = true })
	c, n := newClient(t, []string{b.addr}, nil)
	_, err := c.Publish(ctxT(t), topic, []byte("x"), acked)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotFound, be.Code)
	require.LessOrEqual(t, n.count(client.NoticeRetry), 2)
	_, err = c.Subscribe(ctxT(t), topic, client.SubscribeOptions{})
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotFound, be.Code)
}

// A three-broker publish loop loses the broker in use midway: every call
// returns; every acknowledged record is in exactly one broker's log and no
// record is written twice (no re-send without the at-least-once opt-in).
func TestPublishLoopLosesBroker(t *testing.T) {
	bs := []*broker{startBroker(t), startBroker(t), startBroker(t)}
	addrs := []string{bs[0].addr, bs[1].addr, bs[2].addr}
	c, n := newClient(t, addrs, nil)
	var ackedRecs []string
	for i := range 30 {
		if i == 10 {
			used := n.wait(t, client.NoticeConnected, nil).Addr
			for _, b := range bs {
				if b.addr == used {
					b.stop()
				}
			}
		}
		p := fmt.Sprint("r", i)
		if _, err := c.Publish(ctxT(t), topic, []byte(p), acked); err == nil {
			ackedRecs = append(ackedRecs, p)
		} else {
			require.ErrorIs(t, err, client.ErrAmbiguous)
		}
	}
	seen := map[string]int{}
	for _, b := range bs {
		if b.server() == nil {
			continue
		}
		for _, p := range readLog(t, b, topic) {
			seen[p]++
		}
	}
	for p, k := range seen {
		require.Equal(t, 1, k, "%s written once", p)
	}
	for _, p := range ackedRecs[len(ackedRecs)-19:] {
		require.Equal(t, 1, seen[p], "acked %s after the loss is readable", p)
	}
}
