package server_test

import (
	"strconv"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// Finding 4: idempotent publishes with ever fresh producer ids, empty or
// not, hold at most MaxProducers producer states; the heap stays flat; a
// legitimate producer keeps working.
func TestProducerFloodBounded(t *testing.T) {
	const flood, maxProducers = 8000, 500
	cfg := durableCfg()
	cfg.Engine.MaxProducers = maxProducers
	srv := startBroker(t, cfg)
	target := engine.Topic{Tenant: topic.TenantID, Namespace: "ns", Stream: "flood"}
	require.NoError(t, srv.Engine().CreateStream(target, engine.StreamConfig{}))
	good := dial(t, srv, nil)
	checkServing(t, good)

	r := dialRaw(t, srv)
	s := r.stream(t, rawFlags, felix.FeatureIdempotentProducer|felix.FeatureErrorCodes)
	mk := func(payloads [][]byte) func(i int) []byte {
		return func(i int) []byte {
			return jsonFrame(t, &felix.PublishIdempotent{TenantID: target.Tenant, Namespace: target.Namespace,
				Stream: target.Stream, Payloads: payloads, RequestID: uint64(i + 1), ProducerID: uint64(i+1) << 20, Sequence: 0})
		}
	}
	pipeline(t, s, 100, mk([][]byte{[]byte("w")})) // warm up
	before := heapAfterGC()
	for _, ans := range pipeline(t, s, flood, mk(nil)) {
		require.IsType(t, &felix.PublishOK{}, ans)
	}
	require.LessOrEqual(t, srv.Stats().Engine.ProducerStates, uint64(100), "empty batches leave no state")
	for _, ans := range pipeline(t, s, flood, mk([][]byte{[]byte("x")})) {
		require.IsType(t, &felix.PublishOK{}, ans)
	}
	after := heapAfterGC()
	st := srv.Stats().Engine
	require.LessOrEqual(t, st.ProducerStates, uint64(maxProducers))
	require.Positive(t, st.ProducersEvicted)
	grew := int64(after) - int64(before)
	t.Logf("heap grew %d KiB for %d producer ids", grew>>10, 2*flood)
	require.Less(t, grew, int64(8<<20), "producer state is bounded")
	checkServing(t, good)
}

// Issue 22 #10: tenants that flood the idempotent producer table hold at
// most their share of it, and a tenant publishing idempotently to a new
// stream (a shard holding no producer) is served even with the whole
// table full: room is made on another shard. Its producer then goes on.
func TestProducerTableSharedFairlyAcrossTenants(t *testing.T) {
	const maxProducers, share, flood = 64, 32, 400
	toks, err := server.ParseTokens("t1:demo-token,tB:b,tC:c")
	require.NoError(t, err)
	cfg := durableCfg()
	cfg.Tokens = toks
	cfg.Engine.MaxProducers = maxProducers
	cfg.Engine.MaxProducersPerTenant = share
	srv := startBroker(t, cfg)
	r := dialRaw(t, srv)
	feats := felix.FeatureIdempotentProducer | felix.FeatureErrorCodes
	flooder := func(tenant, token string) {
		s := r.streamAs(t, tenant, token, rawFlags, feats)
		answers := pipeline(t, s, flood, func(i int) []byte {
			return jsonFrame(t, &felix.PublishIdempotent{TenantID: tenant, Namespace: "ns", Stream: "s" + strconv.Itoa(i%4),
				Payloads: [][]byte{[]byte("x")}, RequestID: uint64(i + 1), ProducerID: uint64(i+1) << 20, Sequence: 0})
		})
		for _, a := range answers {
			require.IsType(t, &felix.PublishOK{}, a, "a tenant at its share makes room among its own")
		}
	}
	flooder("tB", "b")
	require.LessOrEqual(t, srv.Stats().Engine.ProducerStates, uint64(share), "one tenant holds at most its share")
	flooder("tC", "c")
	require.Equal(t, uint64(maxProducers), srv.Stats().Engine.ProducerStates, "the table is full")

	s := r.stream(t, rawFlags, feats)
	for seq := range uint64(3) {
		s.send(&felix.PublishIdempotent{TenantID: topic.TenantID, Namespace: "ns", Stream: "fresh", Payloads: [][]byte{[]byte("a")},
			RequestID: nextID(), ProducerID: 7, Sequence: seq})
		require.IsType(t, &felix.PublishOK{}, s.recv(), "sequence %d on a shard without producers of its own", seq)
	}
	st := srv.Stats().Engine
	require.LessOrEqual(t, st.ProducerStates, uint64(maxProducers))
	require.Zero(t, st.RefusedBatches)
	checkServing(t, dial(t, srv, nil))
}
