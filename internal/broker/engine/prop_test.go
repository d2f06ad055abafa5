package engine

import (
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The cache against a model map: random puts (with and without TTL), gets,
// deletes, conditional writes and clock advances agree with the model, and
// a watch opened at the start replays exactly the model's write history.
func TestCacheMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clk := newFakeClock()
		e := New(Config{Now: clk.Now})
		defer e.Close()
		w, _, err := e.Watch(WatchRequest{CacheRef: cr, IsPrefix: true})
		if err != nil {
			rt.Fatal(err)
		}
		type ent struct {
			val     string
			exp     int64 // unix ms, 0 = never
			version uint64
		}
		model := map[string]ent{}
		var history []CacheEvent
		next := uint64(0)
		live := func(k string) (ent, bool) {
			v, ok := model[k]
			if ok && v.exp != 0 && clk.Now().UnixMilli() >= v.exp {
				delete(model, k)
				return ent{}, false
			}
			return v, ok
		}
		keys := rapid.SampledFrom([]string{"a", "b", "c"})
		for range rapid.IntRange(1, 60).Draw(rt, "ops") {
			k := keys.Draw(rt, "key")
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0: // put
				v := strconv.Itoa(rapid.IntRange(0, 99).Draw(rt, "v"))
				var ttl *time.Duration
				exp := int64(0)
				if rapid.Bool().Draw(rt, "ttl") {
					d := time.Duration(rapid.IntRange(1, 50).Draw(rt, "ms")) * time.Millisecond
					ttl = &d
					exp = clk.Now().Add(d).UnixMilli()
				}
				ver, err := e.CachePut(cr, k, []byte(v), ttl)
				if err != nil || ver != next {
					rt.Fatalf("put: version %d err %v, want %d", ver, err, next)
				}
				model[k] = ent{v, exp, next}
				history = append(history, CacheEvent{Key: k, Value: []byte(v), Offset: next, ExpiresAtMillis: uint64(exp)})
				next++
			case 1: // get
				got, ver, found, _ := e.CacheGet(cr, k)
				m, ok := live(k)
				if found != ok || (ok && (string(got) != m.val || ver != m.version)) {
					rt.Fatalf("get %s: %q v%d %v, model %+v %v", k, got, ver, found, m, ok)
				}
			case 2: // delete
				old, found, _ := e.CacheDelete(cr, k)
				m, ok := live(k)
				if found != ok || (ok && string(old) != m.val) {
					rt.Fatalf("delete %s: %q %v, model %+v %v", k, old, found, m, ok)
				}
				if ok {
					delete(model, k)
					history = append(history, CacheEvent{Key: k, Deleted: true, Offset: next})
					next++
				}
			case 3: // put_if
				m, ok := live(k)
				cond := Condition{Absent: rapid.Bool().Draw(rt, "absent")}
				if !cond.Absent {
					cond.Version = m.version + uint64(rapid.IntRange(0, 1).Draw(rt, "off"))
				}
				r, _ := e.CachePutIf(cr, k, []byte("if"), nil, cond)
				want := (cond.Absent && !ok) || (!cond.Absent && ok && cond.Version == m.version)
				if r.Applied != want {
					rt.Fatalf("put_if %s %+v: %+v, model %+v %v", k, cond, r, m, ok)
				}
				if want {
					model[k] = ent{"if", 0, next}
					history = append(history, CacheEvent{Key: k, Value: []byte("if"), Offset: next})
					next++
				} else if r.HasVersion != ok || (ok && r.Version != m.version) {
					rt.Fatalf("put_if %s: version %+v, model %+v %v", k, r, m, ok)
				}
			case 4: // delete_if
				m, ok := live(k)
				ver := m.version + uint64(rapid.IntRange(0, 1).Draw(rt, "off"))
				r, _ := e.CacheDeleteIf(cr, k, ver)
				want := ok && ver == m.version
				if r.Applied != want {
					rt.Fatalf("delete_if %s v%d: %+v, model %+v %v", k, ver, r, m, ok)
				}
				if want {
					delete(model, k)
					history = append(history, CacheEvent{Key: k, Deleted: true, Offset: next})
					next++
				}
			case 5:
				clk.Advance(time.Duration(rapid.IntRange(1, 30).Draw(rt, "adv")) * time.Millisecond)
			}
		}
		for i, want := range history {
			d, err := w.Next(ctxT(t))
			if err != nil {
				rt.Fatalf("watch event %d: %v", i, err)
			}
			got := d.Event
			if got.Key != want.Key || got.Offset != want.Offset || got.Deleted != want.Deleted ||
				string(got.Value) != string(want.Value) || got.ExpiresAtMillis != want.ExpiresAtMillis {
				rt.Fatalf("watch event %d: %+v, want %+v", i, got, want)
			}
		}
		w.Close()
	})
}

// Idempotent producers against a model: whatever mix of in-order, repeated,
// reused, gapped and stale sequences is sent, the log holds each accepted
// sequence's batch exactly once, in sequence order.
func TestIdempotentMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const window = 4
		e := New(Config{DefaultStream: durable, ProducerWindow: window})
		defer e.Close()
		id := e.ProducerInit()
		next := uint64(0)
		started := false
		var written []string
		for range rapid.IntRange(1, 80).Draw(rt, "ops") {
			seq := uint64(rapid.IntRange(0, int(next)+2).Draw(rt, "seq"))
			payload := "p" + strconv.FormatUint(seq, 10)
			if rapid.IntRange(0, 4).Draw(rt, "reuse") == 0 {
				payload += "-other"
			}
			res, err := e.Publish(PublishRequest{Topic: tp, Idempotent: true, ProducerID: id, Sequence: seq, Payloads: [][]byte{[]byte(payload)}})
			var rf *Refusal
			switch {
			case !started && seq != 0:
				if !asRefusal(err, &rf) || rf.Reason != RefusedUnknownProducer {
					rt.Fatalf("seq %d before start: %v", seq, err)
				}
			case seq == next:
				if err != nil || res.Duplicate || res.Offset != uint64(len(written)) {
					rt.Fatalf("seq %d: %+v %v", seq, res, err)
				}
				written = append(written, payload)
				next++
				started = true
			case seq > next:
				if !asRefusal(err, &rf) || rf.Reason != RefusedSequenceGap || rf.Expected != next {
					rt.Fatalf("gap seq %d next %d: %v", seq, next, err)
				}
			case next-seq > window:
				if !asRefusal(err, &rf) || rf.Reason != RefusedSequenceExpired {
					rt.Fatalf("expired seq %d next %d: %v", seq, next, err)
				}
			case written[seq] == payload:
				if err != nil || !res.Duplicate || res.Offset != seq {
					rt.Fatalf("duplicate seq %d: %+v %v", seq, res, err)
				}
			default:
				if !asRefusal(err, &rf) || rf.Reason != RefusedSequenceReused {
					rt.Fatalf("reused seq %d: %v", seq, err)
				}
			}
		}
		recs, _, err := e.Read(tp, 0, 0, 1000)
		if err != nil {
			rt.Fatal(err)
		}
		if len(recs) != len(written) {
			rt.Fatalf("log has %d records, model %d", len(recs), len(written))
		}
		for i, r := range recs {
			if string(r.Payload) != written[i] {
				rt.Fatalf("record %d: %q, model %q", i, r.Payload, written[i])
			}
		}
	})
}

func asRefusal(err error, rf **Refusal) bool {
	r, ok := err.(*Refusal)
	*rf = r
	return ok
}
