// Package reftest starts brokers for the end-to-end tests of conn, api and
// client: the reference broker (internal/broker/server) with durable
// streams and a client dialled to it with the demo credentials, and a bare
// broker that advertises a chosen feature set and records the requests it
// receives (for the not-advertised paths). It is test support, not API.
package reftest

import (
	"context"
	"crypto/tls"
	"errors"
	"log"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// Ctx is a context for one wait of a test: it ends 10 s from now (generous
// for QUIC end to end under -race on two cores), shortly before the
// test's deadline if that is sooner, or when the test ends; its cause
// names the test. A hang fails in seconds, not at the package's timeout.
func Ctx(t testing.TB) context.Context {
	end := time.Now().Add(10 * time.Second)
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			if soon := d.Add(-time.Until(d) / 10); soon.Before(end) {
				end = soon
			}
		}
	}
	ctx, cancel := context.WithDeadlineCause(context.Background(), end, errors.New(t.Name()+": a wait of the test ran past its 10 s bound"))
	t.Cleanup(cancel)
	return ctx
}

// StartRef starts a reference broker with durable streams (adjust may
// change the configuration); it is shut down when the test ends.
func StartRef(t testing.TB, adjust func(*server.Config)) *server.Server {
	t.Helper()
	cfg := server.Config{Addr: "127.0.0.1:0"}
	cfg.Engine.DefaultStream.Durable = true
	if adjust != nil {
		adjust(&cfg)
	}
	srv, err := server.Listen(cfg)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.NoError(t, <-done)
	})
	return srv
}

// DialRef connects a client to srv with the demo credentials.
func DialRef(t testing.TB, srv *server.Server, adjust func(*conn.Config)) *conn.Client {
	t.Helper()
	cfg := &conn.Config{TLS: &tls.Config{RootCAs: srv.CertPool()}, TenantID: server.DemoTenant, Token: server.DemoToken}
	if adjust != nil {
		adjust(cfg)
	}
	c, err := conn.Dial(Ctx(t), srv.Addr().String(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Bare advertises exactly offer and records the type of every JSON
// request it reads after auth; it answers unsupported (or what its answer
// function returns).
type Bare struct {
	ln    *conn.Listener
	roots *tls.Config
	mu    sync.Mutex
	types []string
	n     atomic.Int64
}

// StartBare starts a Bare broker answering unsupported to every request.
func StartBare(t testing.TB, offer felix.BrokerOffer) *Bare {
	t.Helper()
	return StartAnswering(t, offer, nil)
}

// StartAnswering is StartBare answering each request with answer(request)
// (unsupported when answer is nil or returns nil).
func StartAnswering(t testing.TB, offer felix.BrokerOffer, answer func(felix.Message) felix.Message) *Bare {
	t.Helper()
	srvTLS, roots, err := conn.SelfSigned()
	require.NoError(t, err)
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: srvTLS, Offer: offer})
	require.NoError(t, err)
	b := &Bare{ln: ln, roots: &tls.Config{RootCAs: roots}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			sc, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					st, err := sc.AcceptStream(ctx)
					if err != nil {
						return
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer st.Close()
						for {
							req, err := st.ReadRequest(ctx)
							if err != nil {
								return
							}
							if req.Message == nil {
								continue
							}
							typ := req.Message.MessageType()
							b.mu.Lock()
							b.types = append(b.types, typ)
							b.mu.Unlock()
							b.n.Add(1)
							var ans felix.Message
							if answer != nil {
								ans = answer(req.Message)
							}
							if ans == nil {
								ans = &felix.Unsupported{RequestType: typ}
							}
							_ = st.WriteMessage(ctx, ans)
						}
					}()
				}
			}()
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = ln.Close()
		wg.Wait()
	})
	return b
}

// Dial connects a client to b (tenant t1, any token).
func (b *Bare) Dial(t testing.TB, adjust func(*conn.Config)) *conn.Client {
	t.Helper()
	cfg := &conn.Config{TLS: b.roots, TenantID: "t1", Token: "x"}
	if adjust != nil {
		adjust(cfg)
	}
	c, err := conn.Dial(Ctx(t), b.ln.Addr().String(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Received returns the types of the requests b has read, in order.
func (b *Bare) Received() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.types...)
}

// Count returns how many requests b has read.
func (b *Bare) Count() int64 { return b.n.Load() }

// ExampleBroker starts a reference broker in-process (durable streams
// created on first use, the demo token) and writes its certificate to a
// PEM file, as the broker's -cert-out flag does; stop closes both. It is for
// Example functions, which have no testing.TB.
func ExampleBroker() (addr, caFile string, stop func()) {
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
