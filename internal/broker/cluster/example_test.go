package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
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
	res, err := cl.Publish(ctx, felix.Topic{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.MovableStream},
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

// Serve the control endpoint and drive it as a suite does, with the
// fixture's control_token: a request without it is refused.
func ExampleCluster_ServeControl() {
	ctx := context.Background()
	c, err := cluster.Start(ctx, cluster.Config{Nodes: 3})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.ServeControl("127.0.0.1:0"); err != nil {
		panic(err)
	}
	f := c.Fixture() // names control_url and control_token
	code, _, err := f.Control(ctx, http.MethodPost, "/kill", []byte(`{"node": 1}`))
	if err != nil {
		panic(err)
	}
	fmt.Println("kill:", code)
	code, answer, err := f.Control(ctx, http.MethodGet, "/state", nil)
	if err != nil {
		panic(err)
	}
	var st cluster.State
	if err := json.Unmarshal(answer, &st); err != nil {
		panic(err)
	}
	fmt.Println("state:", code, st.Nodes[0].Alive, st.Nodes[1].Alive, st.Nodes[2].Alive)
	anon := f
	anon.ControlToken = ""
	code, _, err = anon.Control(ctx, http.MethodPost, "/restart", []byte(`{"node": 1}`))
	if err != nil {
		panic(err)
	}
	fmt.Println("without the token:", code, c.Alive(1))
	// Output:
	// kill: 200
	// state: 200 true false true
	// without the token: 401 false
}
