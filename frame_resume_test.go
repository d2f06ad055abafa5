package felix_test

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type timeoutError struct{}

func (timeoutError) Error() string { return "i/o timeout" }
func (timeoutError) Timeout() bool { return true }

// chunkReader returns data in chunks of the sizes given (cycling); a size
// of 0 returns a timeout error instead, as a read a deadline interrupted.
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
	fr := felix.NewReader(&chunkReader{data: data, sizes: sizes})
	fr.SetMaxPayload(max)
	fr.SetFreshPayloads(!reuse)
	var res readResult
	for {
		f, err := fr.ReadFrame()
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

func TestReaderResumes(t *testing.T) {
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

// FuzzReaderResumes checks that a Reader whose reads are interrupted
// reads exactly what an uninterrupted Reader reads, whatever the chunking
// and however often a read is interrupted, with either buffer policy.
func FuzzReaderResumes(f *testing.F) {
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

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// TestReaderBufferPolicy: fresh payloads are never written again by later
// frames; reused ones are, and reading with reuse allocates nothing.
func TestReaderBufferPolicy(t *testing.T) {
	var stream []byte
	for _, p := range []string{"first", "second", string(make([]byte, 20<<10)), "third"} {
		var err error
		stream, err = felix.AppendFrame(stream, 0, []byte(p))
		require.NoError(t, err)
	}
	read := func(fresh bool) [][]byte {
		r := felix.NewReader(bytes.NewReader(stream))
		r.SetFreshPayloads(fresh)
		var out [][]byte
		for {
			f, err := r.ReadFrame()
			if err == io.EOF {
				return out
			}
			require.NoError(t, err)
			out = append(out, f.Payload)
		}
	}
	kept := read(true)
	require.Len(t, kept, 4)
	assert.Equal(t, "first", string(kept[0]))
	assert.Equal(t, "second", string(kept[1]))
	assert.Len(t, kept[2], 20<<10)
	assert.Equal(t, "third", string(kept[3]))
	reused := read(false)
	assert.Equal(t, "third", string(reused[2][:5]), "the reused buffer holds the last frame")

	one, err := felix.AppendFrame(nil, 0, []byte("steady"))
	require.NoError(t, err)
	src := bytes.NewReader(one)
	r := felix.NewReader(src)
	_, err = r.ReadFrame()
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		src.Reset(one)
		if _, err := r.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "reading with a reused buffer allocates")
}

// allocatedBytes returns the bytes f allocates, averaged over runs.
func allocatedBytes(runs int, f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// TestReaderGrowChunk: with SetGrowChunk, a header announcing 64 KiB that
// only 10 payload bytes back (then the peer stalls) costs about the chunk,
// not the announced length, with fresh payloads or a reused buffer; the
// frame still reads whole once its bytes arrive, and resumes after the
// stall.
func TestReaderGrowChunk(t *testing.T) {
	const announced, chunk = 64 << 10, 1 << 10
	stalled := append(felix.AppendHeader(nil, felix.Header{Length: announced}), make([]byte, 10)...)
	for _, fresh := range []bool{true, false} {
		read := func(grow int) uint64 {
			return allocatedBytes(50, func() {
				// The header, the 10 bytes, then a read the deadline
				// interrupts.
				r := felix.NewReader(&chunkReader{data: stalled, sizes: []byte{255, 255, 0}})
				r.SetFreshPayloads(fresh)
				r.SetGrowChunk(grow)
				if _, err := r.ReadFrame(); !isTimeout(err) {
					t.Fatalf("want the stall's timeout, got %v", err)
				}
			})
		}
		assert.Less(t, read(chunk), uint64(2*chunk), "fresh=%v: bytes allocated for an unbacked 64 KiB length", fresh)
		assert.GreaterOrEqual(t, read(0), uint64(announced), "fresh=%v: the default allocates the announced length at once", fresh)

		payload := bytes.Repeat([]byte("p"), announced)
		whole, err := felix.AppendFrame(nil, 0, payload)
		require.NoError(t, err)
		r := felix.NewReader(&chunkReader{data: whole, sizes: []byte{100, 0, 255}})
		r.SetFreshPayloads(fresh)
		r.SetGrowChunk(chunk)
		var f felix.Frame
		for f, err = r.ReadFrame(); isTimeout(err); f, err = r.ReadFrame() {
		}
		require.NoError(t, err)
		require.Equal(t, payload, f.Payload, "fresh=%v", fresh)
		_, err = r.ReadFrame()
		require.Equal(t, io.EOF, err)
	}
}
