package api_test

import (
	"context"
	"crypto/tls"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/examples/broker/server"
	"github.com/stretchr/testify/require"
)

// This file starts the reference broker (examples/broker/server) for the
// end-to-end tests of the typed calls over a *conn.Client, and a bare
// broker that advertises a chosen feature set and counts the requests it
// receives (for the not-advertised paths).

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Until(d)/10))
		}
	}
	t.Cleanup(cancel)
	return ctx
}

// startRef starts a reference broker with durable streams (adjust may
// change the configuration); it is shut down when the test ends.
func startRef(t testing.TB, adjust func(*server.Config)) *server.Server {
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

// dialRef connects a client to srv with the demo credentials.
func dialRef(t testing.TB, srv *server.Server, adjust func(*conn.Config)) *conn.Client {
	t.Helper()
	cfg := &conn.Config{TLS: &tls.Config{RootCAs: srv.CertPool()}, TenantID: server.DemoTenant, Token: server.DemoToken}
	if adjust != nil {
		adjust(cfg)
	}
	c, err := conn.Dial(testCtx(t), srv.Addr().String(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// bareBroker advertises exactly offer and records the type of every JSON
// request it reads after auth; it answers unsupported (or what its answer
// function returns).
type bareBroker struct {
	ln    *conn.Listener
	roots *tls.Config
	mu    sync.Mutex
	types []string
	n     atomic.Int64
}

func startBare(t testing.TB, offer felix.BrokerOffer) *bareBroker {
	t.Helper()
	return startAnswering(t, offer, nil)
}

// startAnswering is startBare answering each request with answer(request)
// (unsupported when answer is nil or returns nil).
func startAnswering(t testing.TB, offer felix.BrokerOffer, answer func(felix.Message) felix.Message) *bareBroker {
	t.Helper()
	srvTLS, roots, err := conn.SelfSigned()
	require.NoError(t, err)
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: srvTLS, Offer: offer})
	require.NoError(t, err)
	b := &bareBroker{ln: ln, roots: &tls.Config{RootCAs: roots}}
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

func (b *bareBroker) dial(t testing.TB, adjust func(*conn.Config)) *conn.Client {
	t.Helper()
	cfg := &conn.Config{TLS: b.roots, TenantID: "t1", Token: "x"}
	if adjust != nil {
		adjust(cfg)
	}
	c, err := conn.Dial(testCtx(t), b.ln.Addr().String(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (b *bareBroker) received() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.types...)
}
