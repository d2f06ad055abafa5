package client_test

import (
	"testing"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/felixtest"
)

// Hello world, as the README shows it (TestReadmeClientExample checks
// that it does): publish with an acknowledgement, then read the record
// back from the earliest offset, against a broker started in the test.
func TestHello(t *testing.T) {
	b := felixtest.NewBroker(t) // in this process, stopped when the test ends
	ctx := t.Context()

	c, err := client.Dial(ctx, client.Config{
		Seeds:    b.Addrs(), // one or more; the rest of a cluster is discovered
		TenantID: b.TenantID(),
		Token:    b.Token(),
		CAPEM:    b.CertificatePEM(), // or CAFile: a PEM file, as a broker writes with -cert-out
	})
	if err != nil {
		t.Fatal(err) // names the address and what to check
	}
	defer c.Close()

	orders := client.Topic{TenantID: b.TenantID(), Namespace: "shop", Stream: "orders"}
	res, err := c.Publish(ctx, orders, []byte("order #1"), client.PublishOptions{Key: []byte("customer-7")})
	if err != nil {
		t.Fatal(err) // typed: *felix.BrokerError, *client.AmbiguousError, ...
	}
	t.Log("acked at offset", res.Offset) // the zero PublishOptions waits for the ack

	sub, err := c.Subscribe(ctx, orders, client.SubscribeOptions{Start: client.Earliest})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for ev, err := range sub.All(ctx) {
		if err != nil {
			t.Fatal(err) // trimmed cursor, deleted stream, ... (lost connections, moves and lags are resumed)
		}
		if string(ev.Payload) != "order #1" || ev.Offset != res.Offset {
			t.Fatalf("read %q at offset %d", ev.Payload, ev.Offset)
		}
		break
	}
}
