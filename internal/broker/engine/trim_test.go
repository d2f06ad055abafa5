package engine

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTrimHead(t *testing.T) {
	e := New(Config{DefaultStream: StreamConfig{Durable: true}})
	defer e.Close()
	for range 5 {
		_, err := e.Publish(PublishRequest{Topic: tp, Payloads: [][]byte{[]byte("r")}})
		require.NoError(t, err)
	}
	require.NoError(t, e.TrimHead(tp, 0, 3))
	oldest, tail, err := e.Tail(tp, 0)
	require.NoError(t, err)
	require.Equal(t, [2]uint64{3, 5}, [2]uint64{oldest, tail})

	_, _, err = e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartOffset, Offset: 2}})
	var ce *CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, CursorError{Reason: CursorTooOld, Requested: 2, Available: 3}, *ce)
	sub, info, err := e.Subscribe(SubscribeRequest{Topic: tp, Start: Start{Kind: StartEarliest}})
	require.NoError(t, err)
	require.Equal(t, uint64(3), info.StartOffset)
	sub.Close()

	// Trimming below the head does nothing; past the tail stops at it.
	require.NoError(t, e.TrimHead(tp, 0, 1))
	require.NoError(t, e.TrimHead(tp, 0, 99))
	oldest, tail, err = e.Tail(tp, 0)
	require.NoError(t, err)
	require.Equal(t, [2]uint64{5, 5}, [2]uint64{oldest, tail})
	res, err := e.Publish(PublishRequest{Topic: tp, Payloads: [][]byte{[]byte("after")}})
	require.NoError(t, err)
	require.Equal(t, uint64(5), res.Offset)
	recs, _, err := e.Read(tp, 0, 5, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "after", string(recs[0].Payload))

	eph := Topic{Tenant: "t1", Namespace: "ns", Stream: "eph"}
	require.NoError(t, e.CreateStream(eph, StreamConfig{}))
	require.Error(t, e.TrimHead(eph, 0, 1))
}
