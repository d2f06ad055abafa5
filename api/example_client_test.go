package api_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/reftest"

	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
)

// The typed calls are methods of the client (it embeds api.Calls): routed,
// redirected and retried by its decision table. The README's api section
// is the middle of this code.
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

	ref := felix.CacheRef{TenantID: "t1", Namespace: "shop", Cache: "sessions"}
	err = c.CachePut(ctx, ref, "user-7", []byte("cart=3"), time.Minute)
	n, _, err := c.CounterAdd(ctx, ref, "visits", 1)
	g := c.Group(api.GroupRef{Topic: orders, Shard: 0, Group: "billing"})
	_, err = g.Seek(ctx, client.Earliest, true)
	recs, err := g.Poll(ctx, api.PollOptions{Max: 10, Wait: time.Second})
	shards, err := api.New(c.At(addr)).CacheShards(ctx, ref)

	if err != nil {
		log.Fatal(err)
	}
	v, _, _ := c.CacheGet(ctx, ref, "user-7")
	fmt.Printf("%s, visits %d, %d record(s) polled, %d cache shard(s)\n", v, n, len(recs), shards)
	// Output: cart=3, visits 1, 1 record(s) polled, 1 cache shard(s)
}
