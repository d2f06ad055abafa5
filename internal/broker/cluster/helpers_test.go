package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start starts a cluster closed when the test ends.
func start(t testing.TB, cfg cluster.Config) *cluster.Cluster {
	t.Helper()
	c, err := cluster.Start(ctxT(t), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Until(d)/10))
		}
	}
	t.Cleanup(cancel)
	return ctx
}

// dial connects a conn client to addr with the fixture's credentials.
func dial(t testing.TB, c *cluster.Cluster, addr string, adjust func(*conn.Config)) *conn.Client {
	t.Helper()
	f := c.Fixture()
	cfg := &conn.Config{TLS: c.TLS(), TenantID: f.TenantID, Token: f.Token}
	if adjust != nil {
		adjust(cfg)
	}
	cl, err := conn.Dial(ctxT(t), addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func topic(c *cluster.Cluster, stream string) felix.Topic {
	f := c.Fixture()
	return felix.Topic{TenantID: f.TenantID, Namespace: f.Namespace, Stream: stream}
}

// raw is a bare QUIC connection speaking frames by hand.
type raw struct {
	t  testing.TB
	qc *quic.Conn
	c  *cluster.Cluster
}

func dialRaw(t testing.TB, c *cluster.Cluster, addr string) *raw {
	t.Helper()
	qc, err := quic.DialAddr(ctxT(t), addr, c.TLS(), &quic.Config{MaxIdleTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = qc.CloseWithError(0, "") })
	return &raw{t: t, qc: qc, c: c}
}

type rawStream struct {
	t  testing.TB
	s  *quic.Stream
	r  *felix.Reader
	ok *felix.AuthOK
}

// stream opens a bidi stream authenticated with flags and features.
func (c *raw) stream(flags felix.Flags, feats felix.Features) *rawStream {
	c.t.Helper()
	s, err := c.qc.OpenStreamSync(ctxT(c.t))
	require.NoError(c.t, err)
	rs := &rawStream{t: c.t, s: s, r: felix.NewReader(s)}
	f := c.c.Fixture()
	rs.send(&felix.Auth{TenantID: f.TenantID, Token: f.Token,
		ClientFlags: felix.Some(uint16(flags)), ClientFeatures: felix.Some(uint32(feats))})
	m := rs.recv()
	require.IsType(c.t, &felix.AuthOK{}, m)
	rs.ok = m.(*felix.AuthOK)
	return rs
}

func (s *rawStream) send(m felix.Message) {
	s.t.Helper()
	b, err := felix.AppendMessageFrame(nil, m)
	require.NoError(s.t, err)
	_, err = s.s.Write(b)
	require.NoError(s.t, err)
}

func (s *rawStream) frame() felix.Frame {
	s.t.Helper()
	d, _ := ctxT(s.t).Deadline()
	_ = s.s.SetReadDeadline(d)
	f, err := s.r.ReadFrame()
	require.NoError(s.t, err)
	return f
}

func (s *rawStream) recv() felix.Message {
	s.t.Helper()
	f := s.frame()
	require.Equal(s.t, felix.Flags(0), f.Flags)
	m, err := felix.DecodeMessage(f.Payload)
	require.NoError(s.t, err)
	return m
}

const allFeatures = felix.KnownFeatures

// waitFor polls cond until it holds (bounded by the test deadline only).
func waitFor(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	ctx := ctxT(t)
	for !cond() {
		select {
		case <-ctx.Done():
			require.Fail(t, "condition not met: "+msg)
		case <-time.After(time.Millisecond):
		}
	}
}

// nonOwner returns a node that does not own shard of stream.
func nonOwner(c *cluster.Cluster, stream string, shard uint32) int {
	o, _ := c.Owner(stream, shard)
	return (o + 1) % c.Nodes()
}

// shardOf is the durable stream's shard of key k (modulo routing, as the
// codec defines it).
func shardOf(k []byte) uint32 { return felix.RoutingModulo.Shard(k, cluster.DefaultDurableShards) }
