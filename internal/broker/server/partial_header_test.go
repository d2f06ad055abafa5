package server_test

import (
	"io"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

// docs/frame.md §6: a stream that finishes before 12 header bytes arrived (even
// after a partial header) is a clean end of stream, answered with a clean
// end (FIN), not a reset, both before and after the stream authenticated.
func TestPartialHeaderThenFINIsCleanEnd(t *testing.T) {
	srv := startBroker(t, durableCfg())
	good := dial(t, srv, nil)
	r := dialRaw(t, srv)
	hdr := felix.AppendHeader(nil, felix.Header{Length: 10})

	t.Run("authenticated", func(t *testing.T) {
		s := r.stream(t, rawFlags, felix.FeatureErrorCodes)
		s.write(hdr[:5])
		require.NoError(t, s.s.Close())
		_, err := s.frame()
		require.ErrorIs(t, err, io.EOF, "clean end, not a reset")
	})
	t.Run("before auth", func(t *testing.T) {
		st, err := r.qc.OpenStreamSync(ctxT(t))
		require.NoError(t, err)
		_, err = st.Write(hdr[:5])
		require.NoError(t, err)
		require.NoError(t, st.Close())
		s := &rawStream{t: t, s: st, r: felix.NewReader(st)}
		_, err = s.frame()
		require.ErrorIs(t, err, io.EOF, "clean end, not a reset")
	})
	require.Zero(t, srv.Stats().BadFrames)
	checkServing(t, good)
}
