package server_test

import (
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

func TestCommitAndStateGetOverQUIC(t *testing.T) {
	cfg := durableCfg()
	cfg.Engine.DefaultStream.Shards = 4
	srv := startBroker(t, cfg)
	c := dialRaw(t, srv)
	s := c.stream(t, felix.DefaultClientFlags(), allFeatures)
	entity := []byte("customer-1")

	s.send(&felix.StateGet{TenantID: server.DemoTenant, Namespace: "ns", Stream: "orders", EntityKey: entity, Key: "k", RequestID: 1})
	require.Equal(t, &felix.StateValue{RequestID: 1}, s.recv())

	s.send(&felix.Commit{TenantID: server.DemoTenant, Namespace: "ns", Stream: "orders", EntityKey: entity, Event: []byte("ev"),
		Changes: []felix.StateChange{{Op: felix.StatePut, Key: "k", Value: []byte("v")}}, RequestID: 2})
	require.Equal(t, &felix.CommitOK{RequestID: 2, Offset: 0}, s.recv())
	s.send(&felix.StateGet{TenantID: server.DemoTenant, Namespace: "ns", Stream: "orders", EntityKey: entity, Key: "k", RequestID: 3})
	require.Equal(t, &felix.StateValue{Value: felix.Some([]byte("v")), Version: felix.Some(uint64(0)), AsOf: felix.Some(uint64(0)), RequestID: 3}, s.recv())

	// The event is on the shard the entity key routes to.
	shard := shardForKey(entity, 4)
	s.send(&felix.StreamRead{TenantID: server.DemoTenant, Namespace: "ns", Stream: "orders", Shard: shard, From: 0, RequestID: 4})
	rd := s.recv().(*felix.StreamRecords)
	require.Len(t, rd.Records, 1)
	require.Equal(t, "ev", string(rd.Records[0].Payload))

	// A stale expected offset: publish_refused naming the tail.
	s.send(&felix.Commit{TenantID: server.DemoTenant, Namespace: "ns", Stream: "orders", EntityKey: entity, Event: []byte("ev2"),
		Changes: []felix.StateChange{{Op: felix.StateDelete, Key: "k"}}, ExpectedOffset: felix.Some(uint64(0)), RequestID: 5})
	rf := s.recv().(*felix.PublishRefused)
	require.Equal(t, felix.RefusalOffsetMismatch, rf.Reason.Kind)
	require.Equal(t, uint64(1), rf.Reason.Tail)
	s.send(&felix.Commit{TenantID: server.DemoTenant, Namespace: "ns", Stream: "orders", EntityKey: entity, Event: []byte("ev2"),
		Changes: []felix.StateChange{{Op: felix.StateDelete, Key: "k"}}, ExpectedOffset: felix.Some(uint64(1)), RequestID: 6})
	require.Equal(t, &felix.CommitOK{RequestID: 6, Offset: 1}, s.recv())
	s.send(&felix.StateGet{TenantID: server.DemoTenant, Namespace: "ns", Stream: "orders", EntityKey: entity, Key: "k", RequestID: 7})
	require.Equal(t, &felix.StateValue{AsOf: felix.Some(uint64(1)), RequestID: 7}, s.recv(), "deleted key reads absent")

	// Explicit shards are not advertised: refused.
	s.send(&felix.StateGet{TenantID: server.DemoTenant, Namespace: "ns", Stream: "orders", EntityKey: entity, Key: "k", RequestID: 8, Shard: felix.Some(uint32(1))})
	require.Equal(t, felix.Some(felix.CodeInvalidRequest), s.recv().(*felix.ErrorMessage).Code)
}

func TestPublishIfAndOffsetForTimeOverQUIC(t *testing.T) {
	srv := startBroker(t, durableCfg())
	c := dialRaw(t, srv)
	s := c.stream(t, felix.DefaultClientFlags(), allFeatures)
	pi := func(rid, expected uint64) felix.Message {
		s.send(&felix.PublishIf{TenantID: server.DemoTenant, Namespace: "ns", Stream: "s", Payloads: [][]byte{[]byte("x")},
			ExpectedOffset: expected, RequestID: rid})
		return s.recv()
	}
	require.Equal(t, &felix.PublishOK{RequestID: 1, Offset: felix.Some(uint64(0))}, pi(1, 0))
	rf := pi(2, 0).(*felix.PublishRefused)
	require.Equal(t, felix.PublishRefusalReason{Kind: felix.RefusalOffsetMismatch, Tail: 1}, rf.Reason)
	require.Equal(t, &felix.PublishOK{RequestID: 3, Offset: felix.Some(uint64(1))}, pi(3, 1))

	s.send(&felix.OffsetForTime{TenantID: server.DemoTenant, Namespace: "ns", Stream: "s", AtMicros: 0, RequestID: 4})
	require.Equal(t, &felix.OffsetValue{Offset: felix.Some(uint64(0)), RequestID: 4}, s.recv())
	s.send(&felix.OffsetForTime{TenantID: server.DemoTenant, Namespace: "ns", Stream: "s", AtMicros: 1 << 62, RequestID: 5})
	require.Equal(t, &felix.OffsetValue{RequestID: 5}, s.recv())

	// A client without 0x1000 gets publish_ok without the offset (shaped).
	s2 := c.stream(t, felix.DefaultClientFlags()&^felix.FlagBinaryPublishAckOffset, allFeatures)
	s2.send(&felix.PublishIf{TenantID: server.DemoTenant, Namespace: "ns", Stream: "s", Payloads: [][]byte{[]byte("x")}, ExpectedOffset: 2, RequestID: 9})
	require.Equal(t, &felix.PublishOK{RequestID: 9}, s2.recv())
}
