package conn

import (
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// messageFrameBound is never below the encoded size: the answer budgets
// count it before the frame is encoded.
func TestMessageFrameBound(t *testing.T) {
	bin := make([]byte, 100_001)
	for i := range bin {
		bin[i] = byte(i)
	}
	esc := strings.Repeat("\x01\"\\<>&\u2028é", 999) + "\xff"
	for _, m := range []felix.Message{
		&felix.CacheValue{TenantID: esc, Namespace: "n", Cache: "c", Key: esc, Value: felix.Some(bin), Version: felix.Some[uint64](1 << 63), RequestID: felix.Some[uint64](7)},
		&felix.CacheValue{Key: "k"},
		&felix.ErrorMessage{Message: esc, Code: felix.Some(felix.CodeLimitExceeded), Detail: felix.Some(felix.ErrorDetail{Reason: felix.Some(esc)})},
		&felix.GroupRecords{Records: []felix.GroupRecord{{Offset: 1, Payload: bin, Attempts: 2}, {Payload: []byte{}}}, RequestID: 1},
		&felix.OK{},
		&felix.UnknownMessage{Raw: []byte(`{"type":"x","pad":"` + strings.Repeat("y", 5000) + `"}`)},
	} {
		fr, err := felix.AppendMessageFrame(nil, m)
		require.NoError(t, err)
		require.GreaterOrEqual(t, messageFrameBound(m), len(fr), "%T", m)
		t.Logf("%T: %d bytes, bound %d", m, len(fr), messageFrameBound(m))
	}
}

// Many connections that do not read their answers hold at most the
// listener's MaxAnswerBytes of answers together (issue 35: 256 connections
// with one unread 16 MiB answer each held 4,113 MiB): 4 connections × 2
// streams ask for a 1 MiB cache value (≈ 1.4 MiB frames) and read nothing,
// each connection's budget would take one, the listener's takes one in
// all, and the rest wait holding no encoding.
func TestListenerAnswerBudget(t *testing.T) {
	leakCheck(t)
	const budget, value, conns, streams = 2 << 20, 1 << 20, 4, 2
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) {
		c.MaxConnInFlightBytes, c.MaxAnswerBytes, c.AnswerWriteTimeout = budget, budget, 2*time.Second
	}})
	other := b.dial(t, nil)
	ref := felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "big"}
	require.NoError(t, cachePut(testCtx(t), other, ref, "v", make([]byte, value), 0))
	for range conns {
		qc, err := rawConn(t, b, nil) // default client windows (512 KiB per stream): a 1.4 MiB answer blocks
		require.NoError(t, err)
		for range streams {
			rs := openRaw(t, qc)
			rs.s.Write(authFrame(t))
			require.IsType(t, &felix.AuthOK{}, rs.recv())
			rs.send(&felix.CacheGet{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: "v", RequestID: felix.Some[uint64](1)})
		}
	}
	waitFor(t, func() bool { return b.ln.Stats().AnswersWaiting == conns*streams-1 }, "one answer written, the others waiting for room")
	require.LessOrEqual(t, b.ln.answers.inUse(), int64(budget))
	require.Equal(t, conns-1, b.ln.answers.waiting(), "each other connection has one answer waiting for the listener's budget")
	waitFor(t, func() bool { return b.ln.Stats().AnswerTimeouts >= conns*streams }, "every unread answer timed out")
	waitFor(t, func() bool { return b.ln.answers.inUse() == 0 }, "every answer's bytes returned")
	_, err := other.Publish(testCtx(t), topic, []byte("served"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
}

// One tenant's connections that do not read hold at most the tenant's
// MaxTenantAnswerBytes of answers together, and another tenant's answers
// are written meanwhile: 3 connections of tenant t1 leave a 1.4 MiB answer
// unread each (one written, two waiting for t1's 2 MiB), then a tenant t2
// stream reads its own answer whole.
func TestTenantAnswerBudget(t *testing.T) {
	leakCheck(t)
	const budget, value, conns = 2 << 20, 1 << 20, 3
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) {
		c.MaxConnInFlightBytes, c.MaxTenantAnswerBytes, c.MaxAnswerBytes, c.AnswerWriteTimeout = budget, budget, 4*budget, 10*time.Second
	}})
	other := b.dial(t, nil)
	ref1 := felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "big"}
	ref2 := felix.CacheRef{TenantID: "t2", Namespace: "ns", Cache: "big"}
	require.NoError(t, cachePut(testCtx(t), other, ref1, "v", make([]byte, value), 0))
	require.NoError(t, cachePut(testCtx(t), other, ref2, "v", make([]byte, value), 0))
	get := func(qc *quic.Conn, tenant string, ref felix.CacheRef) *rawStream {
		rs := openRaw(t, qc)
		fr, err := felix.AppendMessageFrame(nil, &felix.Auth{TenantID: tenant, Token: "x", ClientFlags: felix.Some[uint16](7),
			ClientFeatures: felix.Some(uint32(felix.FeatureErrorCodes))})
		require.NoError(t, err)
		rs.s.Write(fr)
		require.IsType(t, &felix.AuthOK{}, rs.recv())
		rs.send(&felix.CacheGet{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: "v", RequestID: felix.Some[uint64](1)})
		return rs
	}
	for range conns {
		qc, err := rawConn(t, b, nil) // default client windows (512 KiB per stream): a 1.4 MiB answer blocks
		require.NoError(t, err)
		get(qc, "t1", ref1)
	}
	waitFor(t, func() bool { return b.ln.Stats().AnswersWaiting == conns-1 }, "one t1 answer written, the others waiting for t1's budget")
	require.LessOrEqual(t, b.ln.tenantAnswers.inUse("t1"), int64(budget))
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	rs := get(qc, "t2", ref2)
	v, ok := rs.recv().(*felix.CacheValue)
	require.True(t, ok, "t2's answer is written while t1's wait")
	require.Len(t, v.Value.V, value)
	require.EqualValues(t, conns-1, b.ln.Stats().AnswersWaiting, "t1's answers still wait")
}
