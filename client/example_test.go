package client_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/examples/broker/server"
)

// A cluster-aware client over a broker started in-process: publish with an
// acknowledgement, then read the record back from the earliest offset.
func Example() {
	cfg := server.Config{Addr: "127.0.0.1:0"}
	cfg.Engine.DefaultStream.Durable = true
	srv, err := server.Listen(cfg)
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{
		Seeds: []string{srv.Addr().String()}, // one or more; the rest is discovered
		Conn: conn.Config{
			TLS:      &tls.Config{RootCAs: srv.CertPool(), ServerName: "localhost"},
			TenantID: server.DemoTenant,
			Token:    server.DemoToken,
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	orders := client.Topic{TenantID: server.DemoTenant, Namespace: "shop", Stream: "orders"}
	res, err := c.Publish(ctx, orders, []byte("order #1"), client.PublishOptions{Ack: felix.AckPerBatch, Key: []byte("customer-7")})
	if err != nil {
		log.Fatal(err) // typed: *conn.BrokerError, *client.AmbiguousError, ...
	}
	fmt.Println("acked at offset", res.Offset)

	sub, err := c.Subscribe(ctx, orders, client.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
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

// Info tells where a subscription from earliest began: the oldest record
// the broker still keeps.
func ExampleSubscription_Info() {
	cfg := server.Config{Addr: "127.0.0.1:0"}
	cfg.Engine.DefaultStream.Durable = true
	srv, err := server.Listen(cfg)
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve()
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{
		Seeds: []string{srv.Addr().String()},
		Conn: conn.Config{TLS: &tls.Config{RootCAs: srv.CertPool(), ServerName: "localhost"},
			TenantID: server.DemoTenant, Token: server.DemoToken},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	audit := client.Topic{TenantID: server.DemoTenant, Namespace: "shop", Stream: "audit"}
	for _, p := range []string{"a", "b"} {
		if _, err := c.Publish(ctx, audit, []byte(p), client.PublishOptions{Ack: felix.AckPerBatch}); err != nil {
			log.Fatal(err)
		}
	}
	sub, err := c.Subscribe(ctx, audit, client.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	fmt.Println("earliest retained offset:", sub.Info().StartOffset.V)
	// Output:
	// earliest retained offset: 0
}
