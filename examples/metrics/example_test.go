package metrics_test

import (
	"fmt"
	"net/http"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/examples/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Example registers a Collector, sets its hooks on a client and a server
// configuration and its notice observer on a cluster-aware client, and
// serves the metrics over HTTP (keep such an endpoint on loopback).
func Example() {
	col := metrics.New("felix")
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)

	cc := conn.Config{TenantID: "t1", Token: "secret", Hooks: col.Hooks()}
	broker := conn.ServerConfig{Hooks: col.Hooks()}
	// The cluster-aware client: the same hooks on every connection, and
	// its redirects, retries and resumes from its notices.
	_ = client.Config{Seeds: []string{"127.0.0.1:7443"}, Conn: cc, OnNotice: col.Notices()}
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	fmt.Println(cc.Hooks == broker.Hooks)
	// Output: true
}
