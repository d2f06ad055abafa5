package engine

import (
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// A consumer group against a model: random publishes, polls, acks, nacks,
// dead-lettering, redrives, discards and clock advances. Every poll hands
// out exactly what the model says is ready (owed records lowest offset
// first, then fresh ones), with the model's attempt counts; an acked or
// discarded record never comes back; describe and the dead-letter list
// agree with the model.
func TestGroupMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const maxAttempts = 3
		const vis = 10 * time.Second
		clk := newFakeClock()
		e := New(Config{DefaultStream: durable, Now: clk.Now, Groups: GroupConfig{MaxAttempts: maxAttempts, Visibility: vis}})
		defer e.Close()
		ref := GroupRef{Topic: Topic{"t", "ns", "q"}, Group: "g"}

		type mclaim struct {
			attempts uint32
			owed     bool
			until    time.Time // claimed until
			from     time.Time // owed from
		}
		claims := map[uint64]*mclaim{}
		dead := map[uint64]bool{}
		settled := map[uint64]bool{}
		tail, next := uint64(0), uint64(0)
		expire := func() {
			now := clk.Now()
			for off, c := range claims {
				if !c.owed && !c.until.After(now) {
					if c.attempts >= maxAttempts {
						delete(claims, off)
						dead[off] = true
					} else {
						c.owed, c.from = true, now
					}
				}
			}
		}
		claimed := func() []uint64 {
			var out []uint64
			for off, c := range claims {
				if !c.owed {
					out = append(out, off)
				}
			}
			slices.Sort(out)
			return out
		}
		for range rapid.IntRange(1, 80).Draw(rt, "ops") {
			switch rapid.IntRange(0, 7).Draw(rt, "op") {
			case 0: // publish
				n := rapid.IntRange(1, 3).Draw(rt, "n")
				ps := make([][]byte, n)
				for i := range ps {
					ps[i] = []byte{byte(tail) + byte(i)}
				}
				if _, err := e.Publish(PublishRequest{Topic: ref.Topic, Payloads: ps}); err != nil {
					rt.Fatal(err)
				}
				tail += uint64(n)
			case 1: // poll
				max := rapid.IntRange(1, 4).Draw(rt, "max")
				got, err := e.GroupPoll(ctxT(t), GroupPollRequest{GroupRef: ref, Max: max})
				if err != nil {
					rt.Fatal(err)
				}
				expire()
				now := clk.Now()
				var owed []uint64
				for off, c := range claims {
					if c.owed && !c.from.After(now) {
						owed = append(owed, off)
					}
				}
				slices.Sort(owed)
				var want []oa
				for _, off := range owed {
					if len(want) == max {
						break
					}
					c := claims[off]
					c.attempts++
					c.owed, c.until = false, now.Add(vis)
					want = append(want, oa{off, c.attempts})
				}
				for len(want) < max && next < tail {
					claims[next] = &mclaim{attempts: 1, until: now.Add(vis)}
					want = append(want, oa{next, 1})
					next++
				}
				if g := offsAtt(got); !slices.Equal(g, append([]oa{}, want...)) {
					rt.Fatalf("poll: got %v want %v", g, want)
				}
				for _, r := range got {
					if settled[r.Offset] {
						rt.Fatalf("settled offset %d delivered again", r.Offset)
					}
					if r.Payload[0] != byte(r.Offset) {
						rt.Fatalf("offset %d carries payload of %d", r.Offset, r.Payload[0])
					}
				}
			case 2, 3: // ack or nack a claimed record (or a random one)
				expire()
				cl := claimed()
				off := uint64(rapid.IntRange(0, int(tail)).Draw(rt, "any"))
				if len(cl) > 0 && rapid.Bool().Draw(rt, "pick") {
					off = rapid.SampledFrom(cl).Draw(rt, "claimed")
				}
				c := claims[off]
				isClaimed := c != nil && !c.owed
				var err error
				if rapid.Bool().Draw(rt, "ack") {
					err = e.GroupAck(ref, off)
					if isClaimed {
						delete(claims, off)
						settled[off] = true
					}
				} else {
					err = e.GroupNack(ref, off, 0, 0)
					if isClaimed {
						if c.attempts >= maxAttempts {
							delete(claims, off)
							dead[off] = true
						} else {
							c.owed, c.from = true, clk.Now()
						}
					}
				}
				if (err == nil) != isClaimed {
					rt.Fatalf("settle %d: err %v, claimed %v", off, err, isClaimed)
				}
			case 4: // dead-letter a claimed record
				expire()
				if cl := claimed(); len(cl) > 0 {
					off := rapid.SampledFrom(cl).Draw(rt, "dl")
					if err := e.GroupDeadLetter(ref, off); err != nil {
						rt.Fatal(err)
					}
					delete(claims, off)
					dead[off] = true
				}
			case 5: // redrive or discard a dead letter
				if len(dead) == 0 {
					continue
				}
				offs := slices.Sorted(maps.Keys(dead))
				off := rapid.SampledFrom(offs).Draw(rt, "dead")
				delete(dead, off)
				if rapid.Bool().Draw(rt, "redrive") {
					if err := e.GroupRedrive(ref, off); err != nil {
						rt.Fatal(err)
					}
					claims[off] = &mclaim{owed: true, from: clk.Now()}
				} else {
					if err := e.GroupDiscard(ref, off); err != nil {
						rt.Fatal(err)
					}
					settled[off] = true
				}
			case 6: // time passes
				clk.Advance(time.Duration(rapid.IntRange(1, 12).Draw(rt, "s")) * time.Second)
			case 7: // describe and list
				expire()
				info, err := e.GroupDescribe(ref)
				if err != nil {
					rt.Fatal(err)
				}
				if !info.HasCommitted {
					continue // not created yet (no poll so far)
				}
				var inFlight, owed uint64
				committed := next
				for off, c := range claims {
					committed = min(committed, off)
					if c.owed {
						owed++
					} else {
						inFlight++
					}
				}
				owed += tail - next
				want := GroupInfo{Committed: committed, HasCommitted: true, Tail: tail, InFlight: inFlight, Owed: owed, DeadLetters: uint64(len(dead))}
				if info != want {
					rt.Fatalf("describe: got %+v want %+v", info, want)
				}
				dl, _ := e.GroupDeadLetters(ref)
				if !slices.Equal(dl, slices.Sorted(maps.Keys(dead))) {
					rt.Fatalf("dead letters: got %v want %v", dl, slices.Sorted(maps.Keys(dead)))
				}
			}
		}
	})
}
