// Command proxy is a Felix-aware proxy built only on the public API of
// package conn: it accepts Felix clients over QUIC and forwards their
// publishes (binary batches without taking them apart, JSON publishes) and
// subscriptions (event batches as they arrive) to one upstream broker over
// one upstream connection. Answers come back in the form each client asked
// for, in request order; an upstream failure reaches the client as the
// same failure with the same retry class, and a subscription the upstream
// ended (lagged, shard moved, stream deleted) ends the same way
// downstream, never as a clean end.
//
//	go run ./examples/proxy -upstream 127.0.0.1:5000 -upstream-ca broker.pem -cert-out proxy.pem
//
// The proxy listens with a fresh self-signed certificate for "localhost"
// (written to -cert-out for clients to trust) and accepts every client
// token unless -token is set. The logic is in proxy.go.
package main

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "proxy:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:5100", "UDP address clients connect to")
	upstream := fs.String("upstream", "127.0.0.1:5000", "upstream broker address")
	upCA := fs.String("upstream-ca", "", "PEM file with the upstream broker's certificate or CA (empty: system roots)")
	tenant := fs.String("tenant", "t1", "tenant id of the upstream connection")
	upToken := fs.String("upstream-token", "demo-token", "token of the upstream connection")
	token := fs.String("token", "", "token clients must present (empty: any)")
	certOut := fs.String("cert-out", "", "write the proxy's certificate (PEM) here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	upTLS := &tls.Config{}
	if *upCA != "" {
		var err error
		if upTLS.RootCAs, err = conn.CertPoolFromFile(*upCA); err != nil {
			return err
		}
	}
	up, err := conn.Dial(ctx, *upstream, &conn.Config{TLS: upTLS, TenantID: *tenant, Token: *upToken})
	if err != nil {
		return err
	}
	defer up.Close()

	srvTLS, _, err := conn.SelfSigned()
	if err != nil {
		return err
	}
	if *certOut != "" {
		der := srvTLS.Certificates[0].Certificate[0]
		if err := os.WriteFile(*certOut, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
			return err
		}
	}
	var auth conn.Authenticator
	if *token != "" {
		auth = func(_ context.Context, a *felix.Auth) (any, error) {
			if a.Token != *token {
				return nil, &felix.BrokerError{Message: "bad token", Code: felix.CodeUnauthenticated}
			}
			return a.TenantID, nil
		}
	}
	p, err := Listen(*listen, srvTLS, up, auth)
	if err != nil {
		return err
	}
	defer p.Close()
	slog.Info("proxy listening", "addr", p.Addr(), "upstream", *upstream, "upstream_flags", up.Capabilities().Flags.SetString())
	err = p.Serve(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
