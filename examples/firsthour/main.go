// Command firsthour holds three programs written as a new user would
// write them, with package client as their only import from this module,
// against a running reference cluster described by its fixture file:
//
//	go run ./examples/broker -nodes 3 -fixture-out /tmp/felix.json -control 127.0.0.1:0 \
//		-stream t1/default/orders:durable:shards=6 &
//	go run ./examples/firsthour -fixture /tmp/felix.json stream   # acked keyed batches through node kills, every shard
//	go run ./examples/firsthour -fixture /tmp/felix.json cache    # TTL, conditional writes, counters, a sharded watch
//	go run ./examples/firsthour -fixture /tmp/felix.json orders   # producer, one-shard subscription, groups, commits, errors
//
// Each exits 0 only if every check it makes held. The fixture file names
// the brokers, the tenant, its token, the CA file of the brokers'
// certificate and the cluster's control endpoint (which the stream
// program uses to kill and restart nodes).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flxproto/felix/client"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "firsthour:", err)
		os.Exit(1)
	}
}

// run parses the command line (global flags, then the program's name and
// its own flags) and runs that program.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("firsthour", flag.ContinueOnError)
	fixturePath := fs.String("fixture", "", "the cluster's fixture file (go run ./examples/broker -fixture-out FILE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *fixturePath == "" || fs.NArg() == 0 {
		return errors.New("usage: firsthour -fixture FILE stream|cache|orders [flags]")
	}
	fx, err := loadFixture(*fixturePath)
	if err != nil {
		return err
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	switch name {
	case "stream":
		return runStream(ctx, fx, rest, out)
	case "cache":
		return runCache(ctx, fx, out)
	case "orders":
		return runOrders(ctx, fx, out)
	}
	return fmt.Errorf("unknown program %q: want stream, cache or orders", name)
}

// fixture is what the programs read of a reference cluster's fixture
// file.
type fixture struct {
	Addrs             []string `json:"addrs"`
	TenantID          string   `json:"tenant_id"`
	Namespace         string   `json:"namespace"`
	Token             string   `json:"token"`
	UnauthorizedToken string   `json:"unauthorized_token"`
	CAFile            string   `json:"ca_file"`
	Cache             string   `json:"cache"`
	MissingStream     string   `json:"missing_stream"`
	ControlURL        string   `json:"control_url"`
	ControlToken      string   `json:"control_token"`
}

// loadFixture reads the fixture at path; a relative CA file is relative to
// the fixture's directory.
func loadFixture(path string) (fixture, error) {
	var fx fixture
	b, err := os.ReadFile(path)
	if err != nil {
		return fx, err
	}
	if err := json.Unmarshal(b, &fx); err != nil {
		return fx, fmt.Errorf("fixture %s: %w", path, err)
	}
	if len(fx.Addrs) == 0 || fx.TenantID == "" || fx.Token == "" || fx.CAFile == "" {
		return fx, fmt.Errorf("fixture %s: want addrs, tenant_id, token and ca_file", path)
	}
	if !filepath.IsAbs(fx.CAFile) {
		fx.CAFile = filepath.Join(filepath.Dir(path), fx.CAFile)
	}
	return fx, nil
}

// config is the client configuration of the fixture's brokers and
// credentials.
func (fx fixture) config() client.Config {
	return client.Config{Seeds: fx.Addrs, TenantID: fx.TenantID, Token: fx.Token, CAFile: fx.CAFile}
}

// control posts body to the cluster's control endpoint (POST /kill,
// /restart, ...).
func (fx fixture) control(ctx context.Context, path, body string) error {
	if fx.ControlURL == "" {
		return errors.New("the fixture names no control endpoint (start the broker with -control 127.0.0.1:0)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fx.ControlURL+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+fx.ControlToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("control %s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// checker prints each check that held and fails on the first that did
// not.
type checker struct{ out io.Writer }

func (c checker) check(ok bool, format string, args ...any) error {
	if !ok {
		return fmt.Errorf("check failed: "+format, args...)
	}
	fmt.Fprintf(c.out, "ok: "+format+"\n", args...)
	return nil
}
