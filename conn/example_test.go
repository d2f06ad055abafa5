package conn_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// exampleBroker is a minimal broker on the server API: it answers acked
// binary publishes with an ok ack and serves one subscription per subscribe
// with the records published so far, then ends it.
func exampleBroker(ctx context.Context, ln *conn.Listener) {
	var log [][]byte
	for {
		sc, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		go func() {
			for {
				st, err := sc.AcceptStream(ctx)
				if err != nil {
					return
				}
				go serveExample(ctx, st, &log)
			}
		}()
	}
}

func serveExample(ctx context.Context, st *conn.Stream, records *[][]byte) {
	defer st.Close()
	for {
		req, err := st.ReadRequest(ctx)
		if err != nil {
			return // io.EOF: the client finished the stream
		}
		switch {
		case req.Flags.Has(felix.FlagBinaryPublishAcked):
			v, err := felix.ParsePublishBatch(req.Flags, req.Payload)
			if err != nil {
				return
			}
			for p := range v.Payloads() {
				*records = append(*records, append([]byte(nil), p...))
			}
			// A binary ack with the request id, in request order.
			st.AnswerPublish(ctx, req, felix.PublishResult{}, nil)
		case req.Message != nil && req.Message.MessageType() == "subscribe":
			// Opens the event stream (event_stream_hello), answers
			// subscribed and closes st: the event stream governs now.
			es, err := st.StartSubscription(ctx, &felix.Subscribed{SubscriptionID: 1})
			if err != nil {
				return
			}
			batch := felix.EventBatch{Payloads: *records}
			frame, _ := felix.AppendEventBatch(nil, &batch, es.Peer().EventFlags())
			es.WriteEncoded(es.Context(), frame)
			es.End(es.Context(), nil) // a clean end: the client's Next returns io.EOF
			return
		}
	}
}

// Example shows a client and a server of this package talking over QUIC on
// loopback.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Server: a self-signed certificate for "localhost".
	srvTLS, roots, err := conn.SelfSigned()
	if err != nil {
		log.Fatal(err)
	}
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{
		TLS:   srvTLS,
		Offer: felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureErrorCodes},
		Authenticate: func(ctx context.Context, a *felix.Auth) (any, error) {
			if a.Token != "secret" {
				return nil, errors.New("bad token")
			}
			return a.TenantID, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go exampleBroker(ctx, ln)

	// Client.
	c, err := conn.Dial(ctx, ln.Addr().String(), &conn.Config{
		TLS:      &tls.Config{RootCAs: roots},
		TenantID: "t1",
		Token:    "secret",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Printf("broker flags: %#04x, legacy: %v\n", uint16(c.Capabilities().Flags), c.Capabilities().Legacy)

	topic := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "orders"}
	for _, p := range []string{"a", "b"} {
		if _, err := c.Publish(ctx, topic, []byte(p), conn.PublishOptions{Ack: felix.AckPerBatch}); err != nil {
			log.Fatal(err)
		}
	}
	sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range sub.All(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("event:", string(ev.Payload))
	}
	_, err = sub.Next(ctx)
	fmt.Println("end:", err == io.EOF)

	// A refused token.
	_, err = conn.Dial(ctx, ln.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: roots}, TenantID: "t1", Token: "wrong"})
	var be *felix.BrokerError
	fmt.Println("rejected:", errors.Is(err, felix.ErrAuthRefused), errors.As(err, &be) && be.Code == felix.CodeUnauthenticated)
	// Output:
	// broker flags: 0x7fff, legacy: false
	// event: a
	// event: b
	// end: true
	// rejected: true true
}

// ExampleClient_Request sends one one-answer request and reads its
// answer (package api has the typed calls written over Request); a
// request that keeps a stream open is not one.
func ExampleClient_Request() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srvTLS, roots, _ := conn.SelfSigned()
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: srvTLS, Offer: felix.BrokerOffer{Flags: felix.KnownFlags}})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() { // a cache that is always empty
		sc, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		for {
			st, err := sc.AcceptStream(ctx)
			if err != nil {
				return
			}
			go func() {
				defer st.Close()
				for {
					req, err := st.ReadRequest(ctx)
					if err != nil {
						return
					}
					if g, ok := req.Message.(*felix.CacheGet); ok {
						st.WriteMessage(ctx, &felix.CacheValue{TenantID: g.TenantID, Namespace: g.Namespace, Cache: g.Cache, Key: g.Key, RequestID: g.RequestID})
					}
				}
			}()
		}
	}()
	c, err := conn.Dial(ctx, ln.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: roots}, TenantID: "t1", Token: "x", CacheStreams: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ans, err := c.Request(ctx, &felix.CacheGet{TenantID: "t1", Namespace: "ns", Cache: "c", Key: "k"})
	if err != nil {
		log.Fatal(err)
	}
	cv := ans.(*felix.CacheValue)
	fmt.Println(ans.MessageType(), cv.Value.Set, cv.RequestID.Set)
	_, err = c.Request(ctx, &felix.Subscribe{TenantID: "t1", Namespace: "ns", Stream: "s"})
	fmt.Println(errors.Is(err, conn.ErrNotARequest))
	// Output:
	// cache_value false true
	// true
}

// DefaultQUICConfig gives the client's QUIC defaults to adjust: here a
// smaller stream receive window, keeping the idle timeout and keep-alive.
func ExampleDefaultQUICConfig() {
	q := conn.DefaultQUICConfig()
	q.InitialStreamReceiveWindow, q.MaxStreamReceiveWindow = 64<<10, 64<<10
	cfg := conn.Config{QUIC: q}
	fmt.Println(cfg.QUIC.MaxIdleTimeout, cfg.QUIC.KeepAlivePeriod, cfg.QUIC.MaxStreamReceiveWindow)
	// Output: 6s 2s 65536
}
