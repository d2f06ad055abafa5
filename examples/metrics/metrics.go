// Package metrics adapts the observability hooks of each layer to the
// Prometheus Go client (github.com/prometheus/client_golang), the metrics
// library most Go services already expose: a Collector is registered once,
// its Hooks are set on a conn.Config, a conn.ServerConfig or the Conn of a
// client.Config (conn.JoinHooks attaches them beside other observers), and
// its Notices on a client.Config's OnNotice (client.JoinNotices likewise),
// for the cluster-aware client's redirects, retries and resumes.
//
// Every series is created when the Collector is built, and the hooks index
// them by side, direction and layout, so the per-frame and per-publish
// hooks only add to a counter (no label lookup, no allocation).
//
// Metric names (prefix configurable, "felix" by default; side is client or
// server):
//
//	felix_connections_opened_total{side}
//	felix_connections_closed_total{side,reason}
//	felix_connections_open{side}
//	felix_streams_authenticated_total{side}
//	felix_streams_refused_total{side,reason}
//	felix_frames_total{side,direction,layout}
//	felix_frame_bytes_total{side,direction,layout}
//	felix_publishes_sent_total{acked}
//	felix_publish_acks_total{outcome}
//	felix_publish_ack_latency_seconds (histogram)
//	felix_subscriptions_lagged_total
//	felix_redirects_total, felix_retries_total, felix_resumes_total (Notices)
package metrics

import (
	"context"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
)

// layouts are the frame layouts with a series of their own.
var layouts = [...]felix.Layout{felix.LayoutJSON, felix.LayoutPublishBatch, felix.LayoutAckedPublishBatch,
	felix.LayoutPublishAck, felix.LayoutEventBatch, felix.LayoutUnknown}

const nSides = 3 // indexed by conn.Side (0 unused)

// Collector holds the metrics fed by its Hooks. It is a
// prometheus.Collector: register it once (MustRegister).
type Collector struct {
	opened, closed     *prometheus.CounterVec
	open               *prometheus.GaugeVec
	authed, refused    *prometheus.CounterVec
	frames, frameBytes *prometheus.CounterVec
	sent, acks         *prometheus.CounterVec
	latency            prometheus.Histogram
	lagged             prometheus.Counter
	redirects          prometheus.Counter
	retries            prometheus.Counter
	resumes            prometheus.Counter

	// Pre-resolved series of the hot hooks: [side][read=0/written=1][layout].
	fcount [nSides][2][len(layouts)]prometheus.Counter
	fbytes [nSides][2][len(layouts)]prometheus.Counter
	sentBy [2]prometheus.Counter // [acked]
	openBy [nSides]prometheus.Gauge
	ackOK  prometheus.Counter

	hooksOnce sync.Once
	hooks     *conn.Hooks
}

// New returns a Collector whose metric names start with prefix ("" means
// "felix").
func New(prefix string) *Collector {
	if prefix == "" {
		prefix = "felix"
	}
	cv := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: prefix, Name: name, Help: help}, labels)
	}
	c := &Collector{
		opened:     cv("connections_opened_total", "Connections that finished their QUIC handshake.", "side"),
		closed:     cv("connections_closed_total", "Connections that ended, by reason.", "side", "reason"),
		open:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: prefix, Name: "connections_open", Help: "Connections open now."}, []string{"side"}),
		authed:     cv("streams_authenticated_total", "Streams whose auth was accepted.", "side"),
		refused:    cv("streams_refused_total", "Streams refused or ended before authenticating, by reason.", "side", "reason"),
		frames:     cv("frames_total", "Frames read or written, by layout.", "side", "direction", "layout"),
		frameBytes: cv("frame_bytes_total", "Bytes of frames read or written (headers included), by layout.", "side", "direction", "layout"),
		sent:       cv("publishes_sent_total", "Publish batches written.", "acked"),
		acks:       cv("publish_acks_total", "Answers to acknowledged publishes, by outcome (ok, an error code, error, failed).", "outcome"),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: prefix, Name: "publish_ack_latency_seconds",
			Help: "Time from writing an acknowledged publish to its answer.", Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)}),
		lagged:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: prefix, Name: "subscriptions_lagged_total", Help: "Subscriptions and cache watches ended by lag."}),
		redirects: prometheus.NewCounter(prometheus.CounterOpts{Namespace: prefix, Name: "redirects_total", Help: "Requests redirected to another broker."}),
		retries:   prometheus.NewCounter(prometheus.CounterOpts{Namespace: prefix, Name: "retries_total", Help: "Calls retried after a retryable failure."}),
		resumes:   prometheus.NewCounter(prometheus.CounterOpts{Namespace: prefix, Name: "resumes_total", Help: "Subscriptions and watches resumed."}),
	}
	for _, side := range []conn.Side{conn.SideClient, conn.SideServer} {
		c.openBy[side] = c.open.WithLabelValues(side.String())
		for d, dir := range []string{"read", "written"} {
			for i, l := range layouts {
				c.fcount[side][d][i] = c.frames.WithLabelValues(side.String(), dir, l.String())
				c.fbytes[side][d][i] = c.frameBytes.WithLabelValues(side.String(), dir, l.String())
			}
		}
	}
	c.sentBy[0], c.sentBy[1] = c.sent.WithLabelValues("false"), c.sent.WithLabelValues("true")
	c.ackOK = c.acks.WithLabelValues("ok")
	return c
}

func (c *Collector) all() []prometheus.Collector {
	return []prometheus.Collector{c.opened, c.closed, c.open, c.authed, c.refused, c.frames, c.frameBytes,
		c.sent, c.acks, c.latency, c.lagged, c.redirects, c.retries, c.resumes}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.all() {
		m.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.all() {
		m.Collect(ch)
	}
}

// Hooks returns the hooks that feed c (the same value on every call). One
// Collector may observe clients and servers at once.
func (c *Collector) Hooks() *conn.Hooks {
	c.hooksOnce.Do(func() {
		c.hooks = &conn.Hooks{
			ConnOpened: func(e conn.ConnInfo) {
				c.opened.WithLabelValues(e.Side.String()).Inc()
				c.gauge(e.Side).Inc()
			},
			ConnClosed: func(e conn.ConnInfo) {
				c.closed.WithLabelValues(e.Side.String(), CloseReason(e.Err)).Inc()
				c.gauge(e.Side).Dec()
			},
			StreamAuthenticated: func(e conn.StreamInfo) { c.authed.WithLabelValues(e.Side.String()).Inc() },
			StreamRefused:       func(e conn.StreamInfo) { c.refused.WithLabelValues(e.Side.String(), RefusalReason(e.Err)).Inc() },
			FrameRead:           func(e conn.FrameInfo) { c.frame(0, e) },
			FrameWritten:        func(e conn.FrameInfo) { c.frame(1, e) },
			PublishSent: func(e conn.PublishInfo) {
				if e.Acked {
					c.sentBy[1].Inc()
				} else {
					c.sentBy[0].Inc()
				}
			},
			PublishAcked: func(e conn.PublishInfo) {
				if e.Outcome == "ok" {
					c.ackOK.Inc()
				} else {
					c.acks.WithLabelValues(ackLabel(e.Outcome)).Inc()
				}
				c.latency.Observe(e.Latency.Seconds())
			},
			SubscriptionLagged: func(conn.LagInfo) { c.lagged.Inc() },
		}
	})
	return c.hooks
}

// Notices returns the observer of a cluster-aware client's own decisions
// that feeds c's redirect, retry and resume counters; set it as (or join
// it into) client.Config.OnNotice. Other notice kinds are ignored.
func (c *Collector) Notices() func(client.Notice) {
	return func(ev client.Notice) {
		switch ev.Kind {
		case client.NoticeRedirect:
			c.redirects.Inc()
		case client.NoticeRetry:
			c.retries.Inc()
		case client.NoticeResumed:
			c.resumes.Inc()
		}
	}
}

func (c *Collector) gauge(s conn.Side) prometheus.Gauge {
	if int(s) < nSides && c.openBy[s] != nil {
		return c.openBy[s]
	}
	return c.open.WithLabelValues(s.String())
}

func (c *Collector) frame(dir int, e conn.FrameInfo) {
	i := int(e.Layout)
	if i >= len(layouts) || int(e.Side) >= nSides || c.fcount[e.Side][dir][i] == nil {
		i = len(layouts) - 1 // unknown
	}
	if int(e.Side) >= nSides || c.fcount[e.Side][dir][i] == nil {
		return
	}
	c.fcount[e.Side][dir][i].Inc()
	c.fbytes[e.Side][dir][i].Add(float64(e.Bytes))
}

// Every label value is taken from a fixed set, never copied from what a
// peer sent: a peer's close code, error code or refusal code outside the
// protocol's tables is counted under one bucket ("application_other",
// "other"), so a hostile peer cannot grow the number of series (each costs
// about a kilobyte for as long as the process runs).

// CloseReason names why a connection closed, with few distinct values (a
// label): "local" (closed by this side), "application_<code>" for the
// application codes the protocol defines (application_0 for a shutdown,
// application_1 for an auth timeout, docs/transport.md §1),
// "application_other" for any other code a peer chose, "idle_timeout",
// "handshake_timeout", "transport_error", "stateless_reset" or "other".
func CloseReason(err error) string {
	var app *quic.ApplicationError
	var idle *quic.IdleTimeoutError
	var hs *quic.HandshakeTimeoutError
	var tr *quic.TransportError
	var sr *quic.StatelessResetError
	switch {
	case err == nil:
		return "other"
	case errors.As(err, &app):
		if !app.Remote {
			return "local"
		}
		switch app.ErrorCode {
		case conn.CloseShuttingDown:
			return "application_0"
		case conn.CloseAuthTimeout:
			return "application_1"
		}
		return "application_other"
	case errors.As(err, &idle):
		return "idle_timeout"
	case errors.As(err, &hs):
		return "handshake_timeout"
	case errors.As(err, &sr):
		return "stateless_reset"
	case errors.As(err, &tr):
		return "transport_error"
	case errors.Is(err, context.Canceled):
		return "local"
	}
	return "other"
}

// RefusalReason names why a stream was refused: the error code of an
// answered refusal (one of the protocol's codes, "other" for a code
// outside its table), "unauthenticated" without one, or "ended" for a
// stream that ended or was reset before authenticating.
func RefusalReason(err error) string {
	var be *felix.BrokerError
	switch {
	case errors.As(err, &be) && be.Code != "":
		return codeLabel(be.Code)
	case errors.As(err, &be):
		return "unauthenticated"
	case errors.Is(err, conn.ErrStreamEnded):
		return "ended"
	}
	return "reset"
}

// codeLabel is an error code as a label value: the code when the
// protocol's table has it, else "other".
func codeLabel(c felix.ErrorCode) string {
	if c.Known() {
		return string(c)
	}
	return "other"
}

// ackLabel is the label of a PublishInfo.Outcome: "ok", "error",
// "failed", a protocol error code, or "other" for a code a broker chose
// outside the protocol's table.
func ackLabel(outcome string) string {
	switch outcome {
	case "ok", "error", "failed":
		return outcome
	}
	return codeLabel(felix.ErrorCode(outcome))
}
