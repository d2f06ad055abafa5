package cluster_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

// With Interpose every node sits behind a relay of its own and advertises
// it: Addr, State and topology name the relays, and a client dialled to a
// relay reaches its node. NoFixture declares nothing.
func TestInterposeAdvertisesRelays(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 2, Interpose: true, NoFixture: true})
	require.Empty(t, c.State().Shards, "no fixture streams")
	for i := range 2 {
		require.Equal(t, c.Relay(i).Addr().String(), c.Addr(i))
		require.Equal(t, c.Addr(i), c.State().Nodes[i].Addr)
	}
	eps, err := api.New(dial(t, c, c.Addr(0), nil)).Topology(ctxT(t))
	require.NoError(t, err)
	require.Len(t, eps, 2)
	for i, ep := range eps {
		require.Equal(t, c.Addr(i), ep.Addr)
	}
}

// Drain moves the node's shards before it stops; CutNodes refuses a
// forwarded publish until Heal.
func TestDrainAndCutNodes(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3, NoFixture: true})
	f := c.Fixture()
	tp := engine.Topic{Tenant: f.TenantID, Namespace: "ns", Stream: "s"}
	require.NoError(t, c.CreateStream(tp, engine.StreamConfig{Durable: true}))
	require.NoError(t, c.MoveShard(tp, 0, 1))
	owner, gen := c.OwnerOf(tp, 0)
	require.Equal(t, 1, owner)

	require.NoError(t, c.CutNodes(0, 1))
	ft := felix.Topic{TenantID: tp.Tenant, Namespace: tp.Namespace, Stream: tp.Stream}
	cl0 := dial(t, c, c.Addr(0), nil)
	_, err := cl0.Publish(ctxT(t), ft, []byte("x"), conn.PublishOptions{})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeShardUnavailable, be.Code)
	c.Heal()
	_, err = cl0.Publish(ctxT(t), ft, []byte("y"), conn.PublishOptions{})
	require.NoError(t, err)

	require.NoError(t, c.Drain(1))
	require.False(t, c.Alive(1))
	now, ngen := c.OwnerOf(tp, 0)
	require.NotEqual(t, 1, now)
	require.Greater(t, ngen, gen)
	require.ErrorIs(t, c.Drain(1), cluster.ErrNodeState)
	require.NoError(t, c.Restart(1))
}

// Intercept reaches every node's server with the node's index.
func TestInterceptPerNode(t *testing.T) {
	seen := make(chan int, 16)
	c := start(t, cluster.Config{Nodes: 2, NoFixture: true, Intercept: func(i int, in server.Intercepted) *server.Interception {
		if in.Request.Message != nil && in.Request.Message.MessageType() == "topology" {
			seen <- i
		}
		return nil
	}})
	for i := range 2 {
		_, err := api.New(dial(t, c, c.Addr(i), nil)).Topology(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, i, <-seen)
	}
}
