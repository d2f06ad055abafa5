package main

// The stream program publishes acknowledged keyed batches to a sharded
// durable stream while it kills and restarts nodes through the cluster's
// control endpoint, reads every shard from the earliest offset with one
// sharded subscription the whole time, and checks that every
// acknowledged record arrived once, on the shard its key routes to, in
// order within the shard.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/flxproto/felix/client"
)

// streamOptions are the stream program's knobs.
type streamOptions struct {
	stream                string
	records, kills, batch int
}

// streamReport is what a run saw.
type streamReport struct {
	acked, ambiguous, delivered, extra int
	perShard                           []int
	kills                              int
}

func runStream(ctx context.Context, fx fixture, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("stream", flag.ContinueOnError)
	var o streamOptions
	fs.StringVar(&o.stream, "stream", "events", "the durable sharded stream, in the fixture's namespace")
	fs.IntVar(&o.records, "records", 100_000, "acknowledged records to publish")
	fs.IntVar(&o.kills, "kills", 6, "node kills during the run (each node is restarted after)")
	fs.IntVar(&o.batch, "batch", 100, "records per publish")
	if err := fs.Parse(args); err != nil {
		return err
	}
	_, err := streamRun(ctx, fx, o, out)
	return err
}

func streamRun(ctx context.Context, fx fixture, o streamOptions, out io.Writer) (streamReport, error) {
	var rep streamReport
	topic := client.Topic{TenantID: fx.TenantID, Namespace: fx.Namespace, Stream: o.stream}
	pub, err := client.Dial(ctx, fx.config())
	if err != nil {
		return rep, err
	}
	defer pub.Close()
	subc, err := client.Dial(ctx, fx.config())
	if err != nil {
		return rep, err
	}
	defer subc.Close()

	view, err := pub.StreamShards(ctx, topic)
	if err != nil {
		return rep, err
	}
	shards, routing := view.Shards, view.Routing.V
	if shards < 2 {
		return rep, fmt.Errorf("stream %s has %d shard(s): declare it with several (-stream %s/%s/%s:durable:shards=6)",
			o.stream, shards, fx.TenantID, fx.Namespace, o.stream)
	}
	rep.perShard = make([]int, shards)
	sub, err := subc.SubscribeSharded(ctx, topic, client.ShardedOptions{Start: client.Earliest})
	if err != nil {
		return rep, err
	}
	defer sub.Close()

	// The consumer: every record is "<run>:<id>"; ids of one shard arrive
	// in increasing order (one publisher, one key per batch). Records of
	// earlier runs on a long-lived cluster are passed over.
	run := strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
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
			rest, ours := strings.CutPrefix(string(ev.Payload), run)
			if !ours {
				continue
			}
			id, perr := strconv.Atoi(rest)
			if perr != nil {
				subErr <- fmt.Errorf("shard %d offset %d: payload %q", ev.Shard, ev.Offset, ev.Payload)
				return
			}
			select {
			case events <- seen{ev.Shard, id}:
			case <-ctx.Done():
				return
			}
		}
		subErr <- errors.New("subscription ended")
	}()

	// The publisher: batches of o.batch records, one key per batch (so one
	// shard per batch), a node killed every records/(kills+1) records and
	// restarted one batch later. An ambiguous batch (the connection died
	// with it in flight) is not counted as acknowledged; its ids are
	// published again under new ids, so exactly o.records are acked.
	nodes := len(fx.Addrs)
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
			payloads[i] = []byte(run + strconv.Itoa(id+i))
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
			if err := fx.control(ctx, "/restart", fmt.Sprintf(`{"node": %d}`, killed)); err != nil {
				return rep, err
			}
			killed = -1
		}
		if rep.kills < o.kills && rep.acked >= nextKill {
			killed = rep.kills % nodes
			if err := fx.control(ctx, "/kill", fmt.Sprintf(`{"node": %d}`, killed)); err != nil {
				return rep, err
			}
			rep.kills++
			nextKill += every
			fmt.Fprintf(out, "killed node %d after %d acked records\n", killed, rep.acked)
		}
	}
	if killed >= 0 {
		if err := fx.control(ctx, "/restart", fmt.Sprintf(`{"node": %d}`, killed)); err != nil {
			return rep, err
		}
	}

	// Count until every acknowledged record arrived.
	got := map[int]bool{}
	last := make([]int, shards)
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
