package server_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

const allEventFlags = rawFlags | felix.FlagEventBatchPublisher | felix.FlagEventBatchTimestamps

// subscribeRaw subscribes from offset 0 (the tail here) on a raw stream offering every
// event modifier and returns a reader of its event stream, limited to the
// broker's frame limit.
func subscribeRaw(t *testing.T, r *raw, limit uint32) *felix.Reader {
	t.Helper()
	s := r.stream(t, allEventFlags, felix.FeatureErrorCodes)
	s.send(&felix.Subscribe{TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream,
		Start: felix.Some(felix.StartAt(0))})
	_, ok := s.recv().(*felix.Subscribed)
	require.True(t, ok)
	us, err := r.qc.AcceptUniStream(ctxT(t))
	require.NoError(t, err)
	_ = us.SetReadDeadline(time.Now().Add(time.Minute))
	rd := felix.NewReader(us)
	rd.SetMaxPayload(limit)
	f, err := rd.ReadFrame()
	require.NoError(t, err)
	_, err = felix.DecodeMessage(f.Payload)
	require.NoError(t, err)
	return rd
}

func acked(t *testing.T, s *rawStream, rid uint64, payloads [][]byte) felix.PublishAck {
	t.Helper()
	b := &felix.PublishBatch{AckMode: felix.AckPerBatch, RequestID: rid, TenantID: topic.TenantID,
		Namespace: topic.Namespace, Stream: topic.Stream, Payloads: payloads}
	f, err := felix.AppendPublishBatch(nil, b)
	require.NoError(t, err)
	s.write(f)
	return readAck(t, s)
}

// Finding 5: with a 256 KiB frame limit, (1) a publish frame at the limit
// made of tiny records is delivered in several event frames, each within
// the limit with every modifier (offsets, publisher, timestamps); (2) a
// record that fits a publish frame but could never fit an event frame with
// a 255-byte publisher is refused at publish time, nothing written, so no
// offset poisons a subscriber; (3) stream_read pages fit the limit.
func TestDerivedFramesFitTheLimit(t *testing.T) {
	const limit = 256 << 10
	principal := strings.Repeat("p", 255)
	cfg := durableCfg()
	cfg.MaxFrameBytes = limit
	cfg.Tokens = map[string]server.Identity{server.DemoToken: {Tenant: server.DemoTenant, Principal: principal}}
	srv := startBroker(t, cfg)
	r := dialRaw(t, srv)
	pub := r.stream(t, rawFlags, felix.FeatureErrorCodes)

	// (1) ~50,000 one-byte records in one publish frame under the limit.
	var tiny [][]byte
	for len(tiny)*5 < limit-1024 {
		tiny = append(tiny, []byte{byte(len(tiny))})
	}
	sub := subscribeRaw(t, r, limit) // live delivery, not history pages
	require.Equal(t, felix.AckOK, acked(t, pub, 1, tiny).Status)
	frames, next := 0, uint64(0)
	for next < uint64(len(tiny)) {
		f, err := sub.ReadFrame()
		require.NoError(t, err, "every event frame fits the limit")
		ev, err := felix.ParseEventBatch(f.Flags, f.Payload)
		require.NoError(t, err)
		require.True(t, ev.HasPublisher() && ev.HasTimestamps() && ev.HasBaseOffset())
		require.Equal(t, principal, string(ev.Publisher))
		require.Equal(t, next, ev.BaseOffset)
		next += uint64(ev.Len())
		frames++
	}
	require.Greater(t, frames, 1, "the batch was split")

	// (2) A record that fits a publish frame but not an event frame with
	// a 255-byte publisher and timestamps.
	big := bytes.Repeat([]byte("b"), limit-64)
	a := acked(t, pub, 2, [][]byte{big})
	require.Equal(t, felix.AckError, a.Status)
	require.Equal(t, felix.CodeInvalidRequest, a.Code)
	_, tail, err := srv.Engine().Tail(engineTopic(), 0)
	require.NoError(t, err)
	require.Equal(t, uint64(len(tiny)), tail, "nothing written")
	require.Equal(t, felix.AckOK, acked(t, pub, 3, [][]byte{[]byte("after")}).Status)
	f, err := sub.ReadFrame()
	require.NoError(t, err)
	ev, err := felix.ParseEventBatch(f.Flags, f.Payload)
	require.NoError(t, err)
	require.Equal(t, tail, ev.BaseOffset, "the subscriber goes on past the refusal")

	// (3) stream_read pages of 48 KiB records: base64 makes them larger
	// than the records; every page fits, and together they hold them all.
	for i := range 12 {
		require.Equal(t, felix.AckOK, acked(t, pub, uint64(10+i), [][]byte{bytes.Repeat([]byte{'r'}, 48<<10)}).Status)
	}
	rs := r.stream(t, rawFlags, felix.FeatureStreamRead|felix.FeatureErrorCodes)
	rs.r.SetMaxPayload(limit)
	from, end := tail+1, tail+13
	pages := 0
	for from < end {
		rs.send(&felix.StreamRead{TenantID: topic.TenantID, Namespace: topic.Namespace, Stream: topic.Stream,
			From: from, RequestID: uint64(100 + pages)})
		m := rs.recv()
		recs, ok := m.(*felix.StreamRecords)
		require.True(t, ok, "%T %v", m, m)
		require.NotEmpty(t, recs.Records)
		require.Equal(t, from, recs.Records[0].Offset)
		from = recs.NextOffset
		pages++
	}
	require.Greater(t, pages, 1)
}

// A stream that once carried a large frame does not keep a read buffer of
// that size: 16 long-lived publish streams that each carried one 4 MiB
// publish hold far less than 16 × 4 MiB.
func TestLargeFrameBuffersNotPinned(t *testing.T) {
	const streams, size = 16, 4 << 20
	srv := startBroker(t, server.Config{})
	tp := engineTopic()
	tp.Stream = "big"
	require.NoError(t, srv.Engine().CreateStream(tp, engine.StreamConfig{RingRecords: 1}))
	c := dial(t, srv, func(cfg *conn.Config) { cfg.PublishStreams = streams })
	ctx := ctxT(t)
	ct := felix.Topic{TenantID: tp.Tenant, Namespace: tp.Namespace, Stream: tp.Stream}
	_, err := c.Publish(ctx, ct, []byte("warm"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	before := heapAfterGC()
	payload := bytes.Repeat([]byte("B"), size)
	for range streams {
		_, err := c.Publish(ctx, ct, payload, conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	// One more small publish per stream lets each drop its big buffer.
	for range streams {
		_, err := c.Publish(ctx, ct, []byte("small"), conn.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	payload = nil
	grew := int64(heapAfterGC()) - int64(before)
	t.Logf("heap grew %d KiB after %d × %d MiB publishes on %d streams", grew>>10, streams, size>>20, streams)
	require.Less(t, grew, int64(24<<20))
	checkServing(t, c)
}
