package conn

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// TestFrameLimitErrorCause checks that felix.FrameLimitError's codec cause is
// felix.FrameTooLarge, the error every frame reader reports.
func TestFrameLimitErrorCause(t *testing.T) {
	var fe *felix.Error
	require.True(t, errors.As(&felix.FrameLimitError{Size: 2048, Limit: 1024}, &fe))
	assert.Equal(t, felix.FrameTooLarge(2048, 1024), fe)
}
