package tap_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/tap"
)

// ExampleListen puts a relay between a client and a broker and prints the
// kind of every frame it relays (felix tap logs them as JSON lines).
func ExampleListen() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A broker that acknowledges publishes (broker_test.go).
	b, stop, err := newBroker(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	// The relay has its own certificate toward clients and verifies the
	// broker's.
	relayTLS, relayRoots, err := conn.SelfSigned()
	if err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	r, err := tap.Listen("127.0.0.1:0", &tap.Config{
		TLS: relayTLS, Upstream: b.addr(), UpstreamTLS: &tls.Config{RootCAs: b.pool},
		OnFrame: func(f tap.Frame) {
			h, _ := felix.ParseHeader(f.Frame)
			mu.Lock()
			seen = append(seen, f.Dir.String()+" "+h.Flags.Layout().String())
			mu.Unlock()
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	c, err := conn.Dial(ctx, r.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: relayRoots}, TenantID: "t1", Token: "secret"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Publish(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}, []byte("hi"), conn.PublishOptions{Ack: felix.AckPerBatch}); err != nil {
		log.Fatal(err)
	}
	c.Close()
	r.Close() // waits until every frame was reported
	for _, s := range seen {
		fmt.Println(s)
	}
	// Output:
	// c2b json_message
	// b2c json_message
	// c2b binary_acked_publish_batch
	// b2c binary_publish_ack
}
