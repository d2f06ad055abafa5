package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

// opsToken is granted node.view:cluster:* (and nothing else) by
// startRefBroker.
const opsToken = "ops-token"

// startRefBroker is startTestBroker returning the server too, with streams
// of shards shards and the operator token opsToken.
func startRefBroker(t *testing.T, shards uint32) (*server.Server, []string) {
	t.Helper()
	return listenTestBroker(t, server.Config{
		Engine: engine.Config{DefaultStream: engine.StreamConfig{Durable: true, Shards: shards}},
		Tokens: map[string]server.Identity{server.DemoToken: {Tenant: server.DemoTenant, Principal: server.DemoTenant},
			opsToken: {Tenant: server.DemoTenant, Principal: "ops", Deny: server.PermAll, Grant: server.PermNodeView}}})
}

func ok(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errb := felixRun(t, "", args...)
	require.Equal(t, 0, code, "%v: %s", args, errb)
	return out
}

func TestGroupCLI(t *testing.T) {
	_, b := startRefBroker(t, 1)
	ok(t, cmd([]string{"pub"}, b, "jobs", "a", "b")...)
	g := func(op string, rest ...string) []string { return cmd([]string{"group", op}, b, rest...) }

	require.Equal(t, "0\t1\ta\n1\t1\tb\n", ok(t, g("poll", "jobs", "w")...))
	require.Equal(t, "", ok(t, g("poll", "jobs", "w")...), "everything claimed: an empty answer")
	require.Equal(t, "acked 0\n", ok(t, g("ack", "jobs", "w", "0")...))
	require.Equal(t, "nacked 1\n", ok(t, g("nack", "jobs", "w", "1")...))
	require.Equal(t, "1\t2\tb\n", ok(t, append([]string{"group", "poll", "-n", "5"}, append(b, "jobs", "w")...)...))
	require.Equal(t, "claim on 1 extended by 1m0s\n", ok(t, append([]string{"group", "extend", "-by", "1m", "-attempts", "2"}, append(b, "jobs", "w", "1")...)...))
	require.Equal(t, "dead-lettered 1\n", ok(t, g("dead", "jobs", "w", "1")...))
	require.Equal(t, "1\n", ok(t, g("dead", "jobs", "w")...))
	require.Equal(t, "redriven 1\n", ok(t, g("redrive", "jobs", "w", "1")...))
	out := ok(t, append([]string{"group", "poll", "-json"}, append(b, "jobs", "w")...)...)
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	require.Equal(t, map[string]any{"op": "record", "offset": float64(1), "attempts": float64(1), "value": "b"}, rec)
	ok(t, g("dead", "jobs", "w", "1")...)
	require.Equal(t, "discarded 1\n", ok(t, g("discard", "jobs", "w", "1")...))
	require.Equal(t, "committed 2 tail 2 in_flight 0 owed 0 dead_letters 0\n", ok(t, g("describe", "jobs", "w")...))
	require.Equal(t, "group w at 0\n", ok(t, g("seek", "jobs", "w", "earliest")...))
	require.Equal(t, "group w at 0 (exists; not moved)\n", ok(t, append([]string{"group", "seek", "-if-new"}, append(b, "jobs", "w", "latest")...)...))
	require.Equal(t, "deleted group w\n", ok(t, g("delete", "jobs", "w")...))
	require.Equal(t, "group w did not exist\n", ok(t, g("delete", "jobs", "w")...))

	// A refusal is one line naming the broker's code, exit status 1.
	code, _, errb := felixRun(t, "", g("ack", "jobs", "w", "0")...)
	require.Equal(t, 1, code)
	oneErrLine(t, errb)
	require.Contains(t, errb, "stale_claim")
	// Usage errors: exit status 2.
	for _, args := range [][]string{{"group"}, {"group", "frob", "s", "g"}, g("ack", "jobs", "w"), g("ack", "jobs", "w", "x"), g("seek", "jobs", "w", "soon")} {
		code, _, errb := felixRun(t, "", args...)
		require.Equal(t, 2, code, "%v", args)
		oneErrLine(t, errb)
	}
	out = ok(t, "group", "nack", "-h")
	require.Contains(t, out, "-delay")
	require.Contains(t, out, "usage: felix group nack")
}

func TestStateGetCLI(t *testing.T) {
	srv, b := startRefBroker(t, 4)
	ctx := context.Background()
	c, err := conn.Dial(ctx, srv.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: srv.CertPool()},
		TenantID: server.DemoTenant, Token: server.DemoToken})
	require.NoError(t, err)
	defer c.Close()
	off, err := api.New(c).Commit(ctx, api.CommitRequest{Topic: felix.Topic{TenantID: server.DemoTenant, Namespace: "default", Stream: "accounts"},
		EntityKey: []byte("acct-1"), Ops: []api.CommitOp{api.PublishEvent("", []byte("opened")), api.PutState("", "balance", []byte("10"))}})
	require.NoError(t, err)

	require.Equal(t, "10\t(version 0, as of 0)\n", ok(t, cmd([]string{"state", "get"}, b, "accounts", "acct-1", "balance")...))
	require.Zero(t, off)
	out := ok(t, cmd([]string{"state", "get"}, b, "-json", "accounts", "acct-1", "balance")...)
	require.JSONEq(t, `{"entity":"acct-1","key":"balance","found":true,"value":"10","version":0,"as_of":0}`, out)
	code, out, errb := felixRun(t, "", cmd([]string{"state", "get"}, b, "accounts", "acct-1", "missing")...)
	require.Equal(t, exitAbsent, code)
	require.Empty(t, out)
	oneErrLine(t, errb)
	code, _, _ = felixRun(t, "", "state", "put", "s", "e", "k")
	require.Equal(t, 2, code)
	require.Contains(t, ok(t, "state", "-h"), "-addr")
}

func TestInspectCLI(t *testing.T) {
	_, b := startRefBroker(t, 3)
	ok(t, cmd([]string{"pub"}, b, "orders", "a", "b")...)
	i := func(op string, rest ...string) []string { return cmd([]string{"inspect", op}, b, rest...) }
	require.Equal(t, "3\tmodulo\n", ok(t, i("shards", "orders")...))
	require.Equal(t, "1\n", ok(t, i("cache-shards", "c")...))
	require.Equal(t, "0\ta\n1\tb\n", ok(t, i("read", "orders")...))
	require.Equal(t, "1\tb\n", ok(t, append([]string{"inspect", "read", "-from", "1"}, append(b, "orders")...)...))
	require.Equal(t, "0\n", ok(t, i("time", "orders", "2000-01-01T00:00:00Z")...))
	require.Equal(t, "no record that recent\n", ok(t, i("time", "orders", "2999-01-01T00:00:00Z")...))

	// What a standalone broker does not advertise: one line, exit 1.
	for _, args := range [][]string{i("topology"), i("owners", "orders")} {
		code, _, errb := felixRun(t, "", args...)
		require.Equal(t, 1, code, "%v", args)
		oneErrLine(t, errb)
		require.True(t, strings.Contains(errb, "not advertised"), errb)
	}
	// Shard inspection and subscription listing: the operator token only.
	for _, args := range [][]string{i("shard", "orders", "0"), i("subs")} {
		code, _, errb := felixRun(t, "", args...)
		require.Equal(t, 1, code, "%v", args)
		oneErrLine(t, errb)
		require.Contains(t, errb, "forbidden")
	}
	ops := func(op string, rest ...string) []string {
		return cmd([]string{"inspect", op, "-token", opsToken}, b, rest...)
	}
	require.Equal(t, "node \"\" shards 3 role leader phase active serving true\n", ok(t, ops("shard", "orders", "0")...))
	require.Equal(t, "", ok(t, ops("subs")...), "nobody subscribes")
	for _, args := range [][]string{{"inspect"}, {"inspect", "frob"}, i("time", "orders", "yesterday"), i("shard", "orders", "x"), i("shards")} {
		code, _, errb := felixRun(t, "", args...)
		require.Equal(t, 2, code, "%v", args)
		oneErrLine(t, errb)
	}
}
