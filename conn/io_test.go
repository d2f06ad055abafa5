package conn

import (
	"bytes"
	"io"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

type timeoutError struct{}

func (timeoutError) Error() string { return "i/o timeout" }
func (timeoutError) Timeout() bool { return true }

// chunkReader returns data in chunks of the sizes given (cycling); a size
// of 0 returns a timeout error instead, as a read interrupted by ctxGuard.
type chunkReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.sizes) > 0 {
		s := int(r.sizes[r.i%len(r.sizes)])
		r.i++
		if s == 0 {
			return 0, timeoutError{}
		}
		p = p[:min(len(p), s)]
	}
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

type readResult struct {
	frames []felix.Frame
	class  string // "" for a clean io.EOF
}

func readAllReference(data []byte, max uint32) readResult {
	r := felix.NewReader(bytes.NewReader(data))
	r.SetMaxPayload(max)
	var res readResult
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			return res
		}
		if err != nil {
			res.class = felix.ErrorClass(err)
			return res
		}
		res.frames = append(res.frames, felix.Frame{Header: f.Header, Payload: append([]byte{}, f.Payload...)})
	}
}

func readAllResumable(data, sizes []byte, max uint32, reuse bool) readResult {
	fr := frameReader{src: &chunkReader{data: data, sizes: sizes}, max: max, reuse: reuse}
	var res readResult
	for {
		f, err := fr.next()
		if err == io.EOF {
			return res
		}
		if isTimeout(err) {
			continue // resume where the interrupted read stopped
		}
		if err != nil {
			res.class = felix.ErrorClass(err)
			return res
		}
		res.frames = append(res.frames, felix.Frame{Header: f.Header, Payload: append([]byte{}, f.Payload...)})
	}
}

func frameSeeds(t testing.TB) [][]byte {
	a, err := felix.AppendFrame(nil, 0, []byte(`{"type":"ok"}`))
	require.NoError(t, err)
	b, err := felix.AppendEventBatch(a, &felix.EventBatch{HasBaseOffset: true, Payloads: [][]byte{[]byte("x"), make([]byte, 300)}}, felix.KnownFlags)
	require.NoError(t, err)
	return [][]byte{nil, a, b, b[:len(b)-3], a[:5], append(bytes.Clone(a), 0x46, 0x4c, 0x58, 0x31, 0, 1, 0x80, 0, 0, 0, 0, 0)}
}

func TestFrameReaderResumes(t *testing.T) {
	for _, data := range frameSeeds(t) {
		want := readAllReference(data, 1024)
		for _, sizes := range [][]byte{nil, {1}, {0, 1}, {3, 0, 0, 7}, {255}} {
			for _, reuse := range []bool{false, true} {
				got := readAllResumable(data, sizes, 1024, reuse)
				require.Equal(t, want, got, "sizes %v reuse %v", sizes, reuse)
			}
		}
	}
	// A length above the limit fails before any payload byte is read.
	big := felix.AppendHeader(nil, felix.Header{Length: 1 << 30})
	got := readAllResumable(big, nil, 1024, false)
	require.Equal(t, "frame_too_large", got.class)
}

// FuzzFrameReader checks that the resumable reader of event streams reads
// exactly what felix.Reader reads, whatever the chunking and however often
// a read is interrupted.
func FuzzFrameReader(f *testing.F) {
	for _, s := range frameSeeds(f) {
		f.Add(s, []byte{0, 1, 5})
	}
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		if len(sizes) > 0 && bytes.Count(sizes, []byte{0}) == len(sizes) {
			sizes = append(sizes, 1) // all-timeout schedules never progress
		}
		want := readAllReference(data, 4096)
		if len(want.frames) == 0 {
			want.frames = nil
		}
		require.Equal(t, want, readAllResumable(data, sizes, 4096, false))
		require.Equal(t, want, readAllResumable(data, sizes, 4096, true))
	})
}
