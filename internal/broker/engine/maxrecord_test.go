package engine

import (
	"encoding/base64"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

// The largest record of a durable stream is the documented 12,582,615
// bytes at the default frame limit (tenant t1 publishing): that record is
// taken and readable in a stream_read answer, one byte more is refused
// with a message naming the largest record and the frame limit.
func TestLargestDurableRecord(t *testing.T) {
	largest := MaxRecordBytes(felix.DefaultMaxFrameBytes, "t1", true)
	require.Equal(t, int64(12_582_615), largest)
	require.LessOrEqual(t, StreamReadPageFixed+StreamReadRecordMax(int(largest), "t1"), int64(felix.DefaultMaxFrameBytes))
	require.Greater(t, int64(StreamReadPageFixed+base64.StdEncoding.EncodedLen(int(largest)+3)+jsonRecordFixed+jsonEscapeMax*2), int64(felix.DefaultMaxFrameBytes))
	e := &Engine{}
	require.NoError(t, e.checkDeliverable(&PublishRequest{Publisher: "t1", Payloads: [][]byte{make([]byte, largest)}}, true))
	err := e.checkDeliverable(&PublishRequest{Publisher: "t1", Payloads: [][]byte{make([]byte, largest+1)}}, true)
	require.ErrorContains(t, err, "is over the largest record this stream takes, 12582615 bytes")
	require.ErrorContains(t, err, "frame limit of 16777216 bytes")
	// Not durable: only the event frame bounds it.
	require.Greater(t, MaxRecordBytes(felix.DefaultMaxFrameBytes, "t1", false), int64(16_000_000))
}
