package server_test

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// Answers nobody reads (issue 22, finding 5, at small scale): 32 streams
// ask for a 1 MiB cache value, or a 1 MiB stream_read page, and never
// read, over a connection whose receive windows are small. Only the
// connection's answer budget (here 4 MiB) of answers is held, the waiting
// ones hold no copy, and every stream is reset once the answer write bound
// passed; a legitimate client is served throughout.
func TestUnreadAnswersBounded(t *testing.T) {
	ref := felix.CacheRef{TenantID: server.DemoTenant, Namespace: "ns", Cache: "big"}
	for _, tc := range []struct {
		name  string
		feats felix.Features
		fill  func(t *testing.T, c *conn.Client)
		req   felix.Message
	}{
		{"cache_get", felix.FeatureErrorCodes,
			func(t *testing.T, c *conn.Client) {
				require.NoError(t, api.New(c).CachePut(ctxT(t), ref, "v", make([]byte, 1<<20), 0))
			},
			&felix.CacheGet{TenantID: ref.TenantID, Namespace: ref.Namespace, Cache: ref.Cache, Key: "v", RequestID: felix.Some[uint64](1)}},
		{"stream_read", felix.FeatureErrorCodes | felix.FeatureStreamRead,
			func(t *testing.T, c *conn.Client) {
				for range 4 {
					_, err := c.Publish(ctxT(t), topic, make([]byte, 256<<10), conn.PublishOptions{Ack: felix.AckPerBatch})
					require.NoError(t, err)
				}
			},
			&felix.StreamRead{TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream, From: 0, RequestID: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) { unreadAnswers(t, tc.feats, tc.fill, tc.req) })
	}
}

func unreadAnswers(t *testing.T, feats felix.Features, fill func(*testing.T, *conn.Client), req felix.Message) {
	const (
		streams = 32
		budget  = 4 << 20
		bound   = 3 * time.Second
	)
	cfg := durableCfg()
	cfg.ConnLimits = func(c *conn.ServerConfig) { c.MaxConnInFlightBytes, c.AnswerWriteTimeout = budget, bound }
	srv := startBroker(t, cfg)
	good := dial(t, srv, nil)
	ctx := ctxT(t)
	fill(t, good)
	checkServing(t, good)

	qc, err := quic.DialAddr(ctx, srv.Addr().String(), &tls.Config{RootCAs: srv.CertPool(), ServerName: "localhost"},
		&quic.Config{MaxIdleTimeout: 10 * time.Second, InitialStreamReceiveWindow: 16 << 10, MaxStreamReceiveWindow: 16 << 10,
			InitialConnectionReceiveWindow: 1 << 20, MaxConnectionReceiveWindow: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = qc.CloseWithError(0, "") })
	r := &raw{qc: qc}
	before := heapAfterGC()
	allocBefore := totalAlloc()
	reqs := srv.Stats().Requests
	var ss []*rawStream
	for range streams {
		s := r.stream(t, rawFlags, feats)
		s.send(req)
		ss = append(ss, s)
	}
	waitFor(t, func() bool { return srv.Stats().Requests >= reqs+streams }, "every request read")
	// All but the answers the budget holds (2 of about 1.4 MiB) wait for
	// room, having dropped their encoded copy.
	waitFor(t, func() bool { return srv.ConnStats().AnswersWaiting >= streams-budget>>20 }, "answers waiting for room")
	// Peak, not only what survives a GC: every byte allocated while the
	// answers were encoded or waiting. Counted before they are encoded
	// (issue 35), only the budget's worth of answers was ever encoded;
	// encoded first, each of the 32 answers was (≈ 45 MiB allocated).
	allocated := totalAlloc() - allocBefore
	t.Logf("allocated %d KiB while %d answers of ≈ 1.4 MiB were answered or waited", allocated>>10, streams)
	// The slack is for what else the process allocates meanwhile (the
	// race detector's bookkeeping took 12.2 MiB in one CI run, 8.2 MiB
	// without it); 20 MiB is still under half the encoded-first 45 MiB.
	require.Less(t, allocated, uint64(budget+16<<20), "answers encoded beyond the connection's budget")
	during := heapAfterGC()
	grown := int64(during) - int64(before)
	t.Logf("heap grew %d KiB with %d unread 1.4 MiB answers (budget %d MiB); conn stats %+v", grown>>10, streams, budget>>20, srv.ConnStats())
	// Unbounded, every stream holds its encoded answer (≈ 1.4 MiB each,
	// 45 MiB in all).
	require.Less(t, grown, int64(budget+8<<20), "answers held beyond the connection's budget")
	checkServing(t, good)

	// Every stream is reset once its answer outlasts the bound (the
	// answers being written are cut, the waiting ones give up): the
	// client, which still reads nothing, finds them reset.
	waitFor(t, func() bool { return srv.ConnStats().AnswerTimeouts >= streams }, "every unread answer timed out")
	for i, s := range ss {
		buf := make([]byte, 64<<10)
		for {
			_, err := s.s.Read(buf) // what was delivered before the reset, then the reset
			if err != nil {
				var se *quic.StreamError
				require.ErrorAs(t, err, &se, "stream %d", i)
				break
			}
		}
	}
	require.EqualValues(t, streams, srv.ConnStats().AnswerTimeouts)
	require.NoError(t, qc.Context().Err(), "the connection itself lives on")
	checkServing(t, good)
}
