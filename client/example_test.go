package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/examples/broker/server"
)

// Hello world: publish with an acknowledgement, then read the record
// back from the earliest offset. Only package client is imported; the
// broker is one started in-process, as "go run ./examples/broker
// -cert-out broker.pem" starts one on 127.0.0.1:7447.
func Example() {
	addr, caFile, stop := exampleBroker() // "127.0.0.1:7447", "broker.pem"
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{
		Seeds:    []string{addr}, // one or more; the rest of a cluster is discovered
		TenantID: "t1",
		Token:    "demo-token",
		CAFile:   caFile, // the certificate the broker wrote with -cert-out
	})
	if err != nil {
		log.Fatal(err) // names the address and what to check
	}
	defer c.Close()

	orders := client.Topic{TenantID: "t1", Namespace: "shop", Stream: "orders"}
	res, err := c.Publish(ctx, orders, []byte("order #1"), client.PublishOptions{Key: []byte("customer-7")})
	if err != nil {
		log.Fatal(err) // typed: *conn.BrokerError, *client.AmbiguousError, ...
	}
	fmt.Println("acked at offset", res.Offset) // the zero PublishOptions waits for the ack

	sub, err := c.Subscribe(ctx, orders, client.SubscribeOptions{Start: client.StartEarliest})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	for ev, err := range sub.All(ctx) {
		if err != nil {
			log.Fatal(err) // lagged, trimmed cursor, ... (lost connections are resumed)
		}
		fmt.Printf("%s at offset %d\n", ev.Payload, ev.Offset)
		break
	}
	// Output:
	// acked at offset 0
	// order #1 at offset 0
}

// exampleBroker starts a reference broker in-process (durable streams
// created on first use, the demo token) and writes its certificate to a
// PEM file, as the broker's -cert-out flag does.
func exampleBroker() (addr, caFile string, stop func()) {
	cfg := server.Config{Addr: "127.0.0.1:0"}
	cfg.Engine.DefaultStream.Durable = true
	srv, err := server.Listen(cfg)
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve()
	dir, err := os.MkdirTemp("", "felix-example")
	if err != nil {
		log.Fatal(err)
	}
	caFile = filepath.Join(dir, "broker.pem")
	if err := srv.WriteCertificate(caFile); err != nil {
		log.Fatal(err)
	}
	return srv.Addr().String(), caFile, func() { srv.Close(); os.RemoveAll(dir) }
}

// Info tells where a subscription from earliest began: the oldest record
// the broker still keeps.
func ExampleSubscription_Info() {
	addr, caFile, stop := exampleBroker()
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Seeds: []string{addr}, TenantID: "t1", Token: "demo-token", CAFile: caFile})
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
	sub, err := c.Subscribe(ctx, audit, client.SubscribeOptions{Start: client.StartEarliest})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	fmt.Println("earliest retained offset:", sub.Info().StartOffset.V)
	// Output:
	// earliest retained offset: 0
}
