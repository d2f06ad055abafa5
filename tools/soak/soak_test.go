package main

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"
)

var soakDuration = flag.Duration("soak.duration", 20*time.Second, "how long TestSoak injects faults (CI keeps the default)")

// TestSoak runs the fault soak for -soak.duration: every acknowledged
// record delivered exactly once in order per shard to both subscribers,
// the watcher up to date, memory and goroutines flat after warm-up.
func TestSoak(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), *soakDuration+3*time.Minute)
	defer cancel()
	o := Options{Duration: *soakDuration, FaultEvery: time.Second, Rate: 200, Drain: 30 * time.Second}
	if testing.Verbose() {
		o.Log = os.Stderr
	}
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Summary())
	if !res.OK() {
		t.Fatalf("soak failed: %v", res.Failures)
	}
	if res.Published == 0 || len(res.Faults) == 0 {
		t.Fatalf("nothing ran: %d published, faults %v", res.Published, res.Faults)
	}
}
