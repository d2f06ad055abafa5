package felixtest_test

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/felixtest"
)

// A three-node cluster: publish, kill the node that owns the stream's
// shard, publish again; the subscriber sees both records. In a test, pass
// the test's t to NewCluster instead of Standalone's.
func ExampleNewCluster() {
	t, stop := felixtest.Standalone()
	defer stop()
	cl := felixtest.NewCluster(t, 3)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, cl.ClientConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	orders := cl.Topic("shop", "orders")
	sub, err := c.Subscribe(ctx, orders, client.SubscribeOptions{Start: client.Earliest})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	p, err := c.NewProducer(ctx) // re-sends a batch in doubt without writing it twice
	if err != nil {
		log.Fatal(err)
	}
	for i, payload := range []string{"order #1", "order #2"} {
		if i == 1 {
			owner := cl.Owner(orders, 0)
			if err := cl.Kill(owner); err != nil { // returns once the shard has moved
				log.Fatal(err)
			}
			fmt.Println("killed the owner; it now runs:", cl.Running(owner))
		}
		if _, err := p.PublishBatch(ctx, orders, [][]byte{[]byte(payload)}, client.PublishOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	for range 2 {
		ev, err := sub.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s at offset %d\n", ev.Payload, ev.Offset)
	}
	// Output:
	// killed the owner; it now runs: false
	// order #1 at offset 0
	// order #2 at offset 1
}

// Intercept answers the first publish with retry_after: the client waits
// as asked and publishes again, and the broker writes the record once.
func ExampleCluster_Intercept() {
	t, stop := felixtest.Standalone()
	defer stop()
	b := felixtest.NewBroker(t)
	var refused atomic.Bool // the hook runs on the broker's goroutines
	b.Intercept(func(r felixtest.Request) *felixtest.Answer {
		if r.Type == "publish_batch" && refused.CompareAndSwap(false, true) { // the client publishes binary batches
			return felixtest.RetryAfter(10 * time.Millisecond)
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.ClientConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	orders := b.Topic("shop", "orders")
	res, err := c.Publish(ctx, orders, []byte("order #1"), client.PublishOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("refused once:", refused.Load(), "- acked at offset", res.Offset, "- records:", b.Appended(orders, 0))
	// Output:
	// refused once: true - acked at offset 0 - records: 1
}
