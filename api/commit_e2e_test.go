package api_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

var orders = felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "orders"}

func TestCommitAndStateGetEndToEnd(t *testing.T) {
	srv := startRef(t, func(c *server.Config) { c.Engine.DefaultStream.Shards = 4 })
	cc := dialRef(t, srv, nil)
	c := api.New(cc)
	ctx := testCtx(t)
	entity := []byte("customer-7")

	v, err := c.StateGet(ctx, orders, entity, "balance")
	require.NoError(t, err)
	require.False(t, v.Found, "never written: absent")

	off, err := c.Commit(ctx, api.CommitRequest{Topic: orders, EntityKey: entity, Ops: []api.CommitOp{
		api.PublishEvent("", []byte("deposited 10")),
		api.PutState("orders", "balance", []byte("10")),
		api.PutState("", "tmp", []byte("x")),
	}})
	require.NoError(t, err)
	v, err = c.StateGet(ctx, orders, entity, "balance")
	require.NoError(t, err)
	require.Equal(t, api.StateValue{Value: []byte("10"), Found: true, Version: off, HasVersion: true, AsOf: off, HasAsOf: true}, v)

	// The event is on the shard the entity key routes to, at that offset.
	shards, err := c.StreamShards(ctx, orders)
	require.NoError(t, err)
	require.Equal(t, uint32(4), shards.Shards)
	page, err := c.StreamRead(ctx, orders, shards.Routing.V.Shard(entity, shards.Shards), api.ReadOptions{From: off, MaxRecords: 1})
	require.NoError(t, err)
	require.Len(t, page.Records, 1)
	require.Equal(t, "deposited 10", string(page.Records[0].Payload))
	require.Equal(t, off+1, page.Next)

	// Conditional commit: stale expected offset refused with the tail.
	_, err = c.Commit(ctx, api.CommitRequest{Topic: orders, EntityKey: entity, ExpectedOffset: felix.Some(off),
		Ops: []api.CommitOp{api.EnqueueEvent("", []byte("x")), api.DeleteState("", "tmp")}})
	var rf *felix.PublishRefusedError
	require.True(t, errors.As(err, &rf), "got %v", err)
	tail, ok := rf.Tail()
	require.True(t, ok)
	require.Equal(t, off+1, tail)
	v, err = c.StateGet(ctx, orders, entity, "tmp")
	require.NoError(t, err)
	require.True(t, v.Found, "refused commit wrote nothing")

	off2, err := c.Commit(ctx, api.CommitRequest{Topic: orders, EntityKey: entity, ExpectedOffset: felix.Some(tail),
		Ops: []api.CommitOp{api.EnqueueEvent("", []byte("x")), api.DeleteState("", "tmp")}})
	require.NoError(t, err)
	require.Equal(t, tail, off2)
	v, err = c.StateGet(ctx, orders, entity, "tmp")
	require.NoError(t, err)
	require.Equal(t, api.StateValue{AsOf: off2, HasAsOf: true}, v, "deleted: absent, not empty")
}

func TestCommitValidatedBeforeSending(t *testing.T) {
	// A broker that advertises commits but records every request: the
	// invalid commits below must never reach it.
	b := startBare(t, felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureAtomicCommit | felix.FeaturePublishConditional})
	c := api.New(b.Dial(t, nil))
	ctx := testCtx(t)
	ev := []byte("e")
	cases := []struct {
		name  string
		ops   []api.CommitOp
		want  error
		index int
	}{
		{"no event", []api.CommitOp{api.PutState("", "k", ev)}, api.ErrCommitEventCount, -1},
		{"two events", []api.CommitOp{api.PublishEvent("", ev), api.PutState("", "k", ev), api.EnqueueEvent("", ev)}, api.ErrCommitEventCount, 2},
		{"state on another stream", []api.CommitOp{api.PublishEvent("", ev), api.PutState("audit", "k", ev)}, api.ErrCommitNotOnOwningShard, 1},
		{"event on another stream", []api.CommitOp{api.PublishEvent("audit", ev)}, api.ErrCommitNotOnOwningShard, 0},
		{"empty state key", []api.CommitOp{api.PublishEvent("", ev), api.DeleteState("", "")}, api.ErrCommitInvalidOp, 1},
	}
	for _, tc := range cases {
		_, err := c.Commit(ctx, api.CommitRequest{Topic: orders, EntityKey: []byte("e"), Ops: tc.ops})
		require.ErrorIs(t, err, tc.want, tc.name)
		var ce *api.CommitError
		require.True(t, errors.As(err, &ce), tc.name)
		require.Equal(t, tc.index, ce.Index, tc.name)
		if tc.index >= 0 {
			require.Equal(t, tc.ops[tc.index], ce.Op, tc.name)
			require.Contains(t, err.Error(), "operation "+string(rune('0'+tc.index)), tc.name)
		}
	}
	require.Empty(t, b.Received(), "no invalid commit was sent")
}

func TestCommitNotAdvertised(t *testing.T) {
	// A peer offering no capabilities still authenticates (plain ok for a
	// legacy client); commit and state_get are never sent to a broker
	// without FeatureAtomicCommit.
	b := startBare(t, felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureUnsupported | felix.FeatureCacheConditional})
	ctx := testCtx(t)
	for _, legacy := range []bool{false, true} {
		c := api.New(b.Dial(t, func(cfg *conn.Config) { cfg.Legacy = legacy }))
		_, err := c.Commit(ctx, api.CommitRequest{Topic: orders, EntityKey: []byte("e"), Ops: []api.CommitOp{api.PublishEvent("", nil)}})
		require.ErrorIs(t, err, felix.ErrNotAdvertised)
		_, err = c.StateGet(ctx, orders, []byte("e"), "k")
		require.ErrorIs(t, err, felix.ErrNotAdvertised)
		_, err = c.PublishIf(ctx, orders, [][]byte{[]byte("x")}, nil, 0)
		require.ErrorIs(t, err, felix.ErrNotAdvertised)
	}
	// Commits without conditional publishes: no expected_offset.
	b2 := startBare(t, felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureAtomicCommit})
	c2 := api.New(b2.Dial(t, nil))
	_, err := c2.Commit(ctx, api.CommitRequest{Topic: orders, EntityKey: []byte("e"), ExpectedOffset: felix.Some(uint64(0)),
		Ops: []api.CommitOp{api.PublishEvent("", nil)}})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	require.Empty(t, b.Received())
	require.Empty(t, b2.Received())
}

func TestPublishIfEndToEnd(t *testing.T) {
	srv := startRef(t, nil)
	cc := dialRef(t, srv, nil)
	c := api.New(cc)
	ctx := testCtx(t)
	topic := felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "ledger"}
	res, err := c.PublishIf(ctx, topic, [][]byte{[]byte("a"), []byte("b")}, nil, 0)
	require.NoError(t, err)
	require.Equal(t, felix.PublishResult{Offset: 0, HasOffset: true}, res)
	_, err = c.PublishIf(ctx, topic, [][]byte{[]byte("c")}, nil, 0)
	var rf *felix.PublishRefusedError
	require.True(t, errors.As(err, &rf))
	require.Equal(t, "offset_mismatch", rf.Reason)
	tail, ok := rf.Tail()
	require.True(t, ok)
	require.Equal(t, uint64(2), tail)
	page, err := c.StreamRead(ctx, topic, 0, api.ReadOptions{From: 0})
	require.NoError(t, err)
	require.Len(t, page.Records, 2, "refused publish_if wrote nothing")
	res, err = c.PublishIf(ctx, topic, [][]byte{[]byte("c")}, nil, tail)
	require.NoError(t, err)
	require.Equal(t, uint64(2), res.Offset)
}

func TestConditionalCacheEndToEnd(t *testing.T) {
	srv := startRef(t, nil)
	cc := dialRef(t, srv, nil)
	c := api.New(cc)
	ctx := testCtx(t)
	ref := felix.CacheRef{TenantID: server.DemoTenant, Namespace: "ns", Cache: "c"}
	r, err := c.CachePutIf(ctx, ref, "k", []byte("v1"), felix.CacheCondition{Kind: felix.CondAbsent}, 0)
	require.NoError(t, err)
	require.True(t, r.Applied)
	require.True(t, r.HasVersion)
	r2, err := c.CachePutIf(ctx, ref, "k", []byte("v2"), felix.CacheCondition{Kind: felix.CondAbsent}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, api.CondResult{Applied: false, Version: r.Version, HasVersion: true}, r2)
	item, err := c.CacheGetVersioned(ctx, ref, "k")
	require.NoError(t, err)
	require.Equal(t, api.CacheItem{Value: []byte("v1"), Found: true, Version: r.Version, HasVersion: true}, item)
	r3, err := c.CachePutIf(ctx, ref, "k", []byte("v3"), felix.CacheCondition{Kind: felix.CondVersion, Version: r.Version}, 0)
	require.NoError(t, err)
	require.True(t, r3.Applied)
	d, err := c.CacheDeleteIf(ctx, ref, "k", r.Version)
	require.NoError(t, err)
	require.False(t, d.Applied, "stale version")
	d, err = c.CacheDeleteIf(ctx, ref, "k", r3.Version)
	require.NoError(t, err)
	require.True(t, d.Applied)
	item, err = c.CacheGetVersioned(ctx, ref, "k")
	require.NoError(t, err)
	require.False(t, item.Found)

	b := startBare(t, felix.BrokerOffer{Flags: felix.KnownFlags})
	bc := api.New(b.Dial(t, nil))
	_, err = bc.CachePutIf(ctx, ref, "k", nil, felix.CacheCondition{}, 0)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = bc.CacheDeleteIf(ctx, ref, "k", 1)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	require.Empty(t, b.Received())
}
