// Command broker is the Felix reference broker: a standalone, in-memory
// broker over QUIC that any Felix client can use as a real test peer.
//
//	go run ./examples/broker [flags]
//
// It listens on UDP 127.0.0.1:7447 by default with a fresh self-signed
// certificate for "localhost" at every start (write it for clients with
// -cert-out; -state-dir DIR keeps one across restarts), accepts
// the tokens of -tokens (or FELIX_TOKENS; default t1:demo-token), creates
// streams and caches on first use (durable streams by default; see
// -stream to configure one; -ephemeral makes them in-memory with a replay
// ring of -ring-records records per shard), and stops gracefully on
// SIGINT or SIGTERM: it stops accepting, finishes the answers in flight and
// closes every connection with application code 0.
//
// With -nodes N it serves a reference cluster instead (package
// internal/broker/cluster): N nodes on loopback sharing one log, creating
// streams and caches on first use as the standalone broker does (-strict,
// -stream, -cache and the auto-created streams' flags apply), a link
// interposer, the fixture file of -fixture-out (mode 0600: it holds the
// tokens) and the control endpoint of -control, which obeys only requests
// bearing the fixture's control_token:
//
//	go run ./examples/broker -nodes 3 -fixture-out f.json -control 127.0.0.1:0
//
// Given tokens (-tokens, -tokens-file or their environment variables), the
// cluster accepts no built-in token: the fixture's token and
// unauthorized_token are the operator's entries for tenant t1 or random
// ones written only to the fixture file.
//
// Shard inspection and subscription listing (felix inspect shard, felix
// inspect subs) need a token granted node.view:cluster:*: a token entry
// whose permissions include node.view, e.g. t1:ops-token:ops:node.view
// (that token may then inspect and nothing else). A cluster given no
// tokens accepts cluster.InspectToken for it.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/examples/metrics"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}

// streamFlags collects repeated -stream (or -cache) flags.
type streamFlags []string

// String implements flag.Value.
func (s *streamFlags) String() string { return strings.Join(*s, ",") }

// Set implements flag.Value.
func (s *streamFlags) Set(v string) error { *s = append(*s, v); return nil }

func run(args []string) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	addr := fs.String("addr", server.DefaultAddr, "UDP address to listen on")
	certFile := fs.String("cert", "", "PEM certificate file (default: a fresh self-signed certificate for localhost)")
	keyFile := fs.String("key", "", "PEM private key file for -cert")
	certOut := fs.String("cert-out", "", "write the server certificate (PEM) to this file for clients")
	stateDir := fs.String("state-dir", "", "keep the certificate and key in this directory ("+stateCertFile+", "+stateKeyFile+"): reused when present,\n"+
		"created (directory 0700, files 0600) when not, so clients trust the same certificate across restarts;\n"+
		"streams and caches are in memory and do not survive a restart")
	addrOut := fs.String("addr-out", "", "write the bound UDP address to this file once serving (useful with -addr 127.0.0.1:0)")
	tokens := fs.String("tokens", envOr("FELIX_TOKENS", server.DemoTenant+":"+server.DemoToken),
		"comma-separated tenant:token[:principal[:perms]] list (env FELIX_TOKENS; visible in the process list: prefer -tokens-file)")
	tokensFile := fs.String("tokens-file", os.Getenv("FELIX_TOKENS_FILE"),
		"file of tenant:token[:principal[:perms]] entries, one per line; perms is publish|subscribe|cache.read|cache.write|cache|all|node.view|none (env FELIX_TOKENS_FILE; overrides -tokens)")
	authLim := authFlags(fs)
	lims := registerLimitFlags(fs)
	budgets := registerBudgetFlags(fs)
	recvWindow := registerWindowFlag(fs)
	statsAddr := fs.String("stats", "", "serve the broker's figures as JSON over HTTP on this address, e.g. 127.0.0.1:0 (keep it on loopback), at /stats, and its Prometheus metrics at /metrics; the bound address is logged (with -nodes: one entry per node, metrics labelled node)")
	statsLog := fs.Duration("stats-log", 0, "log the broker's figures every interval (0 = never)")
	ephemeral := fs.Bool("ephemeral", false, "auto-create streams as ephemeral (live delivery without offsets, replay from a ring) instead of durable")
	ring := fs.Int("ring-records", engine.DefaultRingRecords, "per-shard replay ring of ephemeral streams, in records (earliest/offset subscribes are served from it)")
	shards := fs.Uint("shards", 1, "shards of auto-created streams")
	routing := fs.String("routing", "modulo", "key routing of auto-created streams: modulo or jump_hash")
	retain := fs.Int("retain-records", 1_000_000, "per-shard record retention of durable streams (0 = unbounded)")
	retainBytes := fs.Int64("retain-bytes", engine.DefaultMaxRetainBytes, "per-shard payload byte retention of auto-created streams: durable logs and ephemeral replay rings (0 = only -max-retain-bytes)")
	strict := fs.Bool("strict", false, "refuse unknown streams and caches (not_found) instead of creating them")
	queue := fs.Int("queue", engine.DefaultQueueCapacity, "default subscriber queue capacity (published batches)")
	queueMax := fs.Int("queue-max", engine.DefaultMaxQueueCapacity, "largest queue_capacity a subscriber may ask for")
	maxSubs := fs.Int("max-subs-per-conn", server.DefaultMaxSubscriptionsPerConn, "subscriptions plus cache watches allowed on one connection")
	window := fs.Uint("publish-window", server.DefaultPublishWindow, "publish window granted to pipelining clients (0 disables)")
	drain := fs.Duration("drain", server.DefaultDrainTimeout, "graceful shutdown budget")
	maxConns := fs.Int("max-conns", conn.DefaultMaxConnections, "client connections accepted at once (beyond: QUIC CONNECTION_REFUSED)")
	maxStreams := fs.Int64("max-streams", conn.DefaultMaxStreams, "concurrent client streams of each kind per connection")
	maxUnauth := fs.Int("max-unauth-streams", conn.DefaultMaxUnauthStreams, "unauthenticated streams per connection (beyond: reset)")
	maxUnauthConns := fs.Int("max-unauth-conns", conn.DefaultMaxUnauthConns, "connections not yet authenticated at once (beyond: the oldest of them is closed; negative: no cap)")
	connInflight := fs.Uint64("conn-inflight-bytes", conn.DefaultMaxConnInFlightBytes, "request bytes held per connection (and, as a budget of its own, answer bytes being written); also caps -conn-recv-window")
	maxHandshakes := fs.Int("max-handshakes", conn.DefaultMaxHandshakes, "QUIC handshakes in progress at once (beyond: CONNECTION_REFUSED; they take no -max-conns place)")
	retryHandshakes := fs.Int("retry-handshakes", conn.DefaultRetryHandshakes, "handshakes in progress from which new ones must validate their address with a QUIC Retry (negative: never)")
	answerTimeout := fs.Duration("answer-write-timeout", conn.DefaultAnswerWriteTimeout, "one answer write to a client that does not read (beyond: stream reset; negative: none)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	nodes := fs.Int("nodes", 0, "serve a reference cluster of N nodes on loopback (0: one standalone broker)")
	fixtureOut := fs.String("fixture-out", "", "cluster: write the conformance fixture description (JSON) to this file once serving")
	control := fs.String("control", "", "cluster: serve the HTTP control endpoint on this loopback address (e.g. 127.0.0.1:0); requests need the fixture's control_token as bearer token")
	var streams, caches streamFlags
	fs.Var(&streams, "stream", "declare a stream: tenant/namespace/name[:durable|:ephemeral][:shards=N][:routing=modulo|jump_hash][:retain=N][:retain-bytes=N][:ring=N] (repeatable)")
	fs.Var(&caches, "cache", "declare a cache: tenant/namespace/name (repeatable; with -strict the only caches served)")
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintln(out, "usage: broker [FLAGS]   (go run ./examples/broker [FLAGS])")
		fmt.Fprintln(out, "flags:")
		fs.PrintDefaults()
		fmt.Fprint(out, brokerEnvHelp)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	// Every flag is checked before anything listens: a typo costs no port.
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (every setting is a flag; see -h)", fs.Arg(0))
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	if err := checkFlags(*shards, *retain, *retainBytes, *queue, *queueMax, *maxSubs, *window, *drain); err != nil {
		return err
	}
	if *maxHandshakes < 1 {
		return fmt.Errorf("-max-handshakes %d: want at least 1", *maxHandshakes)
	}
	if err := checkConnFlags(*maxConns, *maxStreams, *maxUnauth, *maxUnauthConns, *connInflight, *nodes); err != nil {
		return err
	}
	if err := checkAddrFlags(*statsAddr, *control); err != nil {
		return err
	}
	for _, spec := range streams { // syntax only; the defaults come later
		if _, _, err := ParseStreamSpec(spec, engine.StreamConfig{}); err != nil {
			return err
		}
	}
	var cacheRefs []engine.CacheRef
	for _, spec := range caches {
		r, err := ParseCacheSpec(spec)
		if err != nil {
			return err
		}
		cacheRefs = append(cacheRefs, r)
	}
	if *nodes > 0 {
		if err := checkClusterFlags(fs); err != nil {
			return err
		}
	}
	if (*certFile == "") != (*keyFile == "") {
		return errors.New("-cert and -key go together")
	}
	if *stateDir != "" && *certFile != "" {
		return errors.New("-state-dir and -cert/-key both name the certificate: use one")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
	rt, err := felix.ParseRouting(*routing)
	if err != nil {
		return fmt.Errorf("-routing: %w", err)
	}
	if *ring < 1 {
		return errors.New("-ring-records must be at least 1")
	}
	var toks map[string]server.Identity
	if *tokensFile != "" {
		toks, err = server.LoadTokens(*tokensFile)
	} else {
		toks, err = server.ParseTokens(*tokens)
	}
	if err != nil {
		return err
	}
	if len(toks) == 0 {
		return errors.New("no tokens configured")
	}
	// SSLKEYLOGFILE: off unless set, and loud when on.
	kl, klPath, err := conn.KeyLogFromEnv()
	if err != nil {
		return err
	}
	if kl != nil {
		defer kl.Close()
		log.Warn("TLS key log on: the secrets of every connection are appended to the file; anyone with it can decrypt the traffic (debugging only)",
			"env", conn.KeyLogEnv, "file", klPath)
	}
	defStream := engine.StreamConfig{Durable: !*ephemeral, Shards: uint32(*shards), Routing: rt,
		RetainRecords: *retain, RetainBytes: *retainBytes, RingRecords: *ring}
	if *nodes > 0 {
		o := clusterOptions{nodes: *nodes, host: *addr, streams: streams, caches: cacheRefs,
			engine: engine.Config{DefaultStream: defStream, NoAutoCreateStreams: *strict, NoAutoCreateCaches: *strict,
				DeclareHint: declareHint},
			certOut: *certOut, addrOut: *addrOut, fixtureOut: *fixtureOut, control: *control, log: log, keyLog: kl,
			stats: *statsAddr, statsLog: *statsLog}
		if operatorTokens(fs) {
			o.tokens = toks // no built-in token then
		}
		return runCluster(o)
	}
	if *fixtureOut != "" || *control != "" {
		return errors.New("-fixture-out and -control need -nodes")
	}
	cfg := server.Config{
		Addr:       *addr,
		Tokens:     toks,
		AuthLimits: *authLim,
		Engine: engine.Config{
			DefaultStream:        defStream,
			NoAutoCreateStreams:  *strict,
			NoAutoCreateCaches:   *strict,
			DeclareHint:          declareHint,
			DefaultQueueCapacity: *queue,
			MaxQueueCapacity:     *queueMax,
		},
		PublishWindow:           uint32(*window),
		MaxSubscriptionsPerConn: *maxSubs,
		NoPipeline:              *window == 0,
		DrainTimeout:            *drain,
		Logger:                  log,
		ConnLimits: func(c *conn.ServerConfig) {
			c.MaxConnections, c.MaxStreams, c.MaxUnauthStreams, c.MaxConnInFlightBytes = *maxConns, *maxStreams, *maxUnauth, *connInflight
			c.MaxHandshakes, c.RetryHandshakes, c.AnswerWriteTimeout = *maxHandshakes, *retryHandshakes, *answerTimeout
			c.MaxUnauthConns = *maxUnauthConns
		},
	}
	if *statsAddr != "" {
		// Prometheus metrics from conn's hooks, at /metrics beside /stats.
		col := metrics.New("")
		reg := prometheus.NewRegistry()
		reg.MustRegister(col)
		cfg.Hooks = col.Hooks()
		cfg.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if err := lims.apply(&cfg); err != nil {
		return err
	}
	if err := budgets.apply(&cfg); err != nil {
		return err
	}
	if err := recvWindow.apply(&cfg); err != nil {
		return err
	}
	if *certFile != "" || *keyFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return fmt.Errorf("certificate: %w", err)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	if *stateDir != "" {
		cert, created, err := stateCert(*stateDir)
		if err != nil {
			return err
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		if created {
			log.Info("certificate created: clients trust it across restarts", "dir", *stateDir)
		} else {
			log.Info("certificate reused", "dir", *stateDir)
		}
	}
	type declared struct {
		t  engine.Topic
		sc engine.StreamConfig
	}
	var decls []declared
	for _, spec := range streams {
		t, sc, err := ParseStreamSpec(spec, cfg.Engine.DefaultStream)
		if err != nil {
			return err
		}
		decls = append(decls, declared{t, sc})
	}
	if kl != nil {
		cfg.KeyLogWriter = kl
	}
	srv, err := server.Listen(cfg)
	if err != nil {
		return err
	}
	for _, d := range decls {
		t, sc := d.t, d.sc
		if err := srv.Engine().CreateStream(t, sc); err != nil {
			srv.Close()
			return err
		}
		logStreamDeclared(log, t, sc)
	}
	for _, r := range cacheRefs {
		srv.Engine().CreateCache(r)
		logCacheDeclared(log, r)
	}
	if *certOut != "" {
		if err := srv.WriteCertificate(*certOut); err != nil {
			srv.Close()
			return err
		}
		log.Info("certificate written", "path", *certOut)
	}
	// SIGINT and SIGTERM stop the broker gracefully from here on: before the
	// address file says it is ready (as the cluster mode does), so a signal
	// sent as soon as it appears is never taken by the default handler.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *addrOut != "" {
		// Written last: once it exists the certificate file is complete too.
		if err := server.WriteFileAtomic(*addrOut, []byte(srv.Addr().String()+"\n")); err != nil {
			srv.Close()
			return err
		}
	}
	if err := startStats(ctx, srv, log, *statsAddr, *statsLog); err != nil {
		srv.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve() }()
	select {
	case <-ctx.Done():
		log.Info("signal received: shutting down")
	case err := <-errc:
		srv.Close()
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), *drain+time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	return <-errc
}

// checkFlags refuses numeric flags outside their ranges.
func checkFlags(shards uint, retain int, retainBytes int64, queue, queueMax, maxSubs int, window uint, drain time.Duration) error {
	switch {
	case shards < 1 || shards > 1<<16:
		return fmt.Errorf("-shards %d: want 1..65536", shards)
	case retain < 0:
		return fmt.Errorf("-retain-records %d: want 0 (unbounded) or more", retain)
	case retainBytes < 0:
		return fmt.Errorf("-retain-bytes %d: want 0 (unbounded) or more", retainBytes)
	case queue < 1:
		return fmt.Errorf("-queue %d: want at least 1", queue)
	case queueMax < queue:
		return fmt.Errorf("-queue-max %d is below -queue %d", queueMax, queue)
	case maxSubs < 1:
		return fmt.Errorf("-max-subs-per-conn %d: want at least 1", maxSubs)
	case window > 1<<32-1:
		return fmt.Errorf("-publish-window %d: want at most %d", window, uint32(1<<32-1))
	case drain <= 0:
		return fmt.Errorf("-drain %s: want a positive duration", drain)
	}
	return nil
}

// brokerEnvHelp ends the broker's -h output.
const brokerEnvHelp = `environment:
  FELIX_TOKENS       default of -tokens
  FELIX_TOKENS_FILE  default of -tokens-file (takes precedence over -tokens)
  SSLKEYLOGFILE      append every connection's TLS secrets (NSS key log format) to this file, to decrypt captures; off when unset (warns)
`

// checkConnFlags refuses connection limits and node counts that the
// server would otherwise silently replace by their defaults.
func checkConnFlags(maxConns int, maxStreams int64, maxUnauth, maxUnauthConns int, inflight uint64, nodes int) error {
	switch {
	case maxConns < 1:
		return fmt.Errorf("-max-conns %d: want at least 1", maxConns)
	case maxStreams < 1:
		return fmt.Errorf("-max-streams %d: want at least 1", maxStreams)
	case maxUnauth < 1:
		return fmt.Errorf("-max-unauth-streams %d: want at least 1", maxUnauth)
	case maxUnauthConns == 0:
		return errors.New("-max-unauth-conns 0: want at least 1, or negative for no cap")
	case inflight < 1:
		return errors.New("-conn-inflight-bytes 0: want at least 1")
	case nodes < 0:
		return fmt.Errorf("-nodes %d: want 0 (one broker) or more", nodes)
	}
	return nil
}

// checkAddrFlags checks the HTTP addresses before anything listens: -stats
// must be a host:port, -control a loopback host:port.
func checkAddrFlags(stats, control string) error {
	if stats != "" {
		if _, err := net.ResolveTCPAddr("tcp", stats); err != nil {
			return fmt.Errorf("-stats: %w", err)
		}
	}
	if control != "" {
		a, err := net.ResolveTCPAddr("tcp", control)
		if err != nil {
			return fmt.Errorf("-control: %w", err)
		}
		if host, _, _ := net.SplitHostPort(control); host != "localhost" && !a.IP.IsLoopback() {
			return fmt.Errorf("-control %q: want a loopback address, e.g. 127.0.0.1:0", control)
		}
	}
	return nil
}

// clusterFlags are the flags a cluster (-nodes) uses; the cluster runs with
// its own defaults for every other setting.
var clusterFlags = map[string]bool{"nodes": true, "addr": true, "tokens": true, "tokens-file": true,
	"cert-out": true, "addr-out": true, "fixture-out": true, "control": true, "stream": true, "cache": true,
	"log-level": true, "stats": true, "stats-log": true,
	// what the standalone broker does with names never declared
	"strict": true, "ephemeral": true, "shards": true, "routing": true, "retain-records": true,
	"retain-bytes": true, "ring-records": true}

// checkClusterFlags refuses a flag set on the command line that -nodes
// would ignore.
func checkClusterFlags(fs *flag.FlagSet) error {
	var ignored []string
	fs.Visit(func(f *flag.Flag) {
		if !clusterFlags[f.Name] {
			ignored = append(ignored, "-"+f.Name)
		}
	})
	if len(ignored) > 0 {
		return fmt.Errorf("%s: not supported with -nodes (a cluster takes -addr's host, -tokens or -tokens-file, -stream, -cache, -strict and the flags of auto-created streams, -cert-out, -addr-out, -fixture-out, -control, -stats, -stats-log and -log-level)",
			strings.Join(ignored, ", "))
	}
	return nil
}

// operatorTokens reports whether the operator gave tokens (-tokens,
// -tokens-file or their environment variables) rather than leaving the
// demo default.
func operatorTokens(fs *flag.FlagSet) bool {
	given := os.Getenv("FELIX_TOKENS") != "" || os.Getenv("FELIX_TOKENS_FILE") != ""
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "tokens" || f.Name == "tokens-file" })
	return given
}

// ParseCacheSpec parses a -cache value: tenant/namespace/name.
func ParseCacheSpec(spec string) (engine.CacheRef, error) {
	names, err := splitName("-cache", spec, spec)
	if err != nil {
		return engine.CacheRef{}, err
	}
	return engine.CacheRef{Tenant: names[0], Namespace: names[1], Cache: names[2]}, nil
}

// splitName splits the tenant/namespace/name of a -stream or -cache value.
func splitName(flagName, spec, name string) ([]string, error) {
	names := strings.Split(name, "/")
	if len(names) != 3 || names[0] == "" || names[1] == "" || names[2] == "" {
		return nil, fmt.Errorf("%s %q: want tenant/namespace/name", flagName, spec)
	}
	return names, nil
}

func logStreamDeclared(log *slog.Logger, t engine.Topic, sc engine.StreamConfig) {
	log.Info("stream declared", "tenant", t.Tenant, "namespace", t.Namespace, "stream", t.Stream,
		"durable", sc.Durable, "shards", max(sc.Shards, 1), "routing", sc.Routing.String())
}

func logCacheDeclared(log *slog.Logger, r engine.CacheRef) {
	log.Info("cache declared", "tenant", r.Tenant, "namespace", r.Namespace, "cache", r.Cache)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// ParseStreamSpec parses a -stream value:
// tenant/namespace/name[:durable|:ephemeral][:shards=N][:routing=modulo|jump_hash]
// [:retain=N][:retain-bytes=N][:ring=N]. Unset options come from def.
func ParseStreamSpec(spec string, def engine.StreamConfig) (engine.Topic, engine.StreamConfig, error) {
	parts := strings.Split(spec, ":")
	names, err := splitName("-stream", spec, parts[0])
	if err != nil {
		return engine.Topic{}, def, err
	}
	t := engine.Topic{Tenant: names[0], Namespace: names[1], Stream: names[2]}
	c := def
	for _, opt := range parts[1:] {
		k, v, hasV := strings.Cut(opt, "=")
		if k == "routing" && hasV {
			r, err := felix.ParseRouting(v)
			if err != nil || v == "" {
				return t, c, fmt.Errorf("-stream %q: routing must be modulo or jump_hash", spec)
			}
			c.Routing = r
			continue
		}
		var n int64
		if hasV {
			if n, err = strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
				return t, c, fmt.Errorf("-stream %q: bad number in %q", spec, opt)
			}
		}
		switch {
		case k == "durable" && !hasV:
			c.Durable = true
		case k == "ephemeral" && !hasV:
			c.Durable = false
		case k == "shards" && hasV && n >= 1 && n <= 1<<16:
			c.Shards = uint32(n)
		case k == "retain" && hasV:
			c.RetainRecords = int(n)
		case k == "retain-bytes" && hasV:
			c.RetainBytes = n
		case k == "ring" && hasV && n >= 1:
			c.RingRecords = int(n)
		default:
			return t, c, fmt.Errorf("-stream %q: unknown option %q", spec, opt)
		}
	}
	return t, c, nil
}

// declareHint is the end of a -strict broker's not_found answer: the flag
// that declares the stream or cache.
func declareHint(cache bool, name string) string {
	if cache {
		return "the broker runs with -strict: start it with -cache " + name + " to declare it"
	}
	return "the broker runs with -strict: start it with -stream " + name + "[:shards=N] to declare it"
}
