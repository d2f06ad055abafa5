package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/felixtest"
)

// Hello world: publish with an acknowledgement, then read the record
// back from the earliest offset. The broker is one started in-process by
// package felixtest (in a test, pass the test's t to felixtest.NewBroker;
// TestHello is this code as a test); against the broker of
// "go run ./examples/broker -cert-out broker.pem", the seed is
// "127.0.0.1:7447", the tenant "t1", the token "demo-token" and
// CAFile "broker.pem".
func Example() {
	t, stop := felixtest.Standalone() // an Example has no testing.T
	defer stop()
	b := felixtest.NewBroker(t, felixtest.WithTenant("t1"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{
		Seeds:    b.Addrs(), // one or more; the rest of a cluster is discovered
		TenantID: "t1",
		Token:    b.Token(),
		CAPEM:    b.CertificatePEM(), // or CAFile: the certificate a broker wrote with -cert-out
	})
	if err != nil {
		log.Fatal(err) // names the address and what to check
	}
	defer c.Close()

	orders := client.Topic{TenantID: "t1", Namespace: "shop", Stream: "orders"}
	res, err := c.Publish(ctx, orders, []byte("order #1"), client.PublishOptions{Key: []byte("customer-7")})
	if err != nil {
		log.Fatal(err) // typed: *felix.BrokerError, *client.AmbiguousError, ...
	}
	fmt.Println("acked at offset", res.Offset) // the zero PublishOptions waits for the ack

	sub, err := c.Subscribe(ctx, orders, client.SubscribeOptions{Start: client.Earliest})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	for ev, err := range sub.All(ctx) {
		if err != nil {
			log.Fatal(err) // trimmed cursor, deleted stream, ... (lost connections, moves and lags are resumed)
		}
		fmt.Printf("%s at offset %d\n", ev.Payload, ev.Offset)
		break
	}
	// Output:
	// acked at offset 0
	// order #1 at offset 0
}

// exampleBroker starts a felixtest broker for tenant t1 outside a test;
// stop stops it.
func exampleBroker() (b *felixtest.Cluster, stop func()) {
	t, stop := felixtest.Standalone()
	return felixtest.NewBroker(t, felixtest.WithTenant("t1")), stop
}

// Info tells where a subscription from earliest began: the oldest record
// the broker still keeps.
func ExampleSubscription_Info() {
	b, stop := exampleBroker()
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.ClientConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	audit := client.Topic{TenantID: "t1", Namespace: "shop", Stream: "audit"}
	for _, p := range []string{"a", "b"} {
		if _, err := c.Publish(ctx, audit, []byte(p), client.PublishOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	sub, err := c.Subscribe(ctx, audit, client.SubscribeOptions{Start: client.Earliest})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	fmt.Println("earliest retained offset:", sub.Info().StartOffset.V)
	// Output:
	// earliest retained offset: 0
}

// A prefix watch over every shard of a cache, then values with and
// without a TTL and a counter: the watch sees the value writes (a counter
// is a keyspace of its own, and an expiry writes no event).
func ExampleClient_CacheWatchSharded() {
	b, stop := exampleBroker()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.ClientConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	sessions := client.CacheRef{TenantID: "t1", Namespace: "shop", Cache: "sessions"}
	if err := c.CachePut(ctx, sessions, "warm-up", nil, 0); err != nil { // creates the cache
		log.Fatal(err)
	}
	w, err := c.CacheWatchSharded(ctx, sessions, client.ShardedWatchOptions{Prefix: "user/"})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	if err := c.CachePut(ctx, sessions, "user/ann", []byte("cart=2"), time.Minute); err != nil {
		log.Fatal(err)
	}
	if _, _, err := c.CounterAdd(ctx, sessions, "user/ann", 1); err != nil { // not a value: no event
		log.Fatal(err)
	}
	if err := c.CachePut(ctx, sessions, "user/bob", []byte("cart=0"), 0); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		ev, err := w.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("shard %d: %s = %s (expires: %v)\n", ev.Shard, ev.Key, ev.Value, !ev.ExpiresAt.IsZero())
	}
	// Output:
	// shard 0: user/ann = cart=2 (expires: true)
	// shard 0: user/bob = cart=0 (expires: false)
}

// Fire-and-forget publishes are asked for with NoAck; Flush waits until
// the broker has read them.
func ExampleClient_Flush() {
	b, stop := exampleBroker()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.ClientConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	clicks := client.Topic{TenantID: "t1", Namespace: "shop", Stream: "clicks"}
	for i := range 100 {
		if _, err := c.Publish(ctx, clicks, []byte(fmt.Sprint("click ", i)), client.PublishOptions{NoAck: true}); err != nil {
			log.Fatal(err)
		}
	}
	if err := c.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	page, err := c.StreamRead(ctx, clicks, 0, api.ReadOptions{From: 0, MaxRecords: 1000})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Records), "records read by the broker")
	// Output:
	// 100 records read by the broker
}
