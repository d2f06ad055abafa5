package conn

import (
	"io"
	"testing"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// TestMaxStreamsPerConnection: ServerConfig.MaxStreams is enforced by QUIC
// for each kind, authenticated streams included: a client cannot open a
// stream beyond it (quic-go reports the stream limit at once), and gets
// the place back when a stream of the same kind has ended.
func TestMaxStreamsPerConnection(t *testing.T) {
	leakCheck(t)
	const limit = 4
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) { c.MaxStreams = limit }})
	qc, err := rawConn(t, b, nil)
	require.NoError(t, err)
	ctx := testCtx(t)
	var bidi []*rawStream
	for range limit {
		rs := openRaw(t, qc)
		rs.s.Write(authFrame(t))
		require.IsType(t, &felix.AuthOK{}, rs.recv())
		bidi = append(bidi, rs)
	}
	_, err = qc.OpenStream()
	require.ErrorIs(t, err, &quic.StreamLimitReachedError{}, "bidi stream %d", limit+1)

	var uni []*quic.SendStream
	for range limit {
		s, err := qc.OpenUniStream()
		require.NoError(t, err)
		_, err = s.Write(authFrame(t))
		require.NoError(t, err)
		uni = append(uni, s)
	}
	_, err = qc.OpenUniStream()
	require.ErrorIs(t, err, &quic.StreamLimitReachedError{}, "uni stream %d", limit+1)

	// Ending a stream gives its place back (the server finishes its side
	// when it reads the end), and the new stream works.
	bidi[0].s.Close()
	require.Equal(t, io.EOF, bidi[0].expectEnd())
	next := openRaw(t, qc) // OpenStreamSync: waits for the credit
	next.s.Write(authFrame(t))
	require.IsType(t, &felix.AuthOK{}, next.recv())
	next.send(&felix.Publish{TenantID: "t1", Namespace: "ns", Stream: "s", Payload: []byte("a"), RequestID: felix.Some[uint64](1), Ack: felix.Some(felix.AckPerMessage)})
	require.IsType(t, &felix.PublishOK{}, next.recv())

	uni[0].Close()
	u, err := qc.OpenUniStreamSync(ctx)
	require.NoError(t, err)
	_, err = u.Write(authFrame(t))
	require.NoError(t, err)
	u.Close()
}
