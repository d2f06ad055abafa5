package conn_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// The examples below run against one reference broker (examples/broker),
// started on first use, with durable streams and the demo token. (The
// examples of the typed calls are package api's.)

var (
	refOnce sync.Once
	refSrv  *server.Server
)

func exampleClient(ctx context.Context) *conn.Client {
	refOnce.Do(func() {
		cfg := server.Config{Addr: "127.0.0.1:0"}
		cfg.Engine.DefaultStream.Durable = true
		srv, err := server.Listen(cfg)
		if err != nil {
			log.Fatal(err)
		}
		go srv.Serve()
		refSrv = srv
	})
	c, err := conn.Dial(ctx, refSrv.Addr().String(), &conn.Config{
		TLS: &tls.Config{RootCAs: refSrv.CertPool()}, TenantID: server.DemoTenant, Token: server.DemoToken})
	if err != nil {
		log.Fatal(err)
	}
	return c
}

func exampleCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

func ExampleClient_RawRequest() {
	ctx, cancel := exampleCtx()
	defer cancel()
	c := exampleClient(ctx)
	defer c.Close()
	ans, err := c.RawRequest(ctx, &felix.Extension{Name: "acme.ping"})
	fmt.Println(ans.MessageType(), err)
	// Output: unsupported <nil>
}

func ExampleClient_OpenRaw() {
	ctx, cancel := exampleCtx()
	defer cancel()
	c := exampleClient(ctx)
	defer c.Close()
	rs, err := c.OpenRaw(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer rs.Close()
	_ = rs.Send(ctx, &felix.CounterAdd{TenantID: server.DemoTenant, Namespace: "examples", Cache: "c", Key: "hits", Delta: 2, RequestID: 1})
	_ = rs.Send(ctx, &felix.CounterAdd{TenantID: server.DemoTenant, Namespace: "examples", Cache: "c", Key: "hits", Delta: 3, RequestID: 2})
	_ = rs.CloseWrite()
	for {
		m, err := rs.Recv(ctx)
		if err != nil {
			break // io.EOF after the last answer
		}
		v := m.(*felix.CounterValue)
		fmt.Println(v.RequestID, v.Value.V)
	}
	// Output:
	// 1 2
	// 2 5
}
