package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"syscall"
	"time"

	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/examples/metrics"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type clusterOptions struct {
	nodes                                 int
	host                                  string                     // -addr: its host is used
	tokens                                map[string]server.Identity // the operator's; nil: the built-in ones
	streams                               []string
	caches                                []engine.CacheRef
	engine                                engine.Config // auto-creation and its stream defaults
	certOut, addrOut, fixtureOut, control string
	log                                   *slog.Logger
	keyLog                                io.Writer // SSLKEYLOGFILE, nil when off
	stats                                 string    // -stats address ("" = none)
	statsLog                              time.Duration
}

// runCluster serves a reference cluster until SIGINT or SIGTERM. The
// fixture file is written last, once every node, the interposer and the
// control endpoint serve: a suite polling for it finds a ready cluster.
func runCluster(o clusterOptions) error {
	host, _, err := net.SplitHostPort(o.host)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg := cluster.Config{Nodes: o.nodes, Host: host, Tokens: o.tokens, Engine: o.engine, Logger: o.log, KeyLogWriter: o.keyLog}
	var reg *prometheus.Registry
	if o.stats != "" {
		// Prometheus metrics from each node's conn hooks, every series
		// labelled with the node id (node="broker-0", ...): per node, not
		// aggregated, as the /stats document.
		reg = prometheus.NewRegistry()
		cfg.Hooks = func(_ int, id string) *conn.Hooks {
			col := metrics.New("")
			prometheus.WrapRegistererWith(prometheus.Labels{"node": id}, reg).MustRegister(col)
			return col.Hooks()
		}
	}
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	if o.stats != "" {
		ss, err := server.ServeStatsHandler(o.stats, c.StatsHandler(), promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if err != nil {
			return fmt.Errorf("-stats: %w", err)
		}
		defer ss.Close()
		o.log.Info("stats endpoint", "url", "http://"+ss.Addr().String()+"/stats", "metrics", "http://"+ss.Addr().String()+"/metrics")
	}
	if o.statsLog > 0 {
		go c.LogStats(ctx, o.statsLog)
	}
	for _, spec := range o.streams {
		t, sc, err := ParseStreamSpec(spec, c.Engine().Config().DefaultStream)
		if err != nil {
			return err
		}
		if err := c.CreateStream(t, sc); err != nil {
			return err
		}
		logStreamDeclared(o.log, t, sc)
	}
	for _, r := range o.caches {
		c.CreateCache(r)
		logCacheDeclared(o.log, r)
	}
	if o.control != "" {
		url, err := c.ServeControl(o.control)
		if err != nil {
			return err
		}
		o.log.Info("control endpoint", "url", url)
	}
	if o.certOut != "" {
		if err := server.WriteFileAtomic(o.certOut, c.CertificatePEM()); err != nil {
			return err
		}
	}
	if o.addrOut != "" {
		if err := server.WriteFileAtomic(o.addrOut, []byte(c.Addr(0)+"\n")); err != nil {
			return err
		}
	}
	if o.fixtureOut != "" {
		if err := c.WriteFixture(o.fixtureOut); err != nil {
			return err
		}
		o.log.Info("fixture written", "path", o.fixtureOut)
	}
	o.log.Info("cluster serving", "nodes", c.Addrs(), "link", c.Fixture().LinkAddr)
	<-ctx.Done()
	o.log.Info("signal received: shutting down")
	return c.Close()
}
