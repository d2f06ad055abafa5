package server_test

import (
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// checkServing proves the broker still serves a well-behaved client.
func checkServing(t *testing.T, c *conn.Client) {
	t.Helper()
	ctx := ctxT(t)
	_, err := c.Publish(ctx, topic, []byte("still here"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	ref := felix.CacheRef{TenantID: topic.TenantID, Namespace: "ns", Cache: "alive"}
	require.NoError(t, api.New(c).CachePut(ctx, ref, "k", []byte("v"), 0))
}

func ackedFrame(t *testing.T, rid uint64, payloads ...string) []byte {
	t.Helper()
	b := &felix.PublishBatch{AckMode: felix.AckPerBatch, RequestID: rid, TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream}
	for _, p := range payloads {
		b.Payloads = append(b.Payloads, []byte(p))
	}
	out, err := felix.AppendPublishBatch(nil, b)
	require.NoError(t, err)
	return out
}

func readAck(t *testing.T, s *rawStream) felix.PublishAck {
	t.Helper()
	f, err := s.frame()
	require.NoError(t, err)
	a, err := felix.DecodePublishAck(f.Flags, f.Payload)
	require.NoError(t, err)
	return a
}

const rawFlags = felix.FlagBinaryPublishBatch | felix.FlagBinaryEventBatchShared | felix.FlagBinaryPublishAcked |
	felix.FlagBinaryPublishAck | felix.FlagEventBatchOffsets | felix.FlagBinaryPublishAckCode | felix.FlagBinaryPublishAckOffset

func TestMalformedFrames(t *testing.T) {
	srv := startBroker(t, durableCfg())
	good := dial(t, srv, nil)
	r := dialRaw(t, srv)
	feats := felix.FeatureErrorCodes | felix.FeatureUnsupported

	t.Run("unknown flag bit: error, stream stays", func(t *testing.T) {
		s := r.stream(t, rawFlags, feats)
		s.write(felix.AppendHeader(nil, felix.Header{Flags: 0x8001, Length: 3}))
		s.write([]byte("abc"))
		m := s.recv()
		em, ok := m.(*felix.ErrorMessage)
		require.True(t, ok, "%T", m)
		require.Equal(t, felix.CodeInvalidRequest, em.Code.V)
		s.write(ackedFrame(t, 7, "after"))
		a := readAck(t, s)
		require.Equal(t, felix.AckOK, a.Status)
		require.Equal(t, uint64(7), a.RequestID)
		require.True(t, a.HasOffset)
	})
	t.Run("malformed acked body: error ack, stream stays", func(t *testing.T) {
		s := r.stream(t, rawFlags, feats)
		f := ackedFrame(t, 9, "x")
		binary.BigEndian.PutUint32(f[len(f)-5:], 1000) // payload length beyond the frame
		s.write(f)
		a := readAck(t, s)
		require.Equal(t, felix.AckError, a.Status)
		require.Equal(t, uint64(9), a.RequestID)
		require.Equal(t, felix.CodeInvalidRequest, a.Code)
		s.write(ackedFrame(t, 10, "ok"))
		require.Equal(t, felix.AckOK, readAck(t, s).Status)
	})
	t.Run("oversize frame: refused with limit_exceeded, stream ends", func(t *testing.T) {
		s := r.stream(t, rawFlags, feats)
		s.write(felix.AppendHeader(nil, felix.Header{Flags: 0, Length: felix.DefaultMaxFrameBytes + 1}))
		em, ok := s.recv().(*felix.ErrorMessage)
		require.True(t, ok)
		require.Equal(t, felix.CodeLimitExceeded, em.Code.V)
		s.ended()
	})
	t.Run("bad magic: stream torn down", func(t *testing.T) {
		s := r.stream(t, rawFlags, feats)
		s.write([]byte("XLX1\x00\x01\x00\x00\x00\x00\x00\x02{}"))
		s.ended()
	})
	t.Run("invalid JSON: stream ends", func(t *testing.T) {
		s := r.stream(t, rawFlags, feats)
		b, _ := felix.AppendFrame(nil, 0, []byte(`{"type":"cache_get",`))
		s.write(b)
		s.ended()
	})
	t.Run("unknown type: unsupported when negotiated", func(t *testing.T) {
		s := r.stream(t, rawFlags, feats)
		b, _ := felix.AppendFrame(nil, 0, []byte(`{"type":"frobnicate","request_id":5}`))
		s.write(b)
		u, ok := s.recv().(*felix.Unsupported)
		require.True(t, ok)
		require.Equal(t, "frobnicate", u.RequestType)
		require.Equal(t, uint64(5), u.RequestID.V)
		s.send(&felix.Extension{Name: "acme.ping"})
		u, ok = s.recv().(*felix.Unsupported)
		require.True(t, ok)
		require.Equal(t, "acme.ping", u.Extension.V)
		s.send(&felix.Topology{}) // known but not served: unsupported too
		u, ok = s.recv().(*felix.Unsupported)
		require.True(t, ok)
		require.Equal(t, "topology", u.RequestType)
	})
	t.Run("unknown type of 1 MiB: echoed cut to MaxEchoedNameBytes", func(t *testing.T) {
		s := r.stream(t, rawFlags, feats)
		name := strings.Repeat("é", 1<<19) // 1 MiB of two-byte runes: a cut must respect them
		b, _ := felix.AppendFrame(nil, 0, []byte(`{"type":"`+name+`","request_id":6}`))
		s.write(b)
		f, err := s.frame()
		require.NoError(t, err)
		require.LessOrEqual(t, len(f.Payload), server.MaxEchoedNameBytes+128, "the answer carries the cut name only")
		m, err := felix.DecodeMessage(f.Payload)
		require.NoError(t, err)
		u, ok := m.(*felix.Unsupported)
		require.True(t, ok, "%T", m)
		require.Equal(t, name[:server.MaxEchoedNameBytes], u.RequestType)
		require.True(t, utf8.ValidString(u.RequestType))
		require.Equal(t, uint64(6), u.RequestID.V)
		s.send(&felix.Extension{Name: "x" + name})
		u, ok = s.recv().(*felix.Unsupported)
		require.True(t, ok)
		require.Equal(t, ("x" + name)[:server.MaxEchoedNameBytes-1], u.Extension.V, "cut before a split rune")
		s.send(&felix.Topology{}) // the stream goes on
		u, ok = s.recv().(*felix.Unsupported)
		require.True(t, ok)
		require.Equal(t, "topology", u.RequestType)
		checkServing(t, good)
	})
	t.Run("unknown type without the feature: stream ends", func(t *testing.T) {
		s := r.stream(t, rawFlags, felix.FeatureErrorCodes)
		b, _ := felix.AppendFrame(nil, 0, []byte(`{"type":"frobnicate"}`))
		s.write(b)
		s.ended()
	})
	t.Run("broker message from a client: error, stream ends", func(t *testing.T) {
		s := r.stream(t, rawFlags, feats)
		s.send(&felix.OK{})
		em, ok := s.recv().(*felix.ErrorMessage)
		require.True(t, ok)
		require.Equal(t, felix.CodeInvalidRequest, em.Code.V)
		s.ended()
	})
	t.Run("request before auth", func(t *testing.T) {
		st, err := r.qc.OpenStreamSync(ctxT(t))
		require.NoError(t, err)
		s := &rawStream{t: t, s: st, r: felix.NewReader(st)}
		s.write(ackedFrame(t, 1, "x"))
		em, ok := s.recv().(*felix.ErrorMessage)
		require.True(t, ok)
		require.Equal(t, "auth required", em.Message)
		require.False(t, em.Code.Set, "no codes before auth")
		s.ended()
	})
	t.Run("errors without codes for clients that did not offer them", func(t *testing.T) {
		s := r.stream(t, rawFlags, 0)
		s.send(&felix.Publish{TenantID: topic.TenantID, Namespace: "ns", Stream: "s", Payload: []byte("x")})
		em, ok := s.recv().(*felix.ErrorMessage)
		require.True(t, ok)
		require.Equal(t, "missing request_id for acked publish", em.Message)
		require.False(t, em.Code.Set)
		require.False(t, em.Retry.Set)
	})
	checkServing(t, good)
	require.Positive(t, srv.Stats().BadFrames)
}

// A client killed in the middle of a frame: the broker drops its streams
// and keeps serving everyone else.
func TestClientKilledMidFrame(t *testing.T) {
	srv := startBroker(t, durableCfg())
	good := dial(t, srv, nil)
	ctx := ctxT(t)
	sub, err := good.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	for range 3 {
		r := dialRaw(t, srv)
		s := r.stream(t, rawFlags, 0)
		f := ackedFrame(t, 1, "partial", "frame")
		s.write(f[:len(f)-4]) // header announces more than is sent
		require.NoError(t, r.qc.CloseWithError(0, "killed"))
	}
	checkServing(t, good)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "still here", string(ev.Payload))
	require.Equal(t, uint64(1), srv.Stats().Engine.PublishedBatches, "the partial frames published nothing")
}
