package engine

import (
	"errors"
	"testing"

	"github.com/flxproto/felix"
	"pgregory.net/rapid"
)

// Commits against a model: random commits (some conditional, some with a
// stale expected offset) and publishes on a two-shard stream. state_get
// agrees with the model for every entity and key (value, version = the
// committing offset, as_of = the shard's last commit), a refused commit
// changes nothing, and every applied commit's event is in the shard's log
// at the offset it returned.
func TestCommitsMatchModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		e := New(Config{DefaultStream: StreamConfig{Durable: true, Shards: 2}})
		defer e.Close()
		topic := Topic{"t", "ns", "s"}
		type val struct {
			v       string
			version uint64
		}
		type sk struct{ entity, key string }
		model := map[sk]val{}
		tails := [2]uint64{}
		asOf := [2]uint64{}
		hasAsOf := [2]bool{}
		events := map[[2]uint64]string{} // (shard, offset) → event
		entities := rapid.SampledFrom([]string{"e1", "e2", "e3", "e4"})
		keys := rapid.SampledFrom([]string{"a", "b"})
		for i := range rapid.IntRange(1, 40).Draw(rt, "ops") {
			ent := entities.Draw(rt, "entity")
			sh := felix.RoutingModulo.Shard([]byte(ent), 2)
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
			case 0: // commit
				var changes []felix.StateChange
				for range rapid.IntRange(0, 3).Draw(rt, "changes") {
					k := keys.Draw(rt, "key")
					if rapid.Bool().Draw(rt, "put") {
						changes = append(changes, felix.StateChange{Op: felix.StatePut, Key: k, Value: []byte{byte(i)}})
					} else {
						changes = append(changes, felix.StateChange{Op: felix.StateDelete, Key: k})
					}
				}
				req := CommitRequest{Topic: topic, EntityKey: []byte(ent), Event: []byte{byte(i), 'e'}, Changes: changes}
				stale := false
				if rapid.Bool().Draw(rt, "conditional") {
					req.HasExpected = true
					req.ExpectedOffset = tails[sh]
					if rapid.Bool().Draw(rt, "stale") && tails[sh] > 0 {
						req.ExpectedOffset--
						stale = true
					}
				}
				res, err := e.Commit(req)
				if stale {
					var rf *Refusal
					if !errors.As(err, &rf) || rf.Tail != tails[sh] {
						rt.Fatalf("stale commit: %v", err)
					}
					continue
				}
				if err != nil || res.Offset != tails[sh] || res.Shard != sh {
					rt.Fatalf("commit: %+v %v, want offset %d shard %d", res, err, tails[sh], sh)
				}
				for _, c := range changes {
					if c.Op == felix.StatePut {
						model[sk{ent, c.Key}] = val{string(c.Value), res.Offset}
					} else {
						delete(model, sk{ent, c.Key})
					}
				}
				events[[2]uint64{uint64(sh), res.Offset}] = string(req.Event)
				asOf[sh], hasAsOf[sh] = res.Offset, true
				tails[sh]++
			case 1: // a plain publish moves the tail, not the state
				if _, err := e.Publish(PublishRequest{Topic: topic, Payloads: [][]byte{{'p'}}, Keyed: true, Key: []byte(ent)}); err != nil {
					rt.Fatal(err)
				}
				tails[sh]++
			case 2: // read back
				k := keys.Draw(rt, "key")
				got, err := e.StateGet(topic, []byte(ent), k)
				if err != nil {
					rt.Fatal(err)
				}
				want := StateValue{AsOf: asOf[sh], HasAsOf: hasAsOf[sh]}
				if m, ok := model[sk{ent, k}]; ok {
					want.Value, want.Found, want.Version = []byte(m.v), true, m.version
				}
				if got.Found != want.Found || string(got.Value) != string(want.Value) || got.Version != want.Version ||
					got.AsOf != want.AsOf || got.HasAsOf != want.HasAsOf {
					rt.Fatalf("state_get %s/%s: got %+v want %+v", ent, k, got, want)
				}
			}
		}
		for at, ev := range events {
			recs, _, err := e.Read(topic, uint32(at[0]), at[1], 1)
			if err != nil || len(recs) != 1 || string(recs[0].Payload) != ev {
				rt.Fatalf("event at shard %d offset %d: %v %v, want %q", at[0], at[1], recs, err, ev)
			}
		}
	})
}
