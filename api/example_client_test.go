package api_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/flxproto/felix/internal/reftest"

	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
)

// The typed calls are methods of the client (generated from api.Calls),
// taking client's names for api's types: routed, redirected and retried
// by its decision table. api.New over c.At(addr) pins one broker. The
// README's api section is the middle of this code.
func Example_client() {
	addr, caFile, stop := reftest.ExampleBroker()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Seeds: []string{addr}, TenantID: "t1", Token: "demo-token", CAFile: caFile})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	orders := client.Topic{TenantID: "t1", Namespace: "shop", Stream: "orders"}
	if _, err := c.Publish(ctx, orders, []byte("order #1"), client.PublishOptions{}); err != nil {
		log.Fatal(err)
	}

	ref := client.CacheRef{TenantID: "t1", Namespace: "shop", Cache: "sessions"}
	err = c.CachePut(ctx, ref, "user-7", []byte("cart=3"), time.Minute)
	r, err := c.CachePutIf(ctx, ref, "user-8", []byte("cart=1"), client.IfAbsent, 0)
	n, _, err := c.CounterAdd(ctx, ref, "visits", 1)
	g := c.Group(client.GroupRef{Topic: orders, Shard: 0, Group: "billing"})
	_, err = g.Seek(ctx, client.Earliest, true)
	recs, err := g.Poll(ctx, client.PollOptions{Max: 10, Wait: time.Second})
	off, err := c.Commit(ctx, client.CommitRequest{Topic: orders, EntityKey: []byte("order-1"),
		Ops: []client.CommitOp{client.PublishEvent("", []byte("paid")), client.PutState("", "status", []byte("paid"))}})
	shards, err := api.New(c.At(addr)).CacheShards(ctx, ref) // one broker's own answer

	if err != nil {
		log.Fatal(err)
	}
	v, _, _ := c.CacheGet(ctx, ref, "user-7")
	fmt.Printf("%s, put-if-absent applied %v, visits %d, %d record(s) polled, committed at %d, %d cache shard(s)\n",
		v, r.Applied, n, len(recs), off, shards)
	// Output: cart=3, put-if-absent applied true, visits 1, 1 record(s) polled, committed at 1, 1 cache shard(s)
}
