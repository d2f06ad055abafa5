package felix_test

import (
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

func TestFlagsSetString(t *testing.T) {
	require.Equal(t, "0x0000(none)", felix.Flags(0).SetString())
	require.Equal(t, "0x0000(JSON)", felix.Flags(0).String(), "a frame's flag word keeps its rendering")
	f := felix.FlagEventBatchOffsets | felix.FlagBinaryPublishAckOffset
	require.Equal(t, f.String(), f.SetString())
}

func TestStartKindString(t *testing.T) {
	require.Equal(t, "latest", felix.StartLatest.String())
	require.Equal(t, "earliest", felix.StartEarliest.String())
	require.Equal(t, "offset", felix.StartOffset.String())
	require.Equal(t, "start_kind(9)", felix.StartKind(9).String())
}

func TestSomeTypeArgument(t *testing.T) {
	var m felix.Subscribed
	m.StartOffset = felix.Some[uint64](1) // an untyped constant needs the type argument
	n := uint64(2)
	m.LiveOffset = felix.Some(n) // a typed value does not
	require.Equal(t, felix.Opt[uint64]{V: 1, Set: true}, m.StartOffset)
	require.Equal(t, felix.Opt[uint64]{V: 2, Set: true}, m.LiveOffset)
}
