package client_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/felixtest"
	"github.com/flxproto/felix/internal/broker/cluster"
)

// startCluster starts a three-node reference cluster for the test.
func startCluster(t testing.TB) *cluster.Cluster {
	t.Helper()
	cl, err := cluster.Start(ctxT(t), cluster.Config{Nodes: 3})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	return cl
}

// clusterClient returns a client over every node of cl.
func clusterClient(t testing.TB, cl *cluster.Cluster, adjust func(*client.Config)) (*client.Client, *notices) {
	t.Helper()
	return newClient(t, cl.Addrs(), func(cfg *client.Config) {
		cfg.Conn.TLS = cl.TLS()
		if adjust != nil {
			adjust(cfg)
		}
	})
}

// clusterTopic names a stream of the cluster's fixture namespace.
func clusterTopic(stream string) client.Topic {
	return client.Topic{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Stream: stream}
}

// felixClient returns a client over every node of a felixtest cluster,
// recording its notices.
func felixClient(t testing.TB, cl *felixtest.Cluster, adjust func(*client.Config)) (*client.Client, *notices) {
	t.Helper()
	n := newNotices()
	cfg := cl.ClientConfig()
	cfg.OnNotice = n.add
	if adjust != nil {
		adjust(&cfg)
	}
	c, err := client.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c, n
}

// shardLog returns the records of shard 0 of tp, read through c.
func shardLog(t *testing.T, c *client.Client, tp client.Topic) []api.StreamRecord {
	t.Helper()
	page, err := c.StreamRead(ctxT(t), tp, 0, api.ReadOptions{From: 0, MaxRecords: 1 << 16})
	require.NoError(t, err)
	return page.Records
}

// A three-node cluster loses the node the client publishes to in the
// middle of a publish loop: every call returns, every acknowledged record
// is in the log at its acknowledged offset, and no record is written
// twice (nothing is re-sent without the at-least-once opt-in).
func TestClusterPublishLoopLosesNode(t *testing.T) {
	cl := felixtest.NewCluster(t, 3)
	tp := cl.Topic("ns", "movable")
	c, n := felixClient(t, cl, nil)
	owner := cl.Owner(tp, 0)
	const records, killAt = 60, 20
	acks := make(map[string]uint64)
	ambiguous := 0
	killed := make(chan error, 1)
	for i := range records {
		if i == killAt {
			// The client publishes straight to the shard owner once an ack
			// named it: that is the node it uses.
			n.wait(t, client.NoticeConnected, func(ev client.Notice) bool { return ev.Addr == cl.Addr(owner) })
			go func() { killed <- cl.Kill(owner) }() // while publishes are in flight
		}
		p := fmt.Sprint("rec-", i)
		res, err := c.Publish(ctxT(t), tp, []byte(p), acked)
		if err != nil {
			require.ErrorIs(t, err, client.ErrAmbiguous, "the only failure: a publish that may have been applied")
			ambiguous++
			continue
		}
		require.True(t, res.HasOffset)
		acks[p] = res.Offset
	}
	require.NoError(t, <-killed)
	require.GreaterOrEqual(t, len(acks), records-killAt/2, "publishing went on on the survivors")
	seen := make(map[string]int)
	at := make(map[string]uint64)
	for _, r := range shardLog(t, c, tp) {
		seen[string(r.Payload)]++
		at[string(r.Payload)] = r.Offset
	}
	for p, k := range seen {
		require.Equal(t, 1, k, "%s written once: no re-send without the opt-in", p)
	}
	for p, off := range acks {
		require.Equal(t, 1, seen[p], "acknowledged %s is in the log", p)
		require.Equal(t, off, at[p], "at its acknowledged offset")
	}
	t.Logf("%d acknowledged, %d ambiguous (reported, not re-sent)", len(acks), ambiguous)
}

// A subscriber survives two successive moves of its shard (shard_moved
// each time): delivery continues on the new owner at the next offset, so
// the offsets it sees are contiguous.
func TestSubscriberSurvivesTwoShardMoves(t *testing.T) {
	cl := felixtest.NewCluster(t, 3)
	tp := cl.Topic("ns", "movable")
	c, n := felixClient(t, cl, nil)
	res, err := c.Publish(ctxT(t), tp, []byte("start"), acked)
	require.NoError(t, err)
	sub, err := c.Subscribe(ctxT(t), tp, client.SubscribeOptions{Start: felix.StartAt(res.Offset)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	next := res.Offset
	read := func(want ...string) {
		t.Helper()
		for _, p := range want {
			ev, err := sub.Next(ctxT(t))
			require.NoError(t, err)
			require.Equal(t, next, ev.Offset, "contiguous offsets")
			require.Equal(t, p, string(ev.Payload))
			next++
		}
	}
	publish := func(tag string) []string {
		t.Helper()
		var out []string
		for i := range 5 {
			p := fmt.Sprint(tag, "-", i)
			_, err := c.Publish(ctxT(t), tp, []byte(p), acked)
			require.NoError(t, err)
			out = append(out, p)
		}
		return out
	}
	read(append([]string{"start"}, publish("home")...)...)
	for move := 1; move <= 2; move++ {
		to := (cl.Owner(tp, 0) + 1) % cl.Nodes()
		require.NoError(t, cl.MoveShard(tp, 0, to))
		require.Equal(t, to, cl.Owner(tp, 0))
		read(publish(fmt.Sprint("move", move))...)
		ev := n.wait(t, client.NoticeResumed, func(ev client.Notice) bool { return ev.Addr == cl.Addr(to) })
		var moved *felix.ShardMovedError
		require.ErrorAs(t, ev.Err, &moved, "resumed because the shard moved")
	}
}
