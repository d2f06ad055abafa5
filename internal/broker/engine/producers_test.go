package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

func idem(tp Topic, id, seq uint64, payloads ...string) PublishRequest {
	r := PublishRequest{Topic: tp, Idempotent: true, ProducerID: id, Sequence: seq}
	for _, p := range payloads {
		r.Payloads = append(r.Payloads, []byte(p))
	}
	return r
}

func refusal(t *testing.T, err error) RefusalReason {
	t.Helper()
	var rf *Refusal
	require.True(t, errors.As(err, &rf), "%v", err)
	return rf.Reason
}

// Empty and refused batches leave no producer state; the table is bounded
// per shard and engine-wide (least recently used first out); idle states
// expire. A forgotten producer is told unknown_producer.
func TestProducerTableBounded(t *testing.T) {
	clk := newFakeClock()
	e := New(Config{DefaultStream: StreamConfig{Durable: true, Shards: 2}, MaxProducers: 6, MaxProducersPerShard: 4,
		ProducerIdle: time.Minute, Now: clk.Now})
	tp := Topic{"t", "ns", "s"}

	for id := uint64(1); id <= 100; id++ {
		_, err := e.Publish(idem(tp, id, 0)) // empty
		require.NoError(t, err)
		_, err = e.Publish(idem(tp, id+1000, 5, "x")) // refused: unknown producer
		require.Equal(t, RefusedUnknownProducer, refusal(t, err))
	}
	require.Zero(t, e.Stats().ProducerStates, "no state for empty or refused batches")

	for id := uint64(1); id <= 10; id++ {
		_, err := e.Publish(idem(tp, id, 0, "a"))
		require.NoError(t, err)
		require.LessOrEqual(t, e.Stats().ProducerStates, uint64(4))
	}
	// Producers 7..10 remain on shard 0; 1 was evicted long ago.
	_, err := e.Publish(idem(tp, 1, 1, "b"))
	require.Equal(t, RefusedUnknownProducer, refusal(t, err))
	_, err = e.Publish(idem(tp, 10, 1, "b"))
	require.NoError(t, err)
	require.Equal(t, uint64(6), e.Stats().ProducersEvicted)

	// Keyed batches reach shard 1: the engine-wide bound (6) evicts there.
	k := func(id uint64) PublishRequest {
		r := idem(tp, id, 0, "k")
		r.Keyed, r.Key = true, keyForShard(t, 1, 2)
		return r
	}
	for id := uint64(20); id < 30; id++ {
		_, err := e.Publish(k(id))
		require.NoError(t, err)
		require.LessOrEqual(t, e.Stats().ProducerStates, uint64(6))
	}

	clk.Advance(2 * time.Minute)
	_, err = e.Publish(idem(tp, 10, 2, "c"))
	require.Equal(t, RefusedUnknownProducer, refusal(t, err), "idle producer expired")
	require.Positive(t, e.Stats().ProducersExpired)
}

// A producer's sequence ring grows with its sequences and still detects
// duplicates across the growth, up to the configured window.
func TestProducerWindowGrows(t *testing.T) {
	e := New(Config{DefaultStream: StreamConfig{Durable: true}, ProducerWindow: 64})
	tp := Topic{"t", "ns", "s"}
	for seq := range uint64(100) {
		res, err := e.Publish(idem(tp, 7, seq, string(rune('a'+seq%26))))
		require.NoError(t, err)
		require.Equal(t, seq, res.Offset)
	}
	for seq := uint64(36); seq < 100; seq++ {
		res, err := e.Publish(idem(tp, 7, seq, string(rune('a'+seq%26))))
		require.NoError(t, err)
		require.True(t, res.Duplicate)
		require.Equal(t, seq, res.Offset)
	}
	_, err := e.Publish(idem(tp, 7, 35, "j"))
	require.Equal(t, RefusedSequenceExpired, refusal(t, err))
	_, err = e.Publish(idem(tp, 7, 99, "other"))
	require.Equal(t, RefusedSequenceReused, refusal(t, err))
}

// keyForShard finds a key routed to shard idx of n.
func keyForShard(t *testing.T, idx, n uint32) []byte {
	for i := range 1000 {
		k := []byte{byte(i), byte(i >> 8)}
		if felix.RoutingModulo.ShardOf(k, true, n) == idx {
			return k
		}
	}
	t.Fatal("no key")
	return nil
}

// Issue 22 #10: with the engine-wide table full of another shard's
// producers, a new producer on a shard holding none makes room there (the
// least recently used producer of the other shard is forgotten); only
// when that shard cannot be had without waiting is the batch refused
// overloaded (retryable), nothing written.
func TestProducerTableFullEvictsAcrossShards(t *testing.T) {
	e := New(Config{DefaultStream: StreamConfig{Durable: true, Shards: 2}, MaxProducers: 2})
	tp := Topic{"t", "ns", "s"}
	for id := uint64(1); id <= 2; id++ {
		_, err := e.Publish(idem(tp, id, 0, "a"))
		require.NoError(t, err)
	}
	key := keyForShard(t, 1, 2)
	// Shard 0 busy: refused, nothing written.
	other := e.streams[tp].shards[0]
	other.mu.Lock()
	r := idem(tp, 3, 0, "k")
	r.Keyed, r.Key = true, key
	_, err := e.Publish(r)
	other.mu.Unlock()
	var ee *Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, felix.CodeOverloaded, ee.Code)
	require.Equal(t, felix.RetryAfter, ee.Retry)
	_, tail, err := e.Tail(tp, 1)
	require.NoError(t, err)
	require.Zero(t, tail, "nothing written")

	_, err = e.Publish(r)
	require.NoError(t, err, "room made on the other shard")
	st := e.Stats()
	require.Equal(t, uint64(2), st.ProducerStates)
	require.Equal(t, uint64(1), st.ProducersEvicted)
	_, err = e.Publish(idem(tp, 1, 1, "b"))
	var rf *Refusal
	require.ErrorAs(t, err, &rf, "the least recently used producer was forgotten")
	require.Equal(t, RefusedUnknownProducer, rf.Reason)
	_, err = e.Publish(idem(tp, 2, 1, "b"))
	require.NoError(t, err, "the other one kept")
}

// A tenant holds at most its share of the table: beyond it its own least
// recently used producers make room, and other tenants keep theirs.
func TestProducerTenantShare(t *testing.T) {
	e := New(Config{DefaultStream: StreamConfig{Durable: true}, MaxProducers: 10, MaxProducersPerTenant: 3})
	a, b := Topic{"A", "ns", "s"}, Topic{"B", "ns", "s"}
	_, err := e.Publish(idem(a, 1, 0, "a"))
	require.NoError(t, err)
	for id := uint64(100); id < 120; id++ {
		_, err := e.Publish(idem(b, id, 0, "b"))
		require.NoError(t, err)
	}
	st := e.Stats()
	require.Equal(t, uint64(4), st.ProducerStates, "B holds its share of 3, A its one")
	require.Equal(t, uint64(17), st.ProducersEvicted)
	_, err = e.Publish(idem(a, 1, 1, "a"))
	require.NoError(t, err, "A's producer survived B's flood")
}
