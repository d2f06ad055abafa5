package conn

import (
	"bytes"
	"errors"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFrameTooLargeIsOneError checks that the frame-too-large errors built
// in conn (the event-stream reader and FrameLimitError's codec cause) are
// felix.FrameTooLarge.
func TestFrameTooLargeIsOneError(t *testing.T) {
	want := felix.FrameTooLarge(2048, 1024)
	t.Run("event stream reader", func(t *testing.T) {
		fr := frameReader{src: bytes.NewReader(felix.AppendHeader(nil, felix.Header{Length: 2048})), max: 1024}
		_, err := fr.next()
		var fe *felix.Error
		require.True(t, errors.As(err, &fe), "%v", err)
		assert.Equal(t, want, fe)
	})
	t.Run("FrameLimitError", func(t *testing.T) {
		var fe *felix.Error
		require.True(t, errors.As(&FrameLimitError{Size: 2048, Limit: 1024}, &fe))
		assert.Equal(t, want, fe)
	})
}
