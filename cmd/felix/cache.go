package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
)

func init() {
	register(command{
		name:    "cache",
		usage:   "cache get|put|del|watch [FLAGS] CACHE KEY [VALUE]",
		summary: "read, write, delete or watch broker cache entries",
		run:     runCache,
		help:    cacheHelp,
	})
}

// cacheOps are the cache operations in help order.
var cacheOps = []string{"get", "put", "del", "watch"}

// subUsage is the synopsis of each sub-operation, for -h.
var subUsage = map[string]string{
	"cache get":   "cache get [FLAGS] CACHE KEY      (absent key: nothing on stdout, exit status 3)",
	"cache put":   "cache put [FLAGS] CACHE KEY VALUE",
	"cache del":   "cache del [FLAGS] CACHE KEY      (prints the removed value; absent key: exit status 3)",
	"cache watch": "cache watch [FLAGS] CACHE KEY   (KEY is a prefix with -prefix)",
}

// exitAbsent is the exit status of cache get/del for an absent key:
// distinct from 1 (an error) so scripts can tell a miss from a failure.
const exitAbsent = 3

// cacheHelp prints every cache operation with its flags, then the
// environment the operations read, once.
func cacheHelp(ctx context.Context, w io.Writer) {
	defer printEnv(w)
	for i, op := range cacheOps {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fs, _, err := cacheFlagSet(op)
		if err != nil {
			continue
		}
		fmt.Fprintf(w, "usage: felix %s\n", subUsage["cache "+op])
		printFlagList(w, fs)
	}
}

// cacheOpts are the operation-specific cache flags.
type cacheOpts struct {
	cf               clientFlags
	ttl              *time.Duration
	prefix, retained *bool
	from             *string
	count            *int
}

// cacheFlagSet returns the flag set of one cache operation.
func cacheFlagSet(op string) (*flag.FlagSet, *cacheOpts, error) {
	fs := newFlagSet("cache " + op)
	o := &cacheOpts{}
	o.cf.register(fs)
	switch op {
	case "get", "del":
	case "put":
		o.ttl = fs.Duration("ttl", 0, "time to live (0 = no expiry)")
	case "watch":
		o.prefix = fs.Bool("prefix", false, "watch every key starting with KEY")
		o.from = fs.String("from", "", "resume from this cache-log offset (default: live changes only)")
		o.retained = fs.Bool("retained", false, "first print the current values, then live changes")
		o.count = fs.Int("n", 0, "exit after COUNT events (0 = until interrupted)")
	default:
		return nil, nil, usagef("unknown cache operation %q (want get, put, del or watch)", op)
	}
	return fs, o, nil
}

// cacheRecord is the -json form of a cache result or watch event.
type cacheRecord struct {
	Op        string  `json:"op"`
	Key       string  `json:"key"`
	Found     *bool   `json:"found,omitempty"`
	Value     *string `json:"value,omitempty"`
	ValueB64  *string `json:"value_b64,omitempty"`
	Offset    *uint64 `json:"offset,omitempty"`
	ExpiresAt string  `json:"expires_at,omitempty"`
}

func runCache(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("missing get, put, del or watch")
	}
	op := args[0]
	if op == "-h" || op == "-help" || op == "--help" {
		cacheHelp(ctx, stdout)
		return nil
	}
	fs, opts, err := cacheFlagSet(op)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	cf := &opts.cf
	ttl, prefix, retained, from, count := opts.ttl, opts.prefix, opts.retained, opts.from, opts.count
	want := 2
	if op == "put" {
		want = 3
	}
	if fs.NArg() != want {
		return usagef("cache %s wants %d arguments, got %d", op, want, fs.NArg())
	}
	ref := client.CacheRef{TenantID: cf.tenant, Namespace: cf.namespace, Cache: fs.Arg(0)}
	key := fs.Arg(1)
	if err := checkName("CACHE", ref.Cache); err != nil {
		return err
	}
	c, err := cf.connect(ctx, 0)
	if err != nil {
		return err // connect explains its own errors
	}
	defer c.Close()
	rctx, cancel := cf.timeoutCtx(ctx)
	defer cancel()
	switch op {
	case "put":
		if err := c.CachePut(rctx, ref, key, []byte(fs.Arg(2)), *ttl); err != nil {
			return cf.explain("put "+key, err)
		}
		text := "stored " + key
		if *ttl > 0 {
			text += " (expires in " + ttl.String() + ")"
		}
		return cf.emit(stdout, cacheRecord{Op: "put", Key: key}, text)
	case "get", "del":
		var v []byte
		var found bool
		if op == "get" {
			v, found, err = c.CacheGet(rctx, ref, key)
		} else {
			v, found, err = c.CacheDelete(rctx, ref, key)
		}
		if err != nil {
			return cf.explain(op+" "+key, err)
		}
		if !found {
			// A miss prints nothing on stdout, so "v=$(felix cache get ...)"
			// never mistakes a message for a value; the status says it.
			fmt.Fprintf(stderr, "felix cache %s: key %q is absent from cache %s\n", op, key, fs.Arg(0))
			return exitCode(exitAbsent)
		}
		rec := cacheRecord{Op: op, Key: key, Found: &found}
		rec.Value, rec.ValueB64 = payloadFields(v)
		text := printable(v)
		if op == "del" {
			text = "deleted " + key + ": " + text
		}
		return cf.emit(stdout, rec, text)
	}
	// watch
	o := client.WatchOptions{Retained: *retained}
	if *prefix {
		o.Prefix = felix.Some(key)
	} else {
		o.Key = felix.Some(key)
	}
	if *from != "" {
		off, err := strconv.ParseUint(*from, 10, 64)
		if err != nil {
			return usagef("bad -from %q", *from)
		}
		o.FromOffset = felix.Some(off)
	}
	w, err := c.CacheWatch(rctx, ref, o)
	if err != nil {
		return cf.explain("watch", err)
	}
	defer w.Close()
	for n := 0; *count == 0 || n < *count; n++ {
		ev, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return interruptedf("%d event(s) printed", n)
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return cf.explain("watch", err)
		}
		off := ev.Offset
		rec := cacheRecord{Op: "put", Key: ev.Key, Offset: &off}
		text := strconv.FormatUint(off, 10) + "\t"
		if ev.Deleted {
			rec.Op = "delete"
			text += "delete " + ev.Key
		} else {
			rec.Value, rec.ValueB64 = payloadFields(ev.Value)
			text += "put " + ev.Key + " = " + printable(ev.Value)
			if !ev.ExpiresAt.IsZero() {
				rec.ExpiresAt = ev.ExpiresAt.UTC().Format(time.RFC3339Nano)
				text += " (expires " + rec.ExpiresAt + ")"
			}
		}
		if err := cf.emit(stdout, rec, text); err != nil {
			return err
		}
	}
	return nil
}
