package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"
)

func main() {
	var o Options
	flag.DurationVar(&o.Duration, "duration", time.Minute, "how long to inject faults and publish")
	flag.DurationVar(&o.Warmup, "warmup", 0, "memory must be flat after this (0: a quarter of -duration)")
	flag.DurationVar(&o.FaultEvery, "fault-every", 2*time.Second, "mean time between faults")
	flag.IntVar(&o.Rate, "rate", 400, "records published per second at most")
	flag.Uint64Var(&o.Seed, "seed", 0, "fault schedule seed (0: random)")
	flag.StringVar(&o.HeapProfile, "heapprofile", "", "write heap profiles to this path plus .warm (after warm-up) and .end")
	out := flag.String("out", "", "write the result as JSON to this file")
	flag.Parse()
	o.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	fmt.Print(res.Summary())
	if *out != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(2)
		}
	}
	if !res.OK() {
		os.Exit(1)
	}
}
