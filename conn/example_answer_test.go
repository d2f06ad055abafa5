package conn_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// ExampleStream_AnswerPublish answers every publish with one typed error:
// the binary client gets a binary ack, the JSON client a publish_error,
// each with the code's default retry class since the error names none.
func ExampleStream_AnswerPublish() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srvTLS, roots, _ := conn.SelfSigned()
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: srvTLS, Offer: felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureErrorCodes}})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
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
					go func() {
						defer st.Close()
						for {
							req, err := st.ReadRequest(ctx)
							if err != nil {
								return
							}
							unavailable := &felix.BrokerError{Message: "no owner yet", Code: felix.CodeShardUnavailable}
							st.AnswerPublish(ctx, req, felix.PublishResult{}, unavailable)
						}
					}()
				}
			}()
		}
	}()
	for _, forceJSON := range []bool{false, true} {
		c, err := conn.Dial(ctx, ln.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: roots}, TenantID: "t1", Token: "x", ForceJSON: forceJSON})
		if err != nil {
			log.Fatal(err)
		}
		_, err = c.Publish(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}, []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
		var be *felix.BrokerError
		errors.As(err, &be)
		fmt.Println(be.Type, be.Code, be.Retry)
		c.Close()
	}
	// Output:
	// publish_ack shard_unavailable retry
	// publish_error shard_unavailable retry
}

// ExampleIdentityOf reads a stream's identity back with its type. The
// Authenticator sees the client's address and TLS state (its certificate
// under mTLS) through AuthPeerFromContext.
func ExampleIdentityOf() {
	type user struct{ Name string }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srvTLS, roots, _ := conn.SelfSigned()
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: srvTLS, Offer: felix.BrokerOffer{Flags: felix.KnownFlags},
		Authenticate: func(ctx context.Context, a *felix.Auth) (any, error) {
			peer, _ := conn.AuthPeerFromContext(ctx)
			fmt.Println("client certificate:", peer.Certificate != nil, "from loopback:", peer.RemoteAddr.(*net.UDPAddr).IP.IsLoopback())
			return user{Name: a.Token}, nil
		}})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	streams := make(chan *conn.Stream, 1)
	go func() {
		sc, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		if st, err := sc.AcceptStream(ctx); err == nil {
			streams <- st
		}
	}()
	c, err := conn.Dial(ctx, ln.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: roots}, TenantID: "t1", Token: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	st := <-streams
	u, ok := conn.IdentityOf[user](st)
	fmt.Println(u.Name, ok)
	st.Close()
	// Output:
	// client certificate: false from loopback: true
	// alice true
}

// ExampleSubscription_NextBatch publishes a sequence of payloads as one
// batch and reads it back as the batch it arrived as, without taking it
// apart into events.
func ExampleSubscription_NextBatch() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srvTLS, roots, _ := conn.SelfSigned()
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: srvTLS, Offer: felix.BrokerOffer{Flags: felix.KnownFlags}})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go exampleBroker(ctx, ln)
	c, err := conn.Dial(ctx, ln.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: roots}, TenantID: "t1", Token: "x"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	topic := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "orders"}
	payloads := func(yield func([]byte) bool) {
		for _, p := range []string{"a", "b", "c"} {
			if !yield([]byte(p)) {
				return
			}
		}
	}
	if _, err := c.PublishSeq(ctx, topic, payloads, conn.PublishOptions{Ack: felix.AckPerBatch}); err != nil {
		log.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	v, err := sub.NextBatch(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(v.Len(), " events:")
	for p := range v.Payloads() {
		fmt.Print(" ", string(p))
	}
	fmt.Println()
	// Output: 3 events: a b c
}

// ExampleStream_ReservePublish answers pipelined publishes in request
// order although they finish in the reverse order: each answer is reserved
// as its request is read, and resolved when its publish is done.
func ExampleStream_ReservePublish() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srvTLS, roots, _ := conn.SelfSigned()
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: srvTLS, Offer: felix.BrokerOffer{Flags: felix.KnownFlags}})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
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
				var pending []*conn.PendingAnswer
				for len(pending) < 3 {
					req, err := st.ReadRequest(ctx)
					if err != nil {
						return
					}
					pa, err := st.ReservePublish(req)
					if err != nil {
						st.WriteErr(ctx, err)
						continue
					}
					pending = append(pending, pa)
				}
				for i := len(pending) - 1; i >= 0; i-- { // finished last to first
					pending[i].Post(felix.PublishResult{Offset: uint64(10 * i), HasOffset: true}, nil)
				}
				st.WaitAnswers(ctx)
			}()
		}
	}()
	c, err := conn.Dial(ctx, ln.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: roots}, TenantID: "t1", Token: "x"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	results := make(chan string, 3)
	for i := range 3 {
		err := c.PublishBatchAsync(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}, [][]byte{{byte(i)}},
			conn.PublishOptions{Ack: felix.AckPerBatch}, func(r felix.PublishResult, err error) {
				results <- fmt.Sprint(r.Offset, err)
			})
		if err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		fmt.Println(<-results)
	}
	// Output:
	// 0 <nil>
	// 10 <nil>
	// 20 <nil>
}
