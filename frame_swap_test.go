package felix_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// TestReaderSwapBuffer: between frames SwapBuffer hands out the buffer the
// last payload aliases (never written again) and reads into the one given;
// inside a frame it changes nothing.
func TestReaderSwapBuffer(t *testing.T) {
	var stream []byte
	for _, p := range []string{"first", "second-frame", "3"} {
		f, err := felix.AppendFrame(nil, 0, []byte(p))
		require.NoError(t, err)
		stream = append(stream, f...)
	}
	r := felix.NewReader(bytes.NewReader(stream))
	f1, err := r.ReadFrame()
	require.NoError(t, err)
	own := make([]byte, 64)
	old := r.SwapBuffer(own)
	require.Equal(t, "first", string(old[:len(f1.Payload)]))
	require.Equal(t, &old[0], &f1.Payload[0])
	f2, err := r.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, "second-frame", string(f2.Payload))
	require.Equal(t, &own[0], &f2.Payload[0], "read into the buffer given")
	require.Equal(t, "first", string(f1.Payload), "the buffer handed out is not written again")

	// Inside a frame: nothing changes.
	r = felix.NewReader(&chunkReader{data: stream, sizes: []byte{3, 0}})
	_, err = r.ReadFrame()
	require.Error(t, err) // interrupted in the header
	require.Nil(t, r.SwapBuffer(own))
}
