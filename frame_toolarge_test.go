package felix_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFrameTooLarge pins the one frame-too-large error: its class,
// location and text.
func TestFrameTooLarge(t *testing.T) {
	e := felix.FrameTooLarge(70000, 65536)
	assert.ErrorIs(t, e, felix.ErrFrameTooLarge)
	assert.Equal(t, "frame", e.Layout)
	assert.Equal(t, "length", e.Field)
	assert.Equal(t, 8, e.Offset)
	assert.Equal(t, "70000 > limit 65536", e.Detail)
}

// TestFrameReadersReportFrameTooLarge checks that both codec readers
// report an oversized header with FrameTooLarge, and that a frame of
// exactly the limit is not refused.
func TestFrameReadersReportFrameTooLarge(t *testing.T) {
	const limit = 1024
	over, err := felix.AppendFrame(nil, 0, make([]byte, limit+1))
	require.NoError(t, err)
	at, err := felix.AppendFrame(nil, 0, make([]byte, limit))
	require.NoError(t, err)
	want := felix.FrameTooLarge(limit+1, limit)

	t.Run("ParseFrame", func(t *testing.T) {
		_, _, err := felix.ParseFrame(over, limit)
		var fe *felix.Error
		require.True(t, errors.As(err, &fe), "%v", err)
		assert.Equal(t, want, fe)
		_, _, err = felix.ParseFrame(at, limit)
		assert.NoError(t, err)
	})
	t.Run("Reader", func(t *testing.T) {
		r := felix.NewReader(bytes.NewReader(append(append([]byte(nil), at...), over...)))
		r.SetMaxPayload(limit)
		_, err := r.ReadFrame()
		require.NoError(t, err)
		_, err = r.ReadFrame()
		var fe *felix.Error
		require.True(t, errors.As(err, &fe), "%v", err)
		assert.Equal(t, want, fe)
	})
}
