package conn

import (
	"errors"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFrameLimitErrorCause checks that FrameLimitError's codec cause is
// felix.FrameTooLarge, the error every frame reader reports.
func TestFrameLimitErrorCause(t *testing.T) {
	var fe *felix.Error
	require.True(t, errors.As(&FrameLimitError{Size: 2048, Limit: 1024}, &fe))
	assert.Equal(t, felix.FrameTooLarge(2048, 1024), fe)
}
