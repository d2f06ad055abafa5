package server_test

import (
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/examples/broker/engine"
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
