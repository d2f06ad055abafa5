package client_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// An idempotent Producer shared by several goroutines. The application
// re-sends a batch after any error except the ambiguous one: a batch in
// doubt is the Producer's to re-send (same sequence, before its route's
// next batch), and re-sending its payloads would write them twice.
func ExampleProducer() {
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
	p, err := c.NewProducer(ctx)
	if err != nil {
		log.Fatal(err)
	}
	events := client.Topic{TenantID: server.DemoTenant, Namespace: "shop", Stream: "events"}

	publish := func(payload []byte) error {
		for {
			_, err := p.PublishBatch(ctx, events, [][]byte{payload}, client.PublishOptions{})
			switch {
			case err == nil:
				return nil
			case errors.Is(err, client.ErrAmbiguous), errors.Is(err, client.ErrProducerStopped), ctx.Err() != nil:
				return err // in doubt (the Producer re-sends it), stopped, or out of time
			}
			// Not written: send it again.
		}
	}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			for i := range 2 {
				if err := publish(fmt.Appendf(nil, "worker %d event %d", w, i)); err != nil {
					log.Print(err)
				}
			}
		})
	}
	wg.Wait()

	page, err := c.StreamRead(ctx, events, 0, api.ReadOptions{MaxRecords: 100})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Records), "records, each once")
	// Output: 6 records, each once
}
