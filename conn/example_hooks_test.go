package conn_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// ExampleHooks counts acknowledged publishes and the bytes of the frames
// a client writes, as a metrics adapter would (see examples/metrics for
// one on the Prometheus client).
func ExampleHooks() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srvTLS, roots, err := conn.SelfSigned()
	if err != nil {
		log.Fatal(err)
	}
	var authed atomic.Int64
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{
		TLS:   srvTLS,
		Offer: felix.BrokerOffer{Flags: felix.KnownFlags},
		Hooks: &conn.Hooks{StreamAuthenticated: func(conn.StreamInfo) { authed.Add(1) }},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go exampleBroker(ctx, ln)

	var acked, okAcks, written atomic.Int64
	hooks := &conn.Hooks{
		FrameWritten: func(f conn.FrameInfo) { written.Add(int64(f.Bytes)) },
		PublishAcked: func(p conn.PublishInfo) {
			acked.Add(1)
			if p.Outcome == "ok" {
				okAcks.Add(1)
			}
		},
	}
	c, err := conn.Dial(ctx, ln.Addr().String(), &conn.Config{
		TLS: &tls.Config{RootCAs: roots}, TenantID: "t1", Token: "secret", Hooks: hooks,
	})
	if err != nil {
		log.Fatal(err)
	}
	for range 3 {
		if _, err := c.Publish(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}, []byte("hi"), conn.PublishOptions{Ack: felix.AckPerBatch}); err != nil {
			log.Fatal(err)
		}
	}
	c.Close()
	fmt.Println("acked publishes:", acked.Load(), "ok:", okAcks.Load())
	fmt.Println("streams authenticated by the server:", authed.Load())
	fmt.Println("client wrote frames:", written.Load() > 0)
	// Output:
	// acked publishes: 3 ok: 3
	// streams authenticated by the server: 1
	// client wrote frames: true
}

// ExampleJoinHooks attaches two observers to one client configuration:
// each event calls both, in order.
func ExampleJoinHooks() {
	var frames atomic.Int64
	metrics := &conn.Hooks{FrameWritten: func(conn.FrameInfo) { frames.Add(1) }}
	tracing := &conn.Hooks{
		FrameWritten: func(e conn.FrameInfo) { fmt.Println("trace: wrote", e.Bytes, "bytes") },
		ConnOpened:   func(e conn.ConnInfo) { fmt.Println("trace: opened", e.Side) },
	}
	cfg := conn.Config{TenantID: "t1", Hooks: conn.JoinHooks(metrics, tracing)}

	// The connection calls the joined hooks as it would one set.
	cfg.Hooks.ConnOpened(conn.ConnInfo{Side: conn.SideClient})
	cfg.Hooks.FrameWritten(conn.FrameInfo{Bytes: 42})
	fmt.Println("frames counted:", frames.Load())
	fmt.Println("unobserved events stay nil:", cfg.Hooks.FrameRead == nil)
	// Output:
	// trace: opened client
	// trace: wrote 42 bytes
	// frames counted: 1
	// unobserved events stay nil: true
}
