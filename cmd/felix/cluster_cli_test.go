package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
)

// The group, state and inspect verbs against the reference cluster,
// pointed at a node that does not lead the shard: they follow not_leader
// to the leader.
func TestVerbsAgainstTheCluster(t *testing.T) {
	cl, err := cluster.Start(context.Background(), cluster.Config{Nodes: 3})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cl.Close()) })
	jobs := engine.Topic{Tenant: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Stream: "jobs"}
	require.NoError(t, cl.Engine().CreateStream(jobs, engine.StreamConfig{Durable: true, Shards: 1}))
	leader, _ := cl.Owner("jobs", 0)
	follower := (leader + 1) % cl.Nodes()
	b := []string{"-addr", cl.Addr(follower), "-cert", cl.CAFile(), "-namespace", cluster.DefaultNamespace}

	ok(t, cmd([]string{"pub"}, b, "jobs", "a", "b")...)
	g := func(op string, rest ...string) []string { return cmd([]string{"group", op}, b, rest...) }
	require.Equal(t, "0\t1\ta\n1\t1\tb\n", ok(t, g("poll", "jobs", "w")...))
	require.Equal(t, "acked 0\n", ok(t, g("ack", "jobs", "w", "0")...))
	require.Equal(t, "nacked 1\n", ok(t, g("nack", "jobs", "w", "1")...))
	require.Equal(t, "committed 1 tail 2 in_flight 0 owed 1 dead_letters 0\n", ok(t, g("describe", "jobs", "w")...))

	// state get: a commit made through the leader, read through a follower.
	c, err := conn.Dial(context.Background(), cl.Addr(leader), &conn.Config{TLS: cl.TLS(), TenantID: cluster.DefaultTenant, Token: cluster.DefaultToken})
	require.NoError(t, err)
	defer c.Close()
	off, err := api.New(c).Commit(context.Background(), api.CommitRequest{Topic: felix.Topic{TenantID: jobs.Tenant, Namespace: jobs.Namespace, Stream: jobs.Stream},
		EntityKey: []byte("acct"), Ops: []api.CommitOp{api.PublishEvent("", []byte("opened")), api.PutState("", "balance", []byte("10"))}})
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("10\t(version %d, as of %d)\n", off, off), ok(t, cmd([]string{"state", "get"}, b, "jobs", "acct", "balance")...))

	// inspect: cluster calls, shard-level reads via the leader, and the
	// operator token's views.
	i := func(op string, rest ...string) []string { return cmd([]string{"inspect", op}, b, rest...) }
	require.Len(t, strings.Split(strings.TrimSpace(ok(t, i("topology")...)), "\n"), 3)
	owners := ok(t, i("owners", "jobs")...)
	require.Contains(t, owners, cl.NodeID(leader))
	require.Contains(t, owners, cl.Addr(leader))
	require.Equal(t, "1\tb\n2\topened\n", ok(t, append([]string{"inspect", "read", "-from", "1"}, append(b, "jobs")...)...))
	require.Equal(t, "1\tmodulo\n", ok(t, i("shards", "jobs")...))
	require.Equal(t, "0\tmodulo\n", ok(t, i("shards", cluster.MissingStream)...))
	insp := func(op string, rest ...string) []string {
		return cmd([]string{"inspect", op, "-token", cluster.InspectToken}, b, rest...)
	}
	require.Equal(t, fmt.Sprintf("node %q shards 1 role none phase unassigned serving false\n", cl.NodeID(follower)),
		ok(t, insp("shard", "jobs", "0")...), "shard_inspect is this broker's view, never forwarded")
	require.Equal(t, "", ok(t, insp("subs")...))
}
