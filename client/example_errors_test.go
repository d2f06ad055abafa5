package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/flxproto/felix/internal/reftest"

	"github.com/flxproto/felix/client"
)

// Every error a call returns is told apart with names of package client:
// errors.Is for a sentinel, errors.As for a type, RetryClassOf for what a
// later attempt could do (docs/errors.md §10 lists them all).
func Example_errors() {
	addr, caFile, stop := reftest.ExampleBroker()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := client.Config{Seeds: []string{addr}, TenantID: "t1", Token: "demo-token", CAFile: caFile}

	// Credentials the broker refuses, and a certificate the client does
	// not trust (a custom TLS configuration that trusts no authority).
	wrong := cfg
	wrong.Token = "not-the-token"
	_, err := client.Dial(ctx, wrong)
	var de *client.DialError
	fmt.Println("wrong token:", errors.Is(err, client.ErrAuthRefused), errors.As(err, &de))
	untrusting := cfg
	untrusting.CAFile, untrusting.TLS = "", &tls.Config{RootCAs: x509.NewCertPool()}
	_, err = client.Dial(ctx, untrusting)
	fmt.Println("untrusted certificate:", errors.Is(err, client.ErrCertUntrusted), client.RetryClassOf(err) == client.RetryFatal)

	c, err := client.Dial(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// Mistakes refused before anything is sent.
	other := client.Topic{TenantID: "t2", Namespace: "shop", Stream: "orders"}
	_, err = c.Publish(ctx, other, []byte("x"), client.PublishOptions{})
	var ne *client.NameError
	fmt.Println("another tenant:", errors.Is(err, client.ErrTenantMismatch), errors.As(err, &ne))
	orders := client.Topic{TenantID: "t1", Namespace: "shop", Stream: "orders"}
	_, err = c.Commit(ctx, client.CommitRequest{Topic: orders, EntityKey: []byte("order-1")})
	fmt.Println("commit without an event:", errors.Is(err, client.ErrCommitEventCount))
	// A broker's refusal: a conditional publish at a stale offset.
	if _, err := c.Publish(ctx, orders, []byte("order #1"), client.PublishOptions{}); err != nil {
		log.Fatal(err)
	}
	_, err = c.PublishIf(ctx, orders, [][]byte{[]byte("order #2")}, nil, 0)
	var refused *client.PublishRefusedError
	if errors.As(err, &refused) {
		tail, _ := refused.Tail()
		fmt.Println("stale publish_if:", refused.Reason, "tail", tail)
	}
	// Output:
	// wrong token: true true
	// untrusted certificate: true true
	// another tenant: true true
	// commit without an event: true
	// stale publish_if: offset_mismatch tail 1
}
