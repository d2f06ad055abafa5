package cluster_test

import (
	"context"
	"fmt"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/examples/broker/cluster"
)

// Start a three-node cluster, publish through a node that does not own the
// shard (the publish is forwarded), and read the fixture a suite would get.
func Example() {
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Config{Nodes: 3})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	f := c.Fixture()
	owner, _ := c.Owner(f.MovableStream, 0)
	cl, err := conn.Dial(ctx, c.Addr((owner+1)%3), &conn.Config{TLS: c.TLS(), TenantID: f.TenantID, Token: f.Token})
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	res, err := cl.Publish(ctx, conn.Topic{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.MovableStream},
		[]byte("hello"), conn.PublishOptions{Ack: felix.AckPerMessage})
	if err != nil {
		panic(err)
	}
	fmt.Println("brokers:", len(f.Addrs), "offset:", res.Offset)
	fmt.Println("streams:", f.DurableStream, f.MovableStream, f.QuorumStream, f.LinkStream)
	// Output:
	// brokers: 3 offset: 0
	// streams: durable movable quorum link
}

// Kill a node: its shards move to the survivors.
func ExampleCluster_Kill() {
	c, err := cluster.Start(context.Background(), cluster.Config{Nodes: 3})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	before, gen := c.Owner(cluster.LinkStream, 0)
	if err := c.Kill(before); err != nil {
		panic(err)
	}
	after, gen2 := c.Owner(cluster.LinkStream, 0)
	fmt.Println(after != before, gen2 == gen+1, c.Alive(before))
	// Output: true true false
}
