package metrics_test

import (
	"crypto/tls"
	"io"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/examples/metrics"
	"github.com/flxproto/felix/internal/broker/server"
)

// startBroker starts the reference broker with the server collector's
// hooks; it is shut down when the test ends.
func startBroker(t *testing.T, hooks *conn.Hooks) *server.Server {
	t.Helper()
	cfg := server.Config{Addr: "127.0.0.1:0", Hooks: hooks}
	cfg.Engine.DefaultStream.Durable = true
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

func TestCollectorOverQUIC(t *testing.T) {
	srvCol, cliCol := metrics.New(""), metrics.New("")
	reg := prometheus.NewRegistry()
	reg.MustRegister(srvCol)
	cliReg := prometheus.NewRegistry()
	cliReg.MustRegister(cliCol)
	srv := startBroker(t, srvCol.Hooks())
	ctx := t.Context()
	cfg := &conn.Config{TLS: &tls.Config{RootCAs: srv.CertPool()}, TenantID: server.DemoTenant, Token: server.DemoToken, Hooks: cliCol.Hooks()}
	c, err := conn.Dial(ctx, srv.Addr().String(), cfg)
	require.NoError(t, err)
	topic := felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "s"}
	for range 3 {
		_, err := c.PublishBatch(ctx, topic, [][]byte{[]byte("a"), []byte("b")}, conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	_, err = c.Publish(ctx, topic, []byte("c"), conn.PublishOptions{NoAck: true})
	require.NoError(t, err)
	sub, err := c.Subscribe(ctx, topic, conn.SubscribeOptions{Start: felix.StartAt(0)})
	require.NoError(t, err)
	for range 7 {
		_, err := sub.Next(ctx)
		require.NoError(t, err)
	}
	sub.Close()
	bad := *cfg
	bad.Token, bad.Hooks = "wrong", cliCol.Hooks()
	_, err = conn.Dial(ctx, srv.Addr().String(), &bad)
	require.ErrorIs(t, err, felix.ErrAuthRefused)
	require.NoError(t, c.Close())

	// Client side: every publish and answer counted.
	cli := gather(t, cliReg)
	require.Contains(t, cli, `felix_publishes_sent_total{acked="true"} 3`)
	require.Contains(t, cli, `felix_publishes_sent_total{acked="false"} 1`)
	require.Contains(t, cli, `felix_publish_acks_total{outcome="ok"} 3`)
	require.Contains(t, cli, `felix_publish_ack_latency_seconds_count 3`)
	require.Contains(t, cli, `felix_frames_total{direction="written",layout="binary_acked_publish_batch",side="client"} 3`)
	require.Contains(t, cli, `felix_frames_total{direction="read",layout="binary_publish_ack",side="client"} 3`)
	require.Contains(t, cli, `felix_streams_refused_total{reason="unauthenticated",side="client"} 1`)
	require.Contains(t, cli, `felix_connections_opened_total{side="client"} 2`)
	require.Contains(t, cli, `felix_connections_closed_total{reason="local",side="client"} 2`)
	require.Contains(t, cli, `felix_connections_open{side="client"} 0`)

	// Server side: the same frames seen from the broker.
	s := gather(t, reg)
	require.Contains(t, s, `felix_frames_total{direction="read",layout="binary_acked_publish_batch",side="server"} 3`)
	require.Contains(t, s, `felix_frames_total{direction="written",layout="binary_publish_ack",side="server"} 3`)
	require.Contains(t, s, `felix_streams_refused_total{reason="unauthenticated",side="server"} 1`)
	require.Contains(t, s, `felix_connections_opened_total{side="server"} 2`)
	require.Equal(t, 2.0, sum(t, reg, "felix_connections_opened_total"))
}

// gather returns the registry's text exposition, as /metrics serves it.
func gather(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	return string(b)
}

// sum adds up the values of a counter or gauge family of reg.
func sum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var total float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return total
}

// A peer choosing a fresh application close code for every connection
// must not create a series per code: codes outside the protocol's share one
// label value, and the counts stay exact.
func TestCloseCodesDoNotGrowSeries(t *testing.T) {
	col := metrics.New("")
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	opened, closed := make(chan struct{}, 256), make(chan struct{}, 256)
	hooks := *col.Hooks()
	innerOpened, innerClosed := hooks.ConnOpened, hooks.ConnClosed
	hooks.ConnOpened = func(e conn.ConnInfo) {
		innerOpened(e)
		opened <- struct{}{}
	}
	hooks.ConnClosed = func(e conn.ConnInfo) {
		innerClosed(e)
		closed <- struct{}{}
	}
	srv := startBroker(t, &hooks)
	ctx := t.Context()
	const n = 64
	for code := range quic.ApplicationErrorCode(n) {
		qc, err := quic.DialAddr(ctx, srv.Addr().String(), &tls.Config{RootCAs: srv.CertPool(), ServerName: "localhost", NextProtos: []string{"felix/1"}}, nil)
		require.NoError(t, err)
		// Accepted by the broker first (a close racing the handshake's
		// end would never be); 2.. are not protocol codes.
		<-opened
		require.NoError(t, qc.CloseWithError(code+2, "chosen by the peer"))
		<-closed
	}
	// A legitimate client is still served and its own close (code 0) keeps its name.
	c, err := conn.Dial(ctx, srv.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: srv.CertPool()}, TenantID: server.DemoTenant, Token: server.DemoToken})
	require.NoError(t, err)
	_, err = c.Publish(ctx, felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "s"}, []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	<-opened
	require.NoError(t, c.Close())
	<-closed

	s := gather(t, reg)
	require.Contains(t, s, `felix_connections_closed_total{reason="application_other",side="server"} 64`)
	require.Contains(t, s, `felix_connections_closed_total{reason="application_0",side="server"} 1`)
	require.Equal(t, 2, series(t, reg, "felix_connections_closed_total"), "one series per bucket, not per code")
}

func TestLabelsAreBounded(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&quic.ApplicationError{Remote: true, ErrorCode: 0}, "application_0"},
		{&quic.ApplicationError{Remote: true, ErrorCode: 1}, "application_1"},
		{&quic.ApplicationError{Remote: true, ErrorCode: 2}, "application_other"},
		{&quic.ApplicationError{Remote: true, ErrorCode: 1 << 61}, "application_other"},
		{&quic.ApplicationError{Remote: false, ErrorCode: 77}, "local"},
	} {
		require.Equal(t, tc.want, metrics.CloseReason(tc.err), "%v", tc.err)
	}
	for _, tc := range []struct {
		code felix.ErrorCode
		want string
	}{
		{felix.CodeLimitExceeded, "limit_exceeded"},
		{felix.CodeRevoked, "revoked"},
		{"made_up_by_the_broker_12345", "other"},
	} {
		require.Equal(t, tc.want, metrics.RefusalReason(&felix.BrokerError{Type: "error", Code: tc.code}))
	}
	// Ack outcomes carry the broker's code: unknown ones share "other".
	col := metrics.New("")
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	for i := range 100 {
		col.Hooks().PublishAcked(conn.PublishInfo{Acked: true, Outcome: "made_up_" + strconv.Itoa(i)})
	}
	for _, o := range []string{"ok", "error", "failed", string(felix.CodeOverloaded)} {
		col.Hooks().PublishAcked(conn.PublishInfo{Acked: true, Outcome: o})
	}
	s := gather(t, reg)
	require.Contains(t, s, `felix_publish_acks_total{outcome="other"} 100`)
	require.Contains(t, s, `felix_publish_acks_total{outcome="overloaded"} 1`)
	require.Equal(t, 5, series(t, reg, "felix_publish_acks_total"))
}

// series counts the label sets of a family of reg.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.Metric)
		}
	}
	return 0
}

// Notices feeds the redirect, retry and resume counters from a client's
// notices (one each per notice of its kind) and ignores the other kinds;
// joined with another observer, both see every notice.
func TestNoticesFeedClientCounters(t *testing.T) {
	col := metrics.New("felix")
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	var other int
	obs := client.JoinNotices(col.Notices(), func(client.Notice) { other++ })
	for _, k := range []client.NoticeKind{client.NoticeRedirect, client.NoticeRetry, client.NoticeRetry,
		client.NoticeResumed, client.NoticeResumed, client.NoticeResumed, client.NoticeConnected, client.NoticeDropped} {
		obs(client.Notice{Kind: k})
	}
	require.Equal(t, 1.0, sum(t, reg, "felix_redirects_total"))
	require.Equal(t, 2.0, sum(t, reg, "felix_retries_total"))
	require.Equal(t, 3.0, sum(t, reg, "felix_resumes_total"))
	require.Equal(t, 8, other)
}
