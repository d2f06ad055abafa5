package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

// series makes synthetic samples every step over window: each figure at
// its base plus noise as large as a soak's (the live heap swings a few
// MiB between collections, goroutines by ~100 with a kill), plus what
// shape adds at t.
func series(window, step time.Duration, seed uint64, shape func(t time.Duration, s *Sample)) []Sample {
	rng := rand.New(rand.NewPCG(seed, seed))
	noise := func(amp float64) float64 { return (rng.Float64()*2 - 1) * amp }
	var ss []Sample
	for t := time.Duration(0); t <= window; t += step {
		s := Sample{At: 10*time.Minute + t}
		s.HeapLive = uint64((20 + noise(3)) * mib)
		s.Mem.Objects = s.HeapLive + uint64((4+noise(4))*mib)
		s.Mem.Stacks = uint64((2 + noise(0.5)) * mib)
		s.Mem.Metadata = uint64((3 + noise(0.2)) * mib)
		s.Mem.Free = uint64((5 + noise(5)) * mib)
		s.Goroutines = 180 + int(noise(60))
		if shape != nil {
			shape(t, &s)
		}
		s.Mem.Total = s.Mem.Objects + s.Mem.Unused + s.Mem.Free + s.Mem.Released + s.Mem.Stacks + s.Mem.Metadata + s.Mem.Other
		s.RSS += int64(s.Mem.Resident()) + int64((10+noise(1))*mib) // the binary's pages
		ss = append(ss, s)
	}
	return ss
}

// leak adds perMinute MiB (or goroutines) a minute to the figure f picks.
func leak(perMinute float64, f func(*Sample) *uint64) func(time.Duration, *Sample) {
	return func(t time.Duration, s *Sample) { *f(s) += uint64(perMinute * t.Minutes() * mib) }
}

// TestFlatJudgesTrends: the flat check passes noise and swings that
// return, and fails a leak of the size the soak once showed in RSS
// (0.6 MiB a minute) in each judged figure, over a 30-minute run's judged
// 20 minutes and over the CI run's 15 s.
func TestFlatJudgesTrends(t *testing.T) {
	long, short := 20*time.Minute, 15*time.Second
	cases := []struct {
		name   string
		window time.Duration
		step   time.Duration
		shape  func(time.Duration, *Sample)
		fails  string // the figure that must fail ("": none)
	}{
		{"flat with noise", long, time.Second, nil, ""},
		{"flat with noise, CI", short, time.Second / 3, nil, ""},
		{"swings at faults that return", long, time.Second, func(t time.Duration, s *Sample) {
			// every 2 min a 40 s spell: +30 MiB heap, +150 goroutines, +8 MiB stacks
			if t%(2*time.Minute) < 40*time.Second {
				s.HeapLive += 30 * mib
				s.Mem.Objects += 30 * mib
				s.Mem.Stacks += 8 * mib
				s.Goroutines += 150
			}
		}, ""},
		{"a swing at the end that returns", long, time.Second, func(t time.Duration, s *Sample) {
			if t > long-90*time.Second && t < long-30*time.Second {
				s.HeapLive += 30 * mib
				s.Mem.Objects += 30 * mib
				s.Goroutines += 150
			}
		}, ""},
		{"a swing in the CI run", short, time.Second / 3, func(t time.Duration, s *Sample) {
			if t > 5*time.Second && t < 9*time.Second {
				s.HeapLive += 10 * mib
				s.Mem.Objects += 10 * mib
				s.Goroutines += 120
			}
		}, ""},
		// A node killed before warm-up ended and restarted in the window
		// (a kill is held 3 s at most): a step up that does not return.
		{"a node restarted early in the CI run", short, time.Second / 3, func(t time.Duration, s *Sample) {
			if t > 3*time.Second {
				s.Goroutines += 110
				s.HeapLive += 2 * mib
				s.Mem.Objects += 2 * mib
			}
		}, ""},
		// The stacks' drift measured over 30 minutes (+0.08 MiB/min), in a
		// two-hour run: past the slack, within the per-minute allowance.
		{"the runtime's drift over two hours", 2 * time.Hour, 5 * time.Second,
			leak(0.08, func(s *Sample) *uint64 { return &s.Mem.Stacks }), ""},
		{"free pages retained", long, time.Second, leak(0.6, func(s *Sample) *uint64 { return &s.Mem.Free }), ""},
		{"live heap leak", long, time.Second, func(t time.Duration, s *Sample) {
			d := uint64(0.6 * t.Minutes() * mib)
			s.HeapLive += d
			s.Mem.Objects += d
		}, "live heap"},
		{"stacks leak", long, time.Second, leak(0.6, func(s *Sample) *uint64 { return &s.Mem.Stacks }), "Go non-heap"},
		{"metadata leak", long, time.Second, leak(0.6, func(s *Sample) *uint64 { return &s.Mem.Metadata }), "Go non-heap"},
		{"memory outside Go", long, time.Second, func(t time.Duration, s *Sample) {
			s.RSS += int64(0.6 * t.Minutes() * mib)
		}, "RSS beyond Go"},
		{"goroutine leak", long, time.Second, func(t time.Duration, s *Sample) {
			s.Goroutines += int(15 * t.Minutes()) // one every other fault
		}, "goroutines"},
		{"goroutine leak, CI", short, time.Second / 3, func(t time.Duration, s *Sample) {
			s.Goroutines += int(20 * t.Seconds()) // 300 over the window: a leak per connection
		}, "goroutines"},
		{"heap leak, CI", short, time.Second / 3, func(t time.Duration, s *Sample) {
			d := uint64(0.5 * t.Seconds() * mib)
			s.HeapLive += d
			s.Mem.Objects += d
		}, "live heap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 20; seed++ {
				trends := flat(series(c.window, c.step, seed, c.shape))
				judged := map[string]bool{}
				for _, tr := range trends {
					judged[tr.Name] = true
					if want := tr.Name != c.fails; tr.OK != want {
						t.Fatalf("seed %d: %v: OK %v, want %v", seed, tr, tr.OK, want)
					}
				}
				for _, r := range trendRules {
					if !judged[r.name] && !(r.notRace && raceEnabled) {
						t.Fatalf("%s not judged", r.name)
					}
				}
				if c.fails != "" && !judged[c.fails] && !raceEnabled {
					t.Fatalf("%s not judged", c.fails)
				}
			}
		})
	}
}

// TestTheilSen: the median slope of a line is its slope, and outliers
// in a fifth of the points do not move it.
func TestTheilSen(t *testing.T) {
	var xs, ys []float64
	for i := range 1000 {
		xs = append(xs, float64(i))
		y := 3 + 0.5*float64(i)
		if i%5 == 0 {
			y += 1000
		}
		ys = append(ys, y)
	}
	if got := theilSen(xs, ys); got < 0.49 || got > 0.51 {
		t.Fatalf("slope %v, want 0.5", got)
	}
	if got := theilSen(xs[:1], ys[:1]); got != 0 {
		t.Fatalf("one point: slope %v, want 0", got)
	}
}

// TestLogsFull: warm-up waits for every shard's log and the cache's write
// log to reach their bounds.
func TestLogsFull(t *testing.T) {
	full := []int{retainRecords, retainRecords + 5, retainRecords * 2, retainRecords}
	cases := []struct {
		name string
		acks []int
		puts int
		want bool
	}{
		{"all full", full, cacheLogRetain, true},
		{"one shard short", []int{retainRecords, retainRecords - 1, retainRecords * 3, retainRecords}, cacheLogRetain, false},
		{"the cache log short", full, cacheLogRetain - 1, false},
	}
	for _, c := range cases {
		if got := logsFull(c.acks, c.puts); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
