package server_test

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

// Issue 32 #1a over QUIC: tenant A fills the engine-wide log bound
// (-max-log-bytes) and goes on; tenant B, within its share, then appends
// 1,000 acknowledged records. B reads back every one of them, from
// offset 0, exactly once: the trims fell on A. (Before, the shard that
// appended trimmed its own oldest records whoever filled the total: B lost
// 768 of 2,000 in the run.)
func TestTenantKeepsItsRecordsWhenAnotherFillsTheLogs(t *testing.T) {
	const limit = 2 << 20
	toks, err := server.ParseTokens("t1:demo-token,tA:a,tB:b")
	require.NoError(t, err)
	cfg := durableCfg()
	cfg.Tokens = toks
	cfg.Engine.MaxLogBytes = limit
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	a := dial(t, srv, func(c *conn.Config) { c.TenantID, c.Token = "tA", "a" })
	b := dial(t, srv, func(c *conn.Config) { c.TenantID, c.Token = "tB", "b" })
	fillA := func(records int) {
		big := bytes.Repeat([]byte("a"), 64<<10)
		for i := range records {
			tp := felix.Topic{TenantID: "tA", Namespace: "ns", Stream: "s" + strconv.Itoa(i%4)}
			_, err := a.Publish(ctx, tp, big, conn.PublishOptions{Ack: felix.AckPerBatch})
			require.NoError(t, err)
		}
	}
	fillA(64) // 4 MiB into a 2 MiB bound

	const records = 1000 // 1,000 × (200 + 48) bytes ≈ 242 KiB, B's share is 1 MiB
	bt := felix.Topic{TenantID: "tB", Namespace: "ns", Stream: "s"}
	for i := range records {
		res, err := b.Publish(ctx, bt, []byte(strconv.Itoa(i)+string(bytes.Repeat([]byte("b"), 200-len(strconv.Itoa(i))))),
			conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
		require.Equal(t, uint64(i), res.Offset)
	}
	fillA(32) // A goes on: it is over its share, it trims itself
	require.LessOrEqual(t, srv.Engine().LogBytes(), int64(limit+64<<10), "the bound holds (plus a newest record)")

	sub, err := b.Subscribe(ctx, bt, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer sub.Close()
	for i := range records {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(i), ev.Offset, "B's records from 0, none trimmed")
		require.True(t, bytes.HasPrefix(ev.Payload, []byte(strconv.Itoa(i))))
	}
	oldest, tail, err := srv.Engine().Tail(engine.Topic{Tenant: bt.TenantID, Namespace: bt.Namespace, Stream: bt.Stream}, 0)
	require.NoError(t, err)
	require.Equal(t, [2]uint64{0, records}, [2]uint64{oldest, tail}, "exactly B's 1,000 acknowledged records")
}
