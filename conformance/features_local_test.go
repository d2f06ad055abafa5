package conformance_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

// TestFeatureScenariosOnReferenceBroker runs the queue, commit,
// publish_if and shard-count scenario bodies against a one-node reference
// broker started here (a standalone broker, not the suite's cluster), with
// a fixture description naming its streams: each must hold and return
// its scenario's evidence there too.
func TestFeatureScenariosOnReferenceBroker(t *testing.T) {
	cfg := server.Config{Addr: "127.0.0.1:0"}
	cfg.Engine.NoAutoCreateStreams = true
	srv, err := server.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	fx := &conformance.Fixture{Addrs: []string{srv.Addr().String()}, TenantID: server.DemoTenant, Namespace: "conformance",
		Token: server.DemoToken, DurableStream: "durable", MissingStream: "missing"}
	if err := srv.Engine().CreateStream(engine.Topic{Tenant: fx.TenantID, Namespace: fx.Namespace, Stream: fx.DurableStream},
		engine.StreamConfig{Durable: true, Shards: 2}); err != nil {
		t.Fatal(err)
	}
	connCfg := func() conn.Config {
		return conn.Config{TLS: &tls.Config{RootCAs: srv.CertPool()}, TenantID: fx.TenantID, Token: fx.Token}
	}
	env := &scenarioEnv{fx: fx,
		client: func(t testing.TB, adjust func(*client.Config)) *client.Client {
			cfg := client.Config{Seeds: fx.Addrs, Conn: connCfg()}
			if adjust != nil {
				adjust(&cfg)
			}
			c, err := client.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		dial: func(t testing.TB, adjust func(*conn.Config)) (*conn.Client, error) {
			c := connCfg()
			if adjust != nil {
				adjust(&c)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cl, err := conn.Dial(ctx, fx.Addrs[0], &c)
			if err == nil {
				t.Cleanup(func() { _ = cl.Close() })
			}
			return cl, err
		}}
	for _, sc := range featureScenarios {
		t.Run(sc.id, func(t *testing.T) {
			ev, err := sc.run(t.Context(), t, env)
			if err != nil {
				t.Fatal(err)
			}
			if err := conformance.CheckEvidence(sc.id, ev); err != nil {
				t.Fatal(err)
			}
		})
	}
}
