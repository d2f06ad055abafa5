package conn

import (
	"bytes"
	"errors"
	"io"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// chunked reads at most n bytes per call, as a slow client delivers them.
type chunked struct {
	r io.Reader
	n int
}

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// stalls returns its bytes, then os.ErrDeadlineExceeded, as a stream whose
// client stopped sending until the auth deadline.
type stalls struct{ b []byte }

func (s *stalls) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

// FuzzAuthReader: any byte sequence, delivered in any chunk size, reads
// with the handshake's reader as a default felix.Reader with the same limit
// and lenient flags reads it (or fails with an error of the same class),
// and the payload buffer never grows past twice the bytes received (or
// the first chunk): an announced length costs nothing until its bytes
// arrive.
func FuzzAuthReader(f *testing.F) {
	auth, _ := felix.AppendMessageFrame(nil, &felix.Auth{TenantID: "t", Token: "x"})
	f.Add(auth, uint8(7))
	f.Add(felix.AppendHeader(nil, felix.Header{Length: 60 << 10}), uint8(1))
	f.Add(append(felix.AppendHeader(nil, felix.Header{Length: 5000}), make([]byte, 300)...), uint8(200))
	f.Add([]byte("FLX1\x01"), uint8(3))
	f.Add([]byte("XLX1\x01\x00\x00\x00\x00\x00\x00\x00"), uint8(12))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		n := int(chunk%64) + 1
		fr, err := authReader(chunked{bytes.NewReader(data), n}, felix.PreAuthMaxFrameBytes).ReadFrame()
		r := felix.NewReader(bytes.NewReader(data))
		r.SetMaxPayload(felix.PreAuthMaxFrameBytes)
		r.SetLenientFlags(true)
		want, werr := r.ReadFrame()
		if (err == nil) != (werr == nil) {
			t.Fatalf("authReader err %v, Reader err %v", err, werr)
		}
		if err != nil {
			if felix.ErrorClass(err) != felix.ErrorClass(werr) || errors.Is(werr, io.EOF) != errors.Is(err, io.EOF) {
				t.Fatalf("class %q vs %q (%v / %v)", felix.ErrorClass(err), felix.ErrorClass(werr), err, werr)
			}
			return
		}
		if fr.Header != want.Header || !bytes.Equal(fr.Payload, want.Payload) {
			t.Fatalf("frame differs: %+v vs %+v", fr.Header, want.Header)
		}
		if limit := max(authFrameChunk, 2*len(data)); cap(fr.Payload) > limit {
			t.Fatalf("payload buffer %d for %d bytes received", cap(fr.Payload), len(data))
		}
	})
}

// The handshake's reader refuses what readAuthFrame refused, with the same
// error classes the handshake sorts its answers by: a length over the
// limit from the header (felix.ErrFrameTooLarge, answered "auth frame too
// large"), a stream ended in a header or payload (felix.ErrTruncated and
// io.ErrUnexpectedEOF), the source's deadline as it is (the stream is
// reset for its auth timeout); flags are left to the handshake. A 64 KiB
// length that 10 bytes back costs about authFrameChunk, and each payload
// is its own (the Auth decoded from it is kept).
func TestAuthReader(t *testing.T) {
	hdr := func(n uint32) []byte { return felix.AppendHeader(nil, felix.Header{Length: n}) }
	_, err := authReader(bytes.NewReader(hdr(felix.PreAuthMaxFrameBytes+1)), felix.PreAuthMaxFrameBytes).ReadFrame()
	require.ErrorIs(t, err, felix.ErrFrameTooLarge)
	for _, cut := range [][]byte{hdr(10)[:5], append(hdr(10), 1, 2, 3)} {
		_, err = authReader(bytes.NewReader(cut), felix.PreAuthMaxFrameBytes).ReadFrame()
		require.ErrorIs(t, err, felix.ErrTruncated)
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	}
	_, err = authReader(bytes.NewReader(nil), felix.PreAuthMaxFrameBytes).ReadFrame()
	require.Equal(t, io.EOF, err)
	_, err = authReader(&stalls{hdr(10)}, felix.PreAuthMaxFrameBytes).ReadFrame()
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	odd, err := felix.AppendFrame(nil, 0x8000, []byte("x"))
	require.NoError(t, err)
	f, err := authReader(bytes.NewReader(odd), felix.PreAuthMaxFrameBytes).ReadFrame()
	require.NoError(t, err, "unknown flags are the handshake's to answer")
	require.Equal(t, felix.Flags(0x8000), f.Flags)

	two := append(bytes.Clone(odd), odd...)
	r := authReader(bytes.NewReader(two), felix.PreAuthMaxFrameBytes)
	first, err := r.ReadFrame()
	require.NoError(t, err)
	first.Payload[0] = 'y'
	second, err := r.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, "x", string(second.Payload), "a payload of its own")

	stalled := append(hdr(felix.PreAuthMaxFrameBytes), make([]byte, 10)...)
	const runs = 50
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		if _, err := authReader(&stalls{stalled}, felix.PreAuthMaxFrameBytes).ReadFrame(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	require.Less(t, (after.TotalAlloc-before.TotalAlloc)/runs, uint64(2*authFrameChunk), "bytes allocated for a 64 KiB length 10 bytes back")
}
