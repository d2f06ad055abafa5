package main

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

func init() {
	register(command{
		name:    "cache",
		usage:   "cache get|put|del|watch [CLIENT FLAGS] CACHE KEY [VALUE]",
		summary: "read, write, delete or watch broker cache entries",
		run:     runCache,
	})
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

func runCache(ctx context.Context, args []string, _ io.Reader, stdout, _ io.Writer) error {
	if len(args) == 0 {
		return usagef("missing get, put, del or watch")
	}
	op := args[0]
	fs := newFlagSet("cache " + op)
	var cf clientFlags
	cf.register(fs)
	var ttl *time.Duration
	var prefix, retained *bool
	var from *string
	var count *int
	switch op {
	case "get", "del":
	case "put":
		ttl = fs.Duration("ttl", 0, "time to live (0 = no expiry)")
	case "watch":
		prefix = fs.Bool("prefix", false, "watch every key starting with KEY")
		from = fs.String("from", "", "resume from this cache-log offset")
		retained = fs.Bool("retained", false, "first print the current values")
		count = fs.Int("n", 0, "exit after COUNT events (0 = until interrupted)")
	default:
		return usagef("unknown cache operation %q (want get, put, del or watch)", op)
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	want := 2
	if op == "put" {
		want = 3
	}
	if fs.NArg() != want {
		return usagef("cache %s wants %d arguments, got %d", op, want, fs.NArg())
	}
	ref := conn.CacheRef{TenantID: cf.tenant, Namespace: cf.namespace, Cache: fs.Arg(0)}
	key := fs.Arg(1)
	c, err := cf.dial(ctx, 0)
	if err != nil {
		return err
	}
	defer c.Close()
	rctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	switch op {
	case "put":
		if err := c.CachePut(rctx, ref, key, []byte(fs.Arg(2)), *ttl); err != nil {
			return err
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
			return err
		}
		rec := cacheRecord{Op: op, Key: key, Found: &found}
		text := "(not found)"
		if found {
			rec.Value, rec.ValueB64 = payloadFields(v)
			text = printable(v)
			if op == "del" {
				text = "deleted " + key + ": " + text
			}
		}
		if err := cf.emit(stdout, rec, text); err != nil {
			return err
		}
		if !found {
			return exitCode(1) // a miss: status 1, like grep
		}
		return nil
	}
	// watch
	o := conn.WatchOptions{Retained: *retained}
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
		return err
	}
	defer w.Close()
	for n := 0; *count == 0 || n < *count; n++ {
		ev, err := w.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return err
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
