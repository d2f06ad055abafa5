package engine

import (
	"context"
	"testing"

	"github.com/flxproto/felix"
)

// BenchmarkGroupPollAck publishes one 64-byte record, polls it and acks it
// (one op = one record through a consumer group).
func BenchmarkGroupPollAck(b *testing.B) {
	e := New(Config{DefaultStream: StreamConfig{Durable: true, RetainRecords: 1 << 16}})
	defer e.Close()
	ref := GroupRef{Topic: Topic{"t", "ns", "q"}, Group: "g"}
	payload := [][]byte{make([]byte, 64)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Publish(PublishRequest{Topic: ref.Topic, Payloads: payload}); err != nil {
			b.Fatal(err)
		}
		recs, err := e.GroupPoll(ctx, GroupPollRequest{GroupRef: ref, Max: 1})
		if err != nil || len(recs) != 1 {
			b.Fatal(recs, err)
		}
		if err := e.GroupAck(ref, recs[0].Offset); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommit commits one 64-byte event with two state puts under one
// of 64 entities (one op = one commit).
func BenchmarkCommit(b *testing.B) {
	e := New(Config{DefaultStream: StreamConfig{Durable: true, Shards: 4, RetainRecords: 1 << 16}})
	defer e.Close()
	entities := make([][]byte, 64)
	for i := range entities {
		entities[i] = []byte{'e', byte(i)}
	}
	changes := []felix.StateChange{{Op: felix.StatePut, Key: "a", Value: make([]byte, 16)}, {Op: felix.StatePut, Key: "b", Value: make([]byte, 16)}}
	event := make([]byte, 64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := e.Commit(CommitRequest{Topic: Topic{"t", "ns", "s"}, EntityKey: entities[i%64], Event: event, Changes: changes}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
