package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/flxproto/felix/client"
)

func init() {
	register(command{
		name:    "state",
		usage:   "state get [FLAGS] STREAM ENTITY KEY",
		summary: "read a commit state key of an entity (absent key: exit status 3)",
		run:     runState,
	})
}

// stateRecord is the -json form of state get.
type stateRecord struct {
	Entity   string  `json:"entity"`
	Key      string  `json:"key"`
	Found    bool    `json:"found"`
	Value    *string `json:"value,omitempty"`
	ValueB64 *string `json:"value_b64,omitempty"`
	Version  *uint64 `json:"version,omitempty"`
	AsOf     *uint64 `json:"as_of,omitempty"`
}

func runState(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "get" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fs := newFlagSet("state get")
			var cf clientFlags
			cf.register(fs)
			return helpRequest{fs}
		}
		return usagef("want \"state get [FLAGS] STREAM ENTITY KEY\"")
	}
	fs := newFlagSet("state get")
	var cf clientFlags
	cf.register(fs)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 3 {
		return usagef("state get wants STREAM ENTITY KEY, got %d argument(s)", fs.NArg())
	}
	stream, entity, key := fs.Arg(0), fs.Arg(1), fs.Arg(2)
	if err := checkName("STREAM", stream); err != nil {
		return err
	}
	return cf.withClient(ctx, func(c *client.Client) error {
		rctx, cancel := cf.timeoutCtx(ctx)
		defer cancel()
		v, err := c.StateGet(rctx, topicOf(&cf, stream), []byte(entity), key)
		if err != nil {
			return cf.explain("state get "+key, err)
		}
		if !v.Found {
			fmt.Fprintf(stderr, "felix state get: key %q of entity %q is absent from stream %s\n", key, entity, stream)
			return exitCode(exitAbsent)
		}
		rec := stateRecord{Entity: entity, Key: key, Found: true}
		rec.Value, rec.ValueB64 = payloadFields(v.Value)
		text := printable(v.Value) + "\t(version " + strconv.FormatUint(v.Version, 10)
		if v.HasVersion {
			rec.Version = &v.Version
		}
		if v.HasAsOf {
			rec.AsOf = &v.AsOf
			text += ", as of " + strconv.FormatUint(v.AsOf, 10)
		}
		return cf.emit(stdout, rec, text+")")
	})
}

// topicOf names stream in the flags' tenant and namespace.
func topicOf(cf *clientFlags, stream string) client.Topic {
	return client.Topic{TenantID: cf.tenant, Namespace: cf.namespace, Stream: stream}
}
