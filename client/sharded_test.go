package client_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
)

// sharded.a_lost_shard_is_surfaced: shard 1 ends (lagged) while shard 0,
// reached through a redirect, keeps delivering.
func TestShardedLostShardSurfaced(t *testing.T) {
	real := startBroker(t)
	fake := startFake(t, real.addr, false, func(f *fakeNode) { f.shards = 2 })
	c, n := newClient(t, []string{fake.addr()}, func(cfg *client.Config) { cfg.NoDiscovery = true })
	ss, err := c.SubscribeSharded(ctxShort(t), topic, client.ShardedOptions{})
	require.NoError(t, err)
	defer ss.Close()
	require.Equal(t, 2, ss.Shards())
	_, err = ss.Next(ctxShort(t))
	var lost *client.ShardLostError
	require.ErrorAs(t, err, &lost)
	require.Equal(t, uint32(1), lost.Shard)
	var lag *felix.LaggedError
	require.ErrorAs(t, err, &lag)
	require.Equal(t, uint64(5), lag.ResumeFrom)
	n.wait(t, client.NoticeShardLost, nil)

	pub, _ := newClient(t, []string{real.addr}, nil)
	publishN(t, pub, topic, 0, 3)
	for i := range 3 {
		ev, err := ss.Next(ctxShort(t))
		require.NoError(t, err)
		require.Equal(t, uint32(0), ev.Shard)
		require.Equal(t, uint64(i), ev.Offset)
	}
}
