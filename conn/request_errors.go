package conn

import (
	"strconv"

	"github.com/flxproto/felix"
)

// FrameLimitError refuses a request whose frame would be larger than the
// frame limit, before anything is written: nothing was sent and the
// stream stays usable. The limit is Config.MaxFrameBytes (default
// felix.DefaultMaxFrameBytes, 16 MiB, which is also a broker's default:
// a broker resets a stream that sends a larger frame). errors.Is matches
// felix.ErrFrameTooLarge; errors.As reaches the *felix.Error.
type FrameLimitError struct {
	// Size is the frame's payload size in bytes.
	Size int
	// Limit is the frame limit in bytes.
	Limit uint32
}

// Error says how large the frame is, the limit and what to do.
func (e *FrameLimitError) Error() string {
	return "conn: request of " + strconv.Itoa(e.Size) + " bytes exceeds the frame limit of " +
		strconv.FormatUint(uint64(e.Limit), 10) + " bytes; nothing was sent (split the batch, or shrink the payloads)"
}

// Unwrap returns the codec's frame_too_large error.
func (e *FrameLimitError) Unwrap() error {
	return felix.FrameTooLarge(uint64(e.Size), e.Limit)
}
