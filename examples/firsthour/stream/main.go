// Command stream is the first-hour stream program: it starts a three-node
// reference cluster in-process, declares a six-shard durable stream,
// publishes 100,000 acknowledged records to it through six node kills
// (each node killed and restarted twice), and counts them per shard with
// one sharded subscriber that reads from the earliest offset the whole
// time. It exits 0 only if every acknowledged record arrived exactly once,
// in order within its shard.
//
//	go run ./examples/firsthour/stream [-records N] [-kills K] [-batch B]
//
// The publisher uses only package client; package cluster stands in for
// the brokers (its Kill and Restart are what the cluster's control
// endpoint does over HTTP).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
)

// options are the program's knobs.
type options struct {
	records, kills, batch int
	shards                uint32
	timeout               time.Duration
}

func main() {
	o := options{shards: 6}
	flag.IntVar(&o.records, "records", 100_000, "acknowledged records to publish")
	flag.IntVar(&o.kills, "kills", 6, "node kills during the run (each node is restarted after)")
	flag.IntVar(&o.batch, "batch", 100, "records per publish")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stream:", err)
		os.Exit(1)
	}
}

// report is what a run saw.
type report struct {
	acked, ambiguous, delivered, extra int
	perShard                           []int
	kills                              int
}

func run(ctx context.Context, o options, out io.Writer) error {
	_, err := runReport(ctx, o, out)
	return err
}

func runReport(ctx context.Context, o options, out io.Writer) (report, error) {
	rep := report{perShard: make([]int, o.shards)}
	cl, err := cluster.Start(ctx, cluster.Config{})
	if err != nil {
		return rep, err
	}
	defer cl.Close()
	topic := client.Topic{TenantID: cluster.DefaultTenant, Namespace: "firsthour", Stream: "orders"}
	if err := cl.Engine().CreateStream(engine.Topic{Tenant: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream},
		engine.StreamConfig{Durable: true, Shards: o.shards}); err != nil {
		return rep, err
	}

	newClient := func() (*client.Client, error) {
		return client.Dial(ctx, client.Config{Seeds: cl.Addrs(), TenantID: cluster.DefaultTenant,
			Token: cluster.DefaultToken, CAFile: cl.CAFile()})
	}
	pub, err := newClient()
	if err != nil {
		return rep, err
	}
	defer pub.Close()
	subc, err := newClient()
	if err != nil {
		return rep, err
	}
	defer subc.Close()

	view, err := pub.StreamShards(ctx, topic)
	if err != nil {
		return rep, err
	}
	shards, routing := view.Shards, view.Routing.V
	if shards != o.shards {
		return rep, fmt.Errorf("stream has %d shards, want %d", shards, o.shards)
	}
	sub, err := subc.SubscribeSharded(ctx, topic, client.ShardedOptions{Start: client.Earliest})
	if err != nil {
		return rep, err
	}
	defer sub.Close()

	// The consumer: every record is "<id>"; ids of one shard arrive in
	// increasing order (one publisher, one key per batch).
	type seen struct {
		shard uint32
		id    int
	}
	events := make(chan seen, 1024)
	subErr := make(chan error, 1)
	go func() {
		for ev, err := range sub.All(ctx) {
			if err != nil {
				subErr <- err
				return
			}
			id, perr := strconv.Atoi(string(ev.Payload))
			if perr != nil {
				subErr <- fmt.Errorf("shard %d offset %d: payload %q", ev.Shard, ev.Offset, ev.Payload)
				return
			}
			events <- seen{ev.Shard, id}
		}
		subErr <- errors.New("subscription ended")
	}()

	// The publisher: batches of o.batch records, one key per batch (so one
	// shard per batch), a node killed every records/(kills+1) records and
	// restarted one batch later. An ambiguous batch (the connection died
	// with it in flight) is not counted as acknowledged; its ids are
	// published again under new ids, so exactly o.records are acked.
	ackedShard := map[int]uint32{} // id → shard, for acknowledged records
	maybe := map[int]bool{}        // ids of ambiguous batches
	every := o.records / (o.kills + 1)
	nextKill, killed := every, -1
	id := 0
	for rep.acked < o.records {
		n := min(o.batch, o.records-rep.acked)
		key := []byte("customer-" + strconv.Itoa(id/o.batch))
		payloads := make([][]byte, n)
		for i := range payloads {
			payloads[i] = []byte(strconv.Itoa(id + i))
		}
		_, err := pub.PublishBatch(ctx, topic, payloads, client.PublishOptions{Key: key})
		switch {
		case err == nil:
			shard := routing.ShardOf(key, true, shards)
			for i := range n {
				ackedShard[id+i] = shard
			}
			rep.acked += n
		case errors.Is(err, client.ErrAmbiguous):
			for i := range n {
				maybe[id+i] = true
			}
			rep.ambiguous += n
		default:
			return rep, fmt.Errorf("publish %d: %w", id, err)
		}
		id += n
		if killed >= 0 {
			if err := cl.Restart(killed); err != nil {
				return rep, err
			}
			killed = -1
		}
		if rep.kills < o.kills && rep.acked >= nextKill {
			killed = rep.kills % cl.Nodes()
			if err := cl.Kill(killed); err != nil {
				return rep, err
			}
			rep.kills++
			nextKill += every
			fmt.Fprintf(out, "killed node %d after %d acked records\n", killed, rep.acked)
		}
	}
	if killed >= 0 {
		if err := cl.Restart(killed); err != nil {
			return rep, err
		}
	}

	// Count until every acknowledged record arrived.
	got := map[int]bool{}
	last := make([]int, o.shards)
	for i := range last {
		last[i] = -1
	}
	for rep.delivered < rep.acked {
		select {
		case s := <-events:
			if got[s.id] {
				return rep, fmt.Errorf("record %d delivered twice", s.id)
			}
			got[s.id] = true
			if s.id <= last[s.shard] {
				return rep, fmt.Errorf("shard %d: record %d after %d", s.shard, s.id, last[s.shard])
			}
			last[s.shard] = s.id
			want, acked := ackedShard[s.id]
			switch {
			case acked && want != s.shard:
				return rep, fmt.Errorf("record %d on shard %d, routed to %d", s.id, s.shard, want)
			case acked:
				rep.delivered++
				rep.perShard[s.shard]++
			case maybe[s.id]:
				rep.extra++ // written although its answer was lost
			default:
				return rep, fmt.Errorf("record %d was never published", s.id)
			}
		case err := <-subErr:
			return rep, fmt.Errorf("sharded subscription: %w", err)
		case <-ctx.Done():
			return rep, fmt.Errorf("%d of %d acknowledged records delivered: %w", rep.delivered, rep.acked, ctx.Err())
		}
	}
	counts := make([]string, len(rep.perShard))
	for i, n := range rep.perShard {
		counts[i] = fmt.Sprintf("shard %d: %d", i, n)
	}
	fmt.Fprintf(out, "%d acked records, %d node kills, all delivered once and in order (%s); %d ambiguous, %d of them written\n",
		rep.acked, rep.kills, strings.Join(counts, ", "), rep.ambiguous, rep.extra)
	return rep, nil
}
