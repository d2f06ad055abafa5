package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

func put(k, v string) felix.StateChange {
	return felix.StateChange{Op: felix.StatePut, Key: k, Value: []byte(v)}
}

func del(k string) felix.StateChange { return felix.StateChange{Op: felix.StateDelete, Key: k} }

func requireMismatch(t *testing.T, err error, tail uint64) {
	t.Helper()
	var r *Refusal
	require.True(t, errors.As(err, &r), "want *Refusal, got %v", err)
	require.Equal(t, RefusedOffsetMismatch, r.Reason)
	require.Equal(t, tail, r.Tail)
}

func TestCommitAppliesStateAtTheEventOffset(t *testing.T) {
	e := New(Config{DefaultStream: StreamConfig{Durable: true, Shards: 4}})
	defer e.Close()
	topic := Topic{"t", "ns", "orders"}
	entity := []byte("customer-1")
	shard := felix.RoutingModulo.Shard(entity, 4)

	v, err := e.StateGet(topic, entity, "balance")
	require.NoError(t, err)
	require.Equal(t, StateValue{}, v, "never written: absent, no as_of")

	res, err := e.Commit(CommitRequest{Topic: topic, EntityKey: entity, Event: []byte("opened"),
		Changes: []felix.StateChange{put("balance", "10"), put("owner", "ann")}})
	require.NoError(t, err)
	require.Equal(t, shard, res.Shard)
	require.Equal(t, uint64(0), res.Offset)

	res2, err := e.Commit(CommitRequest{Topic: topic, EntityKey: entity, Event: []byte("paid"),
		Changes: []felix.StateChange{put("balance", "5"), del("owner"), put("tmp", "x"), del("tmp")}})
	require.NoError(t, err)
	require.Equal(t, uint64(1), res2.Offset)

	v, err = e.StateGet(topic, entity, "balance")
	require.NoError(t, err)
	require.Equal(t, StateValue{Value: []byte("5"), Found: true, Version: 1, AsOf: 1, HasAsOf: true}, v)
	for _, k := range []string{"owner", "tmp", "never"} {
		v, err = e.StateGet(topic, entity, k)
		require.NoError(t, err)
		require.False(t, v.Found, k)
		require.Nil(t, v.Value)
		require.Equal(t, uint64(1), v.AsOf)
	}
	// The event is a record of the shard like any other.
	recs, _, err := e.Read(topic, shard, 0, 10)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, "paid", string(recs[1].Payload))
	// Another entity does not see these keys.
	v, err = e.StateGet(topic, []byte("customer-2"), "balance")
	require.NoError(t, err)
	require.False(t, v.Found)
}

func TestCommitExpectedOffset(t *testing.T) {
	e := New(Config{DefaultStream: durable})
	defer e.Close()
	topic := Topic{"t", "ns", "s"}
	_, err := e.Commit(CommitRequest{Topic: topic, EntityKey: []byte("e"), Event: []byte("x"),
		Changes: []felix.StateChange{put("k", "v")}, HasExpected: true, ExpectedOffset: 0})
	require.NoError(t, err)
	_, err = e.Commit(CommitRequest{Topic: topic, EntityKey: []byte("e"), Event: []byte("y"),
		Changes: []felix.StateChange{put("k", "w")}, HasExpected: true, ExpectedOffset: 0})
	requireMismatch(t, err, 1)
	v, err := e.StateGet(topic, []byte("e"), "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(v.Value), "a refused commit writes nothing")
	_, tail, err := e.Tail(topic, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(1), tail, "a refused commit consumes no offset")
}

func TestCommitRefusals(t *testing.T) {
	e := New(Config{DefaultStream: durable, State: StateConfig{MaxEntries: 2}})
	defer e.Close()
	topic := Topic{"t", "ns", "s"}
	_, err := e.Commit(CommitRequest{Topic: topic, EntityKey: []byte("e"), Event: []byte("x"),
		Changes: []felix.StateChange{put("a", "1"), put("b", "2"), put("c", "3")}})
	requireCode(t, err, felix.CodeLimitExceeded, felix.RetryFatal)
	_, tail, _ := e.Tail(topic, 0)
	require.Zero(t, tail)
	_, err = e.Commit(CommitRequest{Topic: topic, EntityKey: []byte("e"), Event: []byte("x"),
		Changes: []felix.StateChange{put("", "1")}})
	requireCode(t, err, felix.CodeInvalidRequest, felix.RetryFatal)
	// Replacing and deleting keys frees room.
	_, err = e.Commit(CommitRequest{Topic: topic, EntityKey: []byte("e"), Event: []byte("x"),
		Changes: []felix.StateChange{put("a", "1"), put("b", "2")}})
	require.NoError(t, err)
	_, err = e.Commit(CommitRequest{Topic: topic, EntityKey: []byte("e"), Event: []byte("x"),
		Changes: []felix.StateChange{del("a"), put("b", "3"), put("c", "3")}})
	require.NoError(t, err)

	eph := New(Config{})
	defer eph.Close()
	_, err = eph.Commit(CommitRequest{Topic: topic, EntityKey: []byte("e"), Event: []byte("x")})
	requireCode(t, err, felix.CodeInvalidRequest, felix.RetryFatal)
}

func TestPublishIf(t *testing.T) {
	e := New(Config{DefaultStream: durable})
	defer e.Close()
	topic := Topic{"t", "ns", "s"}
	req := PublishRequest{Topic: topic, Payloads: [][]byte{[]byte("a"), []byte("b")}}
	res, err := e.PublishIf(req, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(0), res.Offset)
	_, err = e.PublishIf(req, 0)
	requireMismatch(t, err, 2)
	res, err = e.PublishIf(req, 2)
	require.NoError(t, err)
	require.Equal(t, uint64(2), res.Offset)
	_, err = e.PublishIf(PublishRequest{Topic: topic}, 4)
	requireCode(t, err, felix.CodeInvalidRequest, felix.RetryFatal)
}

func TestOffsetForTime(t *testing.T) {
	clk := newFakeClock()
	e := New(Config{DefaultStream: durable, Now: clk.Now})
	defer e.Close()
	topic := Topic{"t", "ns", "s"}
	t0 := uint64(clk.Now().UnixMicro())
	pub(t, e, topic, "a", "b")
	clk.Advance(time.Second)
	pub(t, e, topic, "c")
	for _, c := range []struct {
		at   uint64
		off  uint64
		some bool
	}{{0, 0, true}, {t0, 0, true}, {t0 + 1, 2, true}, {t0 + 1_000_000, 2, true}, {t0 + 1_000_001, 0, false}} {
		off, ok, err := e.OffsetForTime(topic, 0, c.at)
		require.NoError(t, err)
		require.Equal(t, c.some, ok, "at %d", c.at)
		require.Equal(t, c.off, off, "at %d", c.at)
	}
	eph := New(Config{})
	defer eph.Close()
	_, _, err := eph.OffsetForTime(topic, 0, 0)
	requireCode(t, err, felix.CodeInvalidRequest, felix.RetryFatal)
}
