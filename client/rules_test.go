package client_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn/conntest"
)

// Rules of routing, re-sending and the producer against scripted brokers
// (issue 34, round 2).

// keyedTo publishes one record with key and returns the node that got it.
func publishedTo(t *testing.T, cl *conntest.Cluster, before int) []conntest.Received {
	t.Helper()
	var out []conntest.Received
	for _, r := range cl.Received()[before:] {
		if r.Publish != nil {
			out = append(out, r)
		}
	}
	return out
}

// Once a stream's shard view is known, a keyed publish goes straight to
// the owner of its shard (no forward, no redirect) whichever broker the
// client treats as home, including a home moved by topology answers, for
// every routing (absent = modulo, modulo, jump_hash).
func TestRulesKeyedPublishFromAnyHome(t *testing.T) {
	const nodes, shards = 3, 5
	routings := []struct {
		name    string
		routing felix.Routing
	}{{"absent", felix.RoutingModulo}, {"jump_hash", felix.RoutingJumpHash}}
	for _, rt := range routings {
		for home := range nodes {
			for _, discover := range []bool{false, true} {
				for _, learn := range []string{"shard_owners", "publishes", "stream_shards only"} {
					t.Run(fmt.Sprint(rt.name, " home ", home, " topology ", discover, " ", learn), func(t *testing.T) {
						cl := conntest.Start(t, conntest.Options{Nodes: nodes})
						cl.SetShards("s", shards, rt.routing)
						for s := range uint32(shards) {
							cl.SetOwner("s", s, int(s+1)%nodes)
						}
						c, n := scriptedClient(t, cl, []string{cl.Nodes[home].Addr}, func(cfg *client.Config) { cfg.NoDiscovery = !discover })
						require.NoError(t, c.Connect(ctxT(t)))
						if discover {
							n.wait(t, client.NoticeDiscovered, nil)
						}
						_, err := c.StreamShards(ctxT(t), sTopic)
						require.NoError(t, err)
						if learn == "shard_owners" {
							_, err = c.ShardOwners(ctxT(t), sTopic.TenantID, sTopic.Namespace, sTopic.Stream, felix.ShardKindStream)
							require.NoError(t, err)
						} else {
							for s := range uint32(shards) {
								_, err := c.Publish(ctxT(t), sTopic, []byte("warm"), client.PublishOptions{Ack: felix.AckPerBatch, Key: keyFor(rt.routing, shards, s)})
								require.NoError(t, err)
							}
						}
						redirects := n.count(client.NoticeRedirect)
						before := len(cl.Received())
						for i := range 30 {
							key := []byte(fmt.Sprint("key-", i))
							_, err := c.Publish(ctxT(t), sTopic, []byte("v"), client.PublishOptions{Ack: felix.AckPerBatch, Key: key})
							require.NoError(t, err)
						}
						for _, r := range publishedTo(t, cl, before) {
							want := (int(rt.routing.ShardOf(r.Publish.Key, true, shards)) + 1) % nodes
							require.Equal(t, want, r.Node, "key %q went straight to the owner of its shard", r.Publish.Key)
						}
						require.Equal(t, redirects, n.count(client.NoticeRedirect), "no redirect")
					})
				}
			}
		}
	}
}
