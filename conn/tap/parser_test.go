package tap

import (
	"bytes"
	"errors"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

// The parser reports every frame exactly as it crossed the relay, whatever
// the chunking, including frames with flag bits this module does not know.
func TestFrameParserReportsExactBytes(t *testing.T) {
	var stream []byte
	for i, f := range []struct {
		flags   felix.Flags
		payload []byte
	}{
		{0, []byte(`{"type":"topology"}`)},
		{0x4001, []byte("unknown flags")},
		{0, nil},
		{felix.FlagBinaryPublishAcked, bytes.Repeat([]byte{byte(1)}, 3000)},
	} {
		var err error
		stream, err = felix.AppendFrame(stream, f.flags, f.payload)
		require.NoError(t, err, i)
	}
	for _, chunk := range []int{1, 5, 12, 13, 700, len(stream)} {
		p := newFrameParser(felix.DefaultMaxFrameBytes)
		var got []byte
		n := 0
		for rest := stream; len(rest) > 0; {
			k := min(chunk, len(rest))
			p.feed(rest[:k], func(f []byte, err error) {
				require.NoError(t, err)
				got = append(got, f...)
				n++
			})
			rest = rest[k:]
		}
		require.Equal(t, stream, got, "chunk %d", chunk)
		require.Equal(t, 4, n, "chunk %d", chunk)
	}
}

// A bad header or a frame above the limit is reported once, as the
// codec's error, and nothing after it.
func TestFrameParserStopsAtFirstError(t *testing.T) {
	big, err := felix.AppendFrame(nil, 0, make([]byte, 100))
	require.NoError(t, err)
	small, err := felix.AppendFrame(nil, 0, []byte("x"))
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		stream []byte
		class  error
	}{
		"too large": {append(append([]byte(nil), big...), small...), felix.ErrFrameTooLarge},
		"bad magic": {append([]byte("XLX1\x00\x01\x00\x00\x00\x00\x00\x01x"), small...), felix.ErrBadMagic},
	} {
		p := newFrameParser(64)
		var errs []error
		frames := 0
		p.feed(tc.stream, func(f []byte, err error) {
			if err != nil {
				errs = append(errs, err)
			} else {
				frames++
			}
		})
		p.feed(small, func([]byte, error) { frames++ })
		require.Len(t, errs, 1, name)
		require.True(t, errors.Is(errs[0], tc.class), "%s: %v", name, errs[0])
		require.Zero(t, frames, name)
	}
}
