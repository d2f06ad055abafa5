package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
)

func init() {
	register(command{
		name:    "inspect",
		usage:   "inspect OP [FLAGS] [ARGS]",
		summary: "ask a broker: shards, cache-shards, owners, topology, time, read, shard, subs",
		run:     runInspect,
		help:    inspectHelp,
	})
	for _, op := range inspectOps {
		subUsage["inspect "+op.name] = op.usage
	}
}

var inspectOps = []struct{ name, usage string }{
	{"shards", "inspect shards [FLAGS] STREAM          shard count and routing of a stream (0 = unknown)"},
	{"cache-shards", "inspect cache-shards [FLAGS] CACHE    shard count of a cache (0 = unknown)"},
	{"owners", "inspect owners [FLAGS] NAME            owner of every shard of a stream (-cache: of a cache)"},
	{"topology", "inspect topology [FLAGS]              the cluster's brokers"},
	{"time", "inspect time [FLAGS] STREAM TIME       first offset at or after TIME (RFC 3339)"},
	{"read", "inspect read [FLAGS] STREAM            read records without subscribing (-from, -n)"},
	{"shard", "inspect shard [FLAGS] NAME SHARD       a broker's view of one shard (-cache for a cache)"},
	{"subs", "inspect subs [FLAGS]                  list subscriptions (-stream to filter)"},
}

type inspectOpts struct {
	cf     clientFlags
	cache  *bool
	shard  *uint
	from   *uint64
	n      *uint
	stream *string
	args   int
}

func inspectFlagSet(op string) (*flag.FlagSet, *inspectOpts, error) {
	fs := newFlagSet("inspect " + op)
	o := &inspectOpts{}
	o.cf.register(fs)
	switch op {
	case "shards", "cache-shards":
		o.args = 1
	case "owners":
		o.args = 1
		o.cache = fs.Bool("cache", false, "NAME is a cache")
	case "topology":
	case "time":
		o.args = 2
		o.shard = fs.Uint("shard", 0, "shard of the stream")
	case "read":
		o.args = 1
		o.shard = fs.Uint("shard", 0, "shard of the stream")
		o.from = fs.Uint64("from", 0, "first offset to read")
		o.n = fs.Uint("n", 100, "most records to read")
	case "shard":
		o.args = 2
		o.cache = fs.Bool("cache", false, "NAME is a cache")
	case "subs":
		o.stream = fs.String("stream", "", "only this stream's subscriptions")
		o.n = fs.Uint("n", 100, "most subscriptions per page")
	default:
		return nil, nil, usagef("unknown inspect operation %q (want shards, cache-shards, owners, topology, time, read, shard or subs)", op)
	}
	return fs, o, nil
}

func inspectHelp(ctx context.Context, w io.Writer) {
	for i, op := range inspectOps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fs, _, _ := inspectFlagSet(op.name)
		fmt.Fprintf(w, "usage: felix %s\n", op.usage)
		printFlags(w, fs)
	}
}

func runInspect(ctx context.Context, args []string, _ io.Reader, stdout, _ io.Writer) error {
	if len(args) == 0 {
		return usagef("missing operation: shards, cache-shards, owners, topology, time, read, shard or subs")
	}
	op := args[0]
	if op == "-h" || op == "-help" || op == "--help" {
		inspectHelp(ctx, stdout)
		return nil
	}
	fs, o, err := inspectFlagSet(op)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != o.args {
		return usagef("inspect %s wants %d argument(s), got %d", op, o.args, fs.NArg())
	}
	cf := &o.cf
	kind := felix.ShardKindStream
	if o.cache != nil && *o.cache {
		kind = felix.ShardKindCache
	}
	var at time.Time
	if op == "time" {
		if at, err = time.Parse(time.RFC3339Nano, fs.Arg(1)); err != nil {
			return usagef("bad TIME %q: want RFC 3339, e.g. 2026-01-02T15:04:05Z", fs.Arg(1))
		}
	}
	var shardArg uint32
	if op == "shard" {
		n, err := strconv.ParseUint(fs.Arg(1), 10, 32)
		if err != nil {
			return usagef("bad SHARD %q", fs.Arg(1))
		}
		shardArg = uint32(n)
	}
	if o.shard != nil && *o.shard > 1<<32-1 {
		return usagef("-shard %d is out of range", *o.shard)
	}
	return cf.withClient(ctx, func(c *client.Client) error {
		rctx, cancel := cf.timeoutCtx(ctx)
		defer cancel()
		switch op {
		case "shards":
			v, err := c.StreamShards(rctx, topicOf(cf, fs.Arg(0)))
			if err != nil {
				return cf.explain(op, err)
			}
			shards, routing := v.Shards, v.Routing.V // absent routing is modulo, the zero value
			return cf.emit(stdout, map[string]any{"stream": fs.Arg(0), "shards": shards, "routing": routing.String()},
				fmt.Sprintf("%d\t%s", shards, routing))
		case "cache-shards":
			n, err := c.CacheShards(rctx, client.CacheRef{TenantID: cf.tenant, Namespace: cf.namespace, Cache: fs.Arg(0)})
			if err != nil {
				return cf.explain(op, err)
			}
			return cf.emit(stdout, map[string]any{"cache": fs.Arg(0), "shards": n}, strconv.FormatUint(uint64(n), 10))
		case "owners":
			owners, err := c.ShardOwners(rctx, cf.tenant, cf.namespace, fs.Arg(0), kind)
			if err != nil {
				return cf.explain(op, err)
			}
			var lines []string
			for _, ow := range owners {
				text := fmt.Sprintf("%d\t%s\t%s\tgeneration %d", ow.Shard, ow.NodeID.V, ow.Addr.V, ow.Generation)
				if ow.Unavailable.Set {
					text += "\tunavailable: " + ow.Unavailable.V
				}
				lines = append(lines, text)
			}
			return emitWire(cf, stdout, &felix.ShardOwnersView{Owners: owners}, lines)
		case "topology":
			brokers, err := c.Topology(rctx)
			if err != nil {
				return cf.explain(op, err)
			}
			var lines []string
			for _, b := range brokers {
				lines = append(lines, b.NodeID+"\t"+b.Addr)
			}
			return emitWire(cf, stdout, &felix.TopologyView{Brokers: brokers}, lines)
		case "time":
			off, found, err := c.OffsetForTime(rctx, topicOf(cf, fs.Arg(0)), uint32(*o.shard), at)
			if err != nil {
				return cf.explain(op, err)
			}
			if !found {
				return cf.emit(stdout, map[string]any{"found": false}, "no record that recent")
			}
			return cf.emit(stdout, map[string]any{"found": true, "offset": off}, strconv.FormatUint(off, 10))
		case "read":
			page, err := c.StreamRead(rctx, topicOf(cf, fs.Arg(0)), uint32(*o.shard),
				api.ReadOptions{From: *o.from, MaxRecords: uint32(min(*o.n, 1<<32-1))})
			if err != nil {
				return cf.explain(op, err)
			}
			for _, r := range page.Records {
				off := r.Offset
				rec := groupRecord{Op: "record", Offset: &off}
				rec.Value, rec.ValueB64 = payloadFields(r.Payload)
				if err := cf.emit(stdout, rec, fmt.Sprintf("%d\t%s", r.Offset, printable(r.Payload))); err != nil {
					return err
				}
			}
			return nil
		case "shard":
			// This broker's own view: never forwarded nor redirected.
			v, err := api.New(c.At(cf.addr)).ShardInspect(rctx, cf.tenant, cf.namespace, fs.Arg(0), kind, shardArg)
			if err != nil {
				return cf.explain(op, err)
			}
			return emitWire(cf, stdout, &felix.ShardInspectInfo{View: v},
				[]string{fmt.Sprintf("node %q shards %d role %s phase %s serving %v", v.NodeID, v.Shards, v.Role, v.Phase, v.Serving)})
		}
		// subs
		filter := felix.SubscriptionsFilter{}
		if *o.stream != "" {
			filter.Stream = felix.Some(*o.stream)
		}
		var cursor *felix.SubscriptionsCursor
		for {
			page, err := api.New(c.At(cf.addr)).Subscriptions(rctx, filter, uint32(min(*o.n, 1<<32-1)), cursor)
			if err != nil {
				return cf.explain(op, err)
			}
			var lines []string
			for _, s := range page.Subscriptions {
				lines = append(lines, fmt.Sprintf("%s/%s/%s\tshard %d\tsubscriber %d\tdepth %d/%d\tdropped %d", s.TenantID, s.Namespace,
					s.Stream, s.Shard, s.SubscriberID, s.Depth, s.Capacity, s.Dropped))
			}
			if err := emitWire(cf, stdout, &felix.SubscriptionsListInfo{NodeID: page.NodeID, Subscriptions: page.Subscriptions}, lines); err != nil {
				return err
			}
			if cursor = page.Next; cursor == nil {
				return nil
			}
		}
	})
}

// emitWire prints the broker's answer m as its wire JSON on one line
// (-json), or the text lines.
func emitWire(cf *clientFlags, w io.Writer, m felix.Message, lines []string) error {
	if cf.jsonOut {
		b, err := felix.AppendMessage(nil, m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	return nil
}
