package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
)

func init() {
	register(command{
		name:    "group",
		usage:   "group OP [FLAGS] STREAM GROUP [ARG]",
		summary: "consumer groups: poll, ack, nack, extend, dead, redrive, discard, seek, describe, delete",
		run:     runGroup,
		help:    groupHelp,
	})
	for _, op := range groupOps {
		subUsage["group "+op.name] = op.usage
	}
}

// groupOps are the group operations in help order, with their synopsis.
var groupOps = []struct{ name, usage string }{
	{"poll", "group poll [FLAGS] STREAM GROUP            claim up to -n records (prints offset, attempt, payload)"},
	{"ack", "group ack [FLAGS] STREAM GROUP OFFSET       settle a claimed record"},
	{"nack", "group nack [FLAGS] STREAM GROUP OFFSET      hand a claimed record back for redelivery"},
	{"extend", "group extend [FLAGS] STREAM GROUP OFFSET    keep a claim longer (-by, -attempts)"},
	{"dead", "group dead [FLAGS] STREAM GROUP [OFFSET]    list dead letters, or dead-letter a claimed OFFSET"},
	{"redrive", "group redrive [FLAGS] STREAM GROUP OFFSET   requeue a dead letter (attempts reset)"},
	{"discard", "group discard [FLAGS] STREAM GROUP OFFSET   drop a dead letter"},
	{"seek", "group seek [FLAGS] STREAM GROUP POSITION   move the cursor to earliest, latest or an offset"},
	{"describe", "group describe [FLAGS] STREAM GROUP        print the position and counts"},
	{"delete", "group delete [FLAGS] STREAM GROUP          remove the group"},
}

type groupOpts struct {
	cf                clientFlags
	shard             *uint
	max               *uint
	wait, vis, delay  *time.Duration
	by                *time.Duration
	attempts          *uint
	ifNew             *bool
	wantArgs, maxArgs int
	offsetArg, posArg bool
}

func groupFlagSet(op string) (*flag.FlagSet, *groupOpts, error) {
	fs := newFlagSet("group " + op)
	o := &groupOpts{wantArgs: 2, maxArgs: 2}
	o.cf.register(fs)
	o.shard = fs.Uint("shard", 0, "shard of the stream the group reads")
	switch op {
	case "poll":
		o.max = fs.Uint("n", 10, "most records to claim")
		o.wait = fs.Duration("wait", 0, "how long the broker may wait for a record (0 = answer at once)")
		o.vis = fs.Duration("visibility", 0, "claim time before redelivery (0 = the broker's default)")
	case "ack", "redrive", "discard":
		o.wantArgs, o.maxArgs, o.offsetArg = 3, 3, true
	case "nack":
		o.wantArgs, o.maxArgs, o.offsetArg = 3, 3, true
		o.delay = fs.Duration("delay", 0, "redeliver after this delay (0 = at once)")
		o.attempts = fs.Uint("attempts", 0, "the delivery being handed back (0 = whatever claim stands)")
	case "extend":
		o.wantArgs, o.maxArgs, o.offsetArg = 3, 3, true
		o.by = fs.Duration("by", 30*time.Second, "how much longer to keep the claim")
		o.attempts = fs.Uint("attempts", 1, "the delivery whose claim to extend (the poll's attempt count)")
	case "dead":
		o.maxArgs, o.offsetArg = 3, true
	case "seek":
		o.wantArgs, o.maxArgs, o.posArg = 3, 3, true
		o.ifNew = fs.Bool("if-new", false, "only place a group that does not exist yet")
	case "describe", "delete":
	default:
		return nil, nil, usagef("unknown group operation %q (want poll, ack, nack, extend, dead, redrive, discard, seek, describe or delete)", op)
	}
	return fs, o, nil
}

func groupHelp(ctx context.Context, w io.Writer) {
	for i, op := range groupOps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fs, _, _ := groupFlagSet(op.name)
		fmt.Fprintf(w, "usage: felix %s\n", op.usage)
		printFlags(w, fs)
	}
}

// groupRecord is the -json form of a group result.
type groupRecord struct {
	Op          string   `json:"op"`
	Offset      *uint64  `json:"offset,omitempty"`
	Attempts    uint32   `json:"attempts,omitempty"`
	Value       *string  `json:"value,omitempty"`
	ValueB64    *string  `json:"value_b64,omitempty"`
	Offsets     []uint64 `json:"offsets,omitempty"`
	VisibleMs   *int64   `json:"visible_ms,omitempty"`
	Moved       *bool    `json:"moved,omitempty"`
	Existed     *bool    `json:"existed,omitempty"`
	Committed   *uint64  `json:"committed,omitempty"`
	Tail        *uint64  `json:"tail,omitempty"`
	InFlight    *uint64  `json:"in_flight,omitempty"`
	Owed        *uint64  `json:"owed,omitempty"`
	DeadLetters *uint64  `json:"dead_letters,omitempty"`
}

// parseStart reads earliest, latest or an offset.
func parseStart(s string) (felix.StartPosition, error) {
	switch s {
	case "earliest":
		return felix.StartPosition{Kind: felix.StartEarliest}, nil
	case "latest":
		return felix.StartPosition{Kind: felix.StartLatest}, nil
	}
	off, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return felix.StartPosition{}, usagef("bad POSITION %q: want earliest, latest or an offset", s)
	}
	return felix.StartPosition{Kind: felix.StartOffset, Offset: off}, nil
}

func runGroup(ctx context.Context, args []string, _ io.Reader, stdout, _ io.Writer) error {
	if len(args) == 0 {
		return usagef("missing operation: poll, ack, nack, extend, dead, redrive, discard, seek, describe or delete")
	}
	op := args[0]
	if op == "-h" || op == "-help" || op == "--help" {
		groupHelp(ctx, stdout)
		return nil
	}
	fs, o, err := groupFlagSet(op)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if n := fs.NArg(); n < o.wantArgs || n > o.maxArgs {
		return usagef("group %s wants %s, got %d argument(s)", op, strings.Join(strings.Fields(groupUsage(op))[3:], " "), n)
	}
	cf := &o.cf
	if err := checkName("STREAM", fs.Arg(0)); err != nil {
		return err
	}
	if err := checkName("GROUP", fs.Arg(1)); err != nil {
		return err
	}
	var offset uint64
	hasOffset := o.offsetArg && fs.NArg() == 3
	if hasOffset {
		if offset, err = strconv.ParseUint(fs.Arg(2), 10, 64); err != nil {
			return usagef("bad OFFSET %q", fs.Arg(2))
		}
	}
	var start felix.StartPosition
	if o.posArg {
		if start, err = parseStart(fs.Arg(2)); err != nil {
			return err
		}
	}
	if *o.shard > 1<<32-1 {
		return usagef("-shard %d is out of range", *o.shard)
	}
	return cf.withClient(ctx, func(c *client.Client) error {
		rctx, cancel := context.WithTimeout(ctx, cf.timeout+pollWait(o))
		defer cancel()
		g := c.Group(api.GroupRef{Topic: client.Topic{TenantID: cf.tenant, Namespace: cf.namespace, Stream: fs.Arg(0)},
			Shard: uint32(*o.shard), Group: fs.Arg(1)})
		what := op + " " + fs.Arg(1)
		done := func(err error, text string) error {
			if err != nil {
				return cf.explain(what, err)
			}
			rec := groupRecord{Op: op}
			if hasOffset {
				rec.Offset = &offset
			}
			return cf.emit(stdout, rec, text)
		}
		switch op {
		case "poll":
			recs, err := g.Poll(rctx, api.PollOptions{Max: uint32(min(*o.max, 1<<32-1)), Wait: *o.wait, Visibility: *o.vis})
			if err != nil {
				return cf.explain(what, err)
			}
			for _, r := range recs {
				off := r.Offset
				rec := groupRecord{Op: "record", Offset: &off, Attempts: r.Attempts}
				rec.Value, rec.ValueB64 = payloadFields(r.Payload)
				text := fmt.Sprintf("%d\t%d\t%s", r.Offset, r.Attempts, printable(r.Payload))
				if err := cf.emit(stdout, rec, text); err != nil {
					return err
				}
			}
			return nil
		case "ack":
			return done(g.Ack(rctx, offset), fmt.Sprintf("acked %d", offset))
		case "nack":
			return done(g.Nack(rctx, offset, api.NackOptions{Delay: *o.delay, Attempts: uint32(min(*o.attempts, 1<<32-1))}),
				fmt.Sprintf("nacked %d", offset))
		case "extend":
			d, err := g.Extend(rctx, offset, uint32(min(*o.attempts, 1<<32-1)), *o.by)
			if err != nil {
				return cf.explain(what, err)
			}
			ms := d.Milliseconds()
			return cf.emit(stdout, groupRecord{Op: op, Offset: &offset, VisibleMs: &ms}, fmt.Sprintf("claim on %d extended by %s", offset, d))
		case "dead":
			if hasOffset {
				return done(g.DeadLetter(rctx, offset), fmt.Sprintf("dead-lettered %d", offset))
			}
			offs, err := g.DeadLetters(rctx)
			if err != nil {
				return cf.explain(what, err)
			}
			text := make([]string, len(offs))
			for i, o := range offs {
				text[i] = strconv.FormatUint(o, 10)
			}
			return cf.emit(stdout, groupRecord{Op: op, Offsets: append([]uint64{}, offs...)}, strings.Join(text, "\n"))
		case "redrive":
			return done(g.Redrive(rctx, offset), fmt.Sprintf("redriven %d", offset))
		case "discard":
			return done(g.Discard(rctx, offset), fmt.Sprintf("discarded %d", offset))
		case "seek":
			p, err := g.Seek(rctx, start, *o.ifNew)
			if err != nil {
				return cf.explain(what, err)
			}
			text := fmt.Sprintf("group %s at %d", fs.Arg(1), p.Offset)
			if !p.Moved {
				text += " (exists; not moved)"
			}
			return cf.emit(stdout, groupRecord{Op: op, Offset: &p.Offset, Moved: &p.Moved}, text)
		case "describe":
			info, err := g.Describe(rctx)
			if err != nil {
				return cf.explain(what, err)
			}
			rec := groupRecord{Op: op, Tail: &info.Tail, InFlight: &info.InFlight, Owed: &info.Owed, DeadLetters: &info.DeadLetters}
			committed := "none"
			if info.HasCommitted {
				rec.Committed = &info.Committed
				committed = strconv.FormatUint(info.Committed, 10)
			}
			return cf.emit(stdout, rec, fmt.Sprintf("committed %s tail %d in_flight %d owed %d dead_letters %d",
				committed, info.Tail, info.InFlight, info.Owed, info.DeadLetters))
		}
		existed, err := g.Delete(rctx)
		if err != nil {
			return cf.explain(what, err)
		}
		text := "deleted group " + fs.Arg(1)
		if !existed {
			text = "group " + fs.Arg(1) + " did not exist"
		}
		return cf.emit(stdout, groupRecord{Op: op, Existed: &existed}, text)
	})
}

// pollWait is the extra time a poll may take on the broker.
func pollWait(o *groupOpts) time.Duration {
	if o.wait != nil {
		return max(*o.wait, 0)
	}
	return 0
}

func groupUsage(op string) string {
	for _, g := range groupOps {
		if g.name == op {
			return strings.SplitN(g.usage, "  ", 2)[0]
		}
	}
	return ""
}
