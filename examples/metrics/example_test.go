package metrics_test

import (
	"fmt"
	"net/http"

	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/examples/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Example registers a Collector, sets its hooks on a client and a server
// configuration, and serves the metrics over HTTP (keep such an endpoint
// on loopback).
func Example() {
	col := metrics.New("felix")
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)

	client := conn.Config{TenantID: "t1", Token: "secret", Hooks: col.Hooks()}
	broker := conn.ServerConfig{Hooks: col.Hooks()}
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	fmt.Println(client.Hooks == broker.Hooks)
	// Output: true
}
