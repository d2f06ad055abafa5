package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
)

func init() {
	register(command{
		name:    "sub",
		usage:   "sub [FLAGS] STREAM",
		summary: "subscribe to a broker stream and print its events",
		run:     runSub,
	})
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// eventRecord is the -json form of an event.
type eventRecord struct {
	Offset     *uint64 `json:"offset,omitempty"`
	Payload    *string `json:"payload,omitempty"`
	PayloadB64 *string `json:"payload_b64,omitempty"`
	Publisher  string  `json:"publisher,omitempty"`
	Timestamp  *uint64 `json:"timestamp_micros,omitempty"`
	Shard      *uint32 `json:"shard,omitempty"`
}

func payloadFields(b []byte) (text, b64s *string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := b64(b)
	return nil, &s
}

// runSub subscribes through a client.Subscription: when the event stream
// breaks, the client resubscribes once at the offset after the last event
// printed (no gap, no duplicate); when that fails too, subEnded reports
// why with the offset to resume from.
func runSub(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("sub")
	var cf clientFlags
	cf.register(fs)
	from := fs.String("from", "latest", "start: latest, earliest or an offset")
	count := fs.Int("n", 0, "exit after COUNT events (0 = until interrupted or the subscription ends)")
	shard := fs.String("shard", "", "shard to read: a number, or all (every shard of the stream, each in order;\n"+
		"lines then start with SHARD:OFFSET); default: what client.Subscribe reads")
	queue := fs.Uint("queue", 0, "broker-side queue capacity to ask for, in published batches (0 = broker default)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one STREAM")
	}
	var start felix.StartPosition
	switch *from {
	case "latest":
	case "earliest":
		start.Kind = felix.StartEarliest
	default:
		off, err := strconv.ParseUint(*from, 10, 64)
		if err != nil {
			return usagef("bad -from %q", *from)
		}
		start = felix.StartAt(off)
	}
	all := *shard == "all"
	var shardN uint32
	hasShard := false
	if *shard != "" && !all {
		n, err := strconv.ParseUint(*shard, 10, 32)
		if err != nil {
			return usagef("bad -shard %q: want a shard number or all", *shard)
		}
		shardN, hasShard = uint32(n), true
	}
	if all && start.Kind == felix.StartOffset {
		return usagef("-from %s with -shard all: offsets are per shard; use -from earliest or latest (or -shard N -from OFFSET)", *from)
	}
	if err := checkName("STREAM", fs.Arg(0)); err != nil {
		return err
	}
	c, err := cf.connect(ctx, felix.DefaultClientFlags()|felix.FlagEventBatchPublisher|felix.FlagEventBatchTimestamps)
	if err != nil {
		return err
	}
	defer c.Close()
	stream := fs.Arg(0)
	if all {
		return subAll(ctx, &cf, c, stream, start, *count, stdout, stderr)
	}
	o := client.SubscribeOptions{Start: start, QueueCapacity: uint32(*queue)}
	if hasShard {
		o.Shard = shardN
	}
	sctx, cancel := cf.timeoutCtx(ctx)
	sub, err := c.Subscribe(sctx, client.Topic{TenantID: cf.tenant, Namespace: cf.namespace, Stream: stream}, o)
	cancel()
	if err != nil {
		return cf.explain("subscribe to "+stream, err)
	}
	defer sub.Close()
	var next uint64 // offset after the last event printed
	hasNext := false
	for n := 0; *count == 0 || n < *count; n++ {
		ev, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return interruptedf("%d event(s) printed", n) // the subscriber chose to stop
			}
			return subEnded(&cf, stream, n, next, hasNext, err)
		}
		if ev.HasOffset {
			next, hasNext = ev.Offset+1, true
		}
		if err := printEvent(&cf, stdout, ev, nil); err != nil {
			return err
		}
	}
	return nil
}

// printEvent prints one event: "OFFSET\tPAYLOAD", or "SHARD:OFFSET\tPAYLOAD"
// when shard is set (-shard all); -json adds the member "shard".
func printEvent(cf *clientFlags, stdout io.Writer, ev client.Event, shard *uint32) error {
	rec := eventRecord{Publisher: string(ev.Publisher), Shard: shard}
	rec.Payload, rec.PayloadB64 = payloadFields(ev.Payload)
	text := ""
	if shard != nil {
		text = strconv.FormatUint(uint64(*shard), 10) + ":"
	}
	if ev.HasOffset {
		off := ev.Offset
		rec.Offset = &off
		text += strconv.FormatUint(off, 10)
	}
	if text != "" {
		text += "\t"
	}
	if ev.HasTimestamp {
		ts := ev.TimestampMicros
		rec.Timestamp = &ts
	}
	text += printable(ev.Payload)
	return cf.emit(stdout, rec, text)
}

// subAll reads every shard of stream (felix sub -shard all) through a
// client.ShardedSubscription: a shard that ends with an error is reported
// on stderr while the others go on; the command fails when every shard
// ended and one of them was lost.
func subAll(ctx context.Context, cf *clientFlags, c *client.Client, stream string, start felix.StartPosition, count int, stdout, stderr io.Writer) error {
	sctx, cancel := cf.timeoutCtx(ctx)
	ss, err := c.SubscribeSharded(sctx, client.Topic{TenantID: cf.tenant, Namespace: cf.namespace, Stream: stream}, client.ShardedOptions{Start: start})
	cancel()
	if errors.Is(err, client.ErrUnknownStream) {
		return fmt.Errorf("subscribe to every shard of %s: the broker at %s reports no shards for it (an unknown stream): publish to it first, or declare it on the broker (examples/broker -stream TENANT/NS/NAME:shards=N)", stream, cf.brokerAddr())
	}
	if err != nil {
		return cf.explain("subscribe to every shard of "+stream, err)
	}
	defer ss.Close()
	lost := 0
	for n := 0; count == 0 || n < count; {
		ev, err := ss.Next(ctx)
		var sl *client.ShardLostError
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return interruptedf("%d event(s) printed from %d shard(s)", n, ss.Shards())
		case errors.As(err, &sl):
			lost++
			fmt.Fprintf(stderr, "felix sub: shard %d of %s ended: %s; the other shards go on\n", sl.Shard, stream, oneLine(sl.Err.Error()))
			continue
		case errors.Is(err, io.EOF) && lost == 0:
			return nil
		case errors.Is(err, io.EOF):
			return fmt.Errorf("subscription to every shard of %s ended after %d event(s): %d of %d shard(s) lost (see above)", stream, n, lost, ss.Shards())
		default:
			return cf.explain("subscription to every shard of "+stream, err)
		}
		shard := ev.Shard
		if err := printEvent(cf, stdout, ev.Event, &shard); err != nil {
			return err
		}
		n++
	}
	return nil
}

// subEnded says why a subscription ended before the subscriber stopped it:
// the broker going away is a failure (exit status 1), with the offset to
// resume from when the events carried offsets.
func subEnded(cf *clientFlags, stream string, n int, next uint64, hasNext bool, err error) error {
	resume := ""
	if hasNext {
		resume = fmt.Sprintf("; resume with -from %d", next)
	}
	var be *felix.BrokerError
	switch {
	case errors.As(err, &be) && be.Code == felix.CodeDraining:
		// The client's one resume reached the broker while it drained.
		return fmt.Errorf("subscription to %s ended after %d event(s): the broker at %s is draining (shutting down)%s", stream, n, cf.brokerAddr(), resume)
	case errors.Is(err, io.EOF):
		return fmt.Errorf("subscription to %s ended by the broker at %s after %d event(s): it finished the event stream (shutting down or draining)%s", stream, cf.brokerAddr(), n, resume)
	case errors.Is(err, conn.ErrBrokerShutdown):
		return fmt.Errorf("subscription to %s ended after %d event(s): the broker at %s shut down%s", stream, n, cf.brokerAddr(), resume)
	}
	var (
		te *conn.TransportError
		de *conn.DialError
	)
	if errors.As(err, &te) || errors.As(err, &de) {
		// A dial error: the client's one resume found no broker there.
		return fmt.Errorf("subscription to %s ended after %d event(s): lost the connection to the broker at %s (%v)%s", stream, n, cf.brokerAddr(), err, resume)
	}
	return cf.explain(fmt.Sprintf("subscription to %s after %d event(s)", stream, n), err)
}
