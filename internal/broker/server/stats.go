package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Snapshot is what the stats endpoint serves: the counters, the gauges of
// what the broker holds, and the process's memory.
type Snapshot struct {
	Stats
	// OpenConnections is the number of client connections open now.
	OpenConnections int64
	// Streams and Caches count what the engine holds.
	Streams, Caches int
	// QueuedBytes is held by subscriber queues, LogBytes by stream logs
	// and rings, CacheLogBytes by cache write logs, CacheLiveBytes by live
	// cache keys, values and counters.
	QueuedBytes, LogBytes, CacheLogBytes, CacheLiveBytes int64
	// ThrottledAddrs counts the source addresses the auth throttle
	// remembers (recent failures, at most AuthLimits.MaxAddrs);
	// ThrottledConns the open connections holding throttle state (every
	// connection that sent an auth).
	ThrottledAddrs, ThrottledConns int
	// Delivery is what the delivery workers are doing (DeliveryStats).
	Delivery DeliveryStats
	// Goroutines and the Go heap figures (runtime.MemStats).
	Goroutines                         int
	HeapAlloc, HeapInuse, HeapSys, Sys uint64
	NumGC                              uint32
	Time                               time.Time
}

// Snapshot returns the broker's figures now. It reads runtime.MemStats,
// which briefly stops the world: call it at a human pace.
func (s *Server) Snapshot() Snapshot {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	snap := Snapshot{Stats: s.Stats(), OpenConnections: s.st.openConns.Load(),
		QueuedBytes: s.eng.QueuedBytes(), LogBytes: s.eng.LogBytes(),
		Goroutines: runtime.NumGoroutine(), HeapAlloc: ms.HeapAlloc, HeapInuse: ms.HeapInuse,
		HeapSys: ms.HeapSys, Sys: ms.Sys, NumGC: ms.NumGC, Time: time.Now().UTC()}
	snap.Streams, snap.Caches = s.eng.Counts()
	snap.CacheLogBytes, snap.CacheLiveBytes = s.eng.CacheBytes()
	snap.ThrottledAddrs, snap.ThrottledConns = s.auth.tracked()
	snap.Delivery = s.DeliveryStats()
	return snap
}

// StatsHandler serves Snapshot as JSON (GET only).
func (s *Server) StatsHandler() http.Handler {
	return JSONHandler(func() any { return s.Snapshot() })
}

// JSONHandler serves what f returns, as JSON, to GET and HEAD requests
// (others get 405): the stats endpoint's handler, for a snapshot of any
// shape (a cluster's, per node).
func JSONHandler(f func() any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(f())
	})
}

// StatsServer is a running stats endpoint.
type StatsServer struct {
	ln  net.Listener
	srv *http.Server
	err chan error
}

// ServeStats serves the stats endpoint (GET /stats, also at /, and
// Config.Metrics at /metrics when set) on addr,
// for example "127.0.0.1:0". Keep it on loopback: it tells anyone who can
// reach it what the broker holds.
func (s *Server) ServeStats(addr string) (*StatsServer, error) {
	return ServeStatsHandler(addr, s.StatsHandler(), s.cfg.Metrics)
}

// ServeStatsHandler serves a stats endpoint on addr as ServeStats does:
// stats at /stats and /, metrics (when not nil) at /metrics. A cluster
// serves its per-node figures with it.
func ServeStatsHandler(addr string, stats, metrics http.Handler) (*StatsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/stats", stats)
	mux.Handle("/{$}", stats)
	if metrics != nil {
		mux.Handle("/metrics", metrics)
	}
	ss := &StatsServer{ln: ln, err: make(chan error, 1), srv: NewHTTPServer(GuardHTTP(mux))}
	go func() {
		err := ss.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		ss.err <- err
	}()
	return ss, nil
}

// HTTP timeouts of the broker's HTTP endpoints (stats, metrics, cluster
// control): a client that sends its header slowly, reads slowly or keeps
// an idle keep-alive connection is cut after these.
const (
	HTTPReadHeaderTimeout = 5 * time.Second
	HTTPReadTimeout       = 10 * time.Second
	HTTPWriteTimeout      = 30 * time.Second
	HTTPIdleTimeout       = 30 * time.Second
	HTTPMaxHeaderBytes    = 8 << 10
)

// httpIdleTimeout is HTTPIdleTimeout, shortened by tests.
var httpIdleTimeout = HTTPIdleTimeout

// NewHTTPServer returns an HTTP server for h with the broker's HTTP
// timeouts and header limit: every HTTP endpoint of the broker is served
// by one (issue 35: without an idle timeout, 2,000 idle keep-alive
// connections stayed open).
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: HTTPReadHeaderTimeout, ReadTimeout: HTTPReadTimeout,
		WriteTimeout: HTTPWriteTimeout, IdleTimeout: httpIdleTimeout, MaxHeaderBytes: HTTPMaxHeaderBytes}
}

// GuardHTTP refuses, with 403, the requests a web page can make a browser
// send: any request carrying an Origin header for another host, or a
// Sec-Fetch-Site other than none (typed in the address bar) or
// same-origin, and any request whose Host is a name other than localhost
// (an IP literal is accepted). A page on an attacker's site cannot read
// the endpoint, even after rebinding its DNS name to the broker's address
// (its requests then carry the attacker's name as Host).
func GuardHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := foreignRequest(r); why != "" {
			http.Error(w, "refused: "+why, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// foreignRequest says why r comes from a web page or a foreign name, or ""
// when it does not.
func foreignRequest(r *http.Request) string {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err != nil && !strings.EqualFold(host, "localhost") {
		return "Host " + strconv.Quote(r.Host) + " is a name other than localhost (use the address: DNS rebinding protection)"
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "none", "same-origin":
	default:
		return "a cross-site request (Sec-Fetch-Site)"
	}
	if o, ok := r.Header["Origin"]; ok {
		u, err := url.Parse(strings.Join(o, ""))
		if err != nil || u.Host != r.Host {
			return "a request from another origin (Origin)"
		}
	}
	return ""
}

// Addr returns the endpoint's address.
func (ss *StatsServer) Addr() net.Addr { return ss.ln.Addr() }

// Close stops the endpoint and waits for it.
func (ss *StatsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := ss.srv.Shutdown(ctx)
	return errors.Join(err, <-ss.err)
}

// LogStats logs one line of the broker's figures at info level every
// interval until ctx ends.
func (s *Server) LogStats(ctx context.Context, every time.Duration) {
	Every(ctx, every, func() { s.LogSnapshot(ctx) })
}

// Every calls f once every interval (the first time after one interval)
// until ctx ends.
func Every(ctx context.Context, every time.Duration, f func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f()
	}
}

// LogSnapshot logs one line of the broker's figures ("broker stats") at
// info level, with the server's logger (a cluster node's names the node).
func (s *Server) LogSnapshot(ctx context.Context) {
	n := s.Snapshot()
	s.log.LogAttrs(ctx, slog.LevelInfo, "broker stats",
		slog.Int64("open_connections", n.OpenConnections), slog.Int("streams", n.Streams), slog.Int("caches", n.Caches),
		slog.Uint64("subscriptions", n.Engine.ActiveSubscriptions), slog.Int64("queued_bytes", n.QueuedBytes),
		slog.Int64("log_bytes", n.LogBytes), slog.Int64("cache_log_bytes", n.CacheLogBytes),
		slog.Int64("cache_live_bytes", n.CacheLiveBytes), slog.Uint64("producer_states", n.Engine.ProducerStates),
		slog.Uint64("auth_failures", n.AuthFailures), slog.Uint64("auth_throttled", n.AuthThrottled),
		slog.Int("goroutines", n.Goroutines), slog.Uint64("heap_alloc", n.HeapAlloc), slog.Uint64("sys", n.Sys))
}
