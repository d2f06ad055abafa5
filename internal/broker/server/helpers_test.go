package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startBroker starts a broker on a free loopback port; it is shut down
// when the test ends.
func startBroker(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
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

func durableCfg() server.Config {
	c := server.Config{}
	c.Engine.DefaultStream.Durable = true
	return c
}

// dial connects a conn client with the demo credentials; cfg may adjust it.
func dial(t testing.TB, srv *server.Server, adjust func(*conn.Config)) *conn.Client {
	t.Helper()
	cfg := &conn.Config{TLS: &tls.Config{RootCAs: srv.CertPool()}, TenantID: server.DemoTenant, Token: server.DemoToken}
	if adjust != nil {
		adjust(cfg)
	}
	c, err := conn.Dial(ctxT(t), srv.Addr().String(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitFor polls cond until it holds. It fails the test only when the
// test's deadline comes first: no guess of how long a loaded machine takes.
func waitFor(t testing.TB, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	ctx := ctxT(t)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			require.Fail(t, "condition not met before the test deadline", msgAndArgs...)
		case <-tick.C:
		}
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	// Bounded by the test binary's -timeout only: the machine running the
	// tests may be heavily loaded, so no guess of how long calls take.
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Until(d)/10))
		}
	}
	t.Cleanup(cancel)
	return ctx
}

var topic = felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "s"}

// raw is a bare QUIC client that writes frames by hand.
type raw struct {
	qc *quic.Conn
}

func dialRaw(t testing.TB, srv *server.Server) *raw {
	t.Helper()
	qc, err := quic.DialAddr(ctxT(t), srv.Addr().String(),
		&tls.Config{RootCAs: srv.CertPool(), ServerName: "localhost"}, &quic.Config{MaxIdleTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = qc.CloseWithError(0, "") })
	return &raw{qc: qc}
}

// rawStream is a raw bidi stream with a frame reader.
type rawStream struct {
	t testing.TB
	s *quic.Stream
	r *felix.Reader
}

// stream opens a bidi stream and authenticates it offering flags and
// features.
func (c *raw) stream(t testing.TB, flags felix.Flags, feats felix.Features) *rawStream {
	t.Helper()
	return c.streamAs(t, server.DemoTenant, server.DemoToken, flags, feats)
}

// streamAs is stream with another tenant's credentials.
func (c *raw) streamAs(t testing.TB, tenant, token string, flags felix.Flags, feats felix.Features) *rawStream {
	t.Helper()
	s, err := c.qc.OpenStreamSync(ctxT(t))
	require.NoError(t, err)
	rs := &rawStream{t: t, s: s, r: felix.NewReader(s)}
	rs.r.SetLenientFlags(true)
	a := &felix.Auth{TenantID: tenant, Token: token,
		ClientFlags: felix.Some(uint16(flags)), ClientFeatures: felix.Some(uint32(feats))}
	rs.send(a)
	m := rs.recv()
	require.IsType(t, &felix.AuthOK{}, m)
	return rs
}

func (s *rawStream) send(m felix.Message) {
	s.t.Helper()
	b, err := felix.AppendMessageFrame(nil, m)
	require.NoError(s.t, err)
	s.write(b)
}

func (s *rawStream) write(b []byte) {
	s.t.Helper()
	_, err := s.s.Write(b)
	require.NoError(s.t, err)
}

func (s *rawStream) frame() (felix.Frame, error) {
	d, _ := ctxT(s.t).Deadline() // zero (none) without -timeout
	_ = s.s.SetReadDeadline(d)
	return s.r.ReadFrame()
}

func (s *rawStream) recv() felix.Message {
	s.t.Helper()
	f, err := s.frame()
	require.NoError(s.t, err)
	require.Equal(s.t, felix.Flags(0), f.Flags)
	m, err := felix.DecodeMessage(f.Payload)
	require.NoError(s.t, err)
	return m
}

// ended checks that the broker ended the stream (clean FIN or reset)
// without sending another frame.
func (s *rawStream) ended() {
	s.t.Helper()
	f, err := s.frame()
	require.Error(s.t, err, "unexpected frame %v", f.Flags)
	var se *quic.StreamError
	if err != io.EOF {
		require.ErrorAs(s.t, err, &se)
	}
}

var seq atomic.Uint64

// nextID returns a fresh request id.
func nextID() uint64 { return seq.Add(1) }

func engineStrict() (c engineConfig) {
	c.NoAutoCreateStreams = true
	c.NoAutoCreateCaches = true
	return c
}

type engineConfig = engine.Config

func shardForKey(k []byte, n uint32) uint32 { return felix.RoutingModulo.Shard(k, n) }

func engineTopic() engine.Topic {
	return engine.Topic{Tenant: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream}
}
