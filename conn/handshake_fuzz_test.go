package conn

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/flxproto/felix"
)

// chunked reads at most n bytes per call, as a slow client delivers them.
type chunked struct {
	r io.Reader
	n int
}

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// FuzzReadAuthFrame: any byte sequence, delivered in any chunk size, reads
// as the frame felix.Reader reads (or an error of the same class), and the
// payload buffer never grows past twice the bytes received (plus the first
// chunk): an announced length costs nothing until its bytes arrive.
func FuzzReadAuthFrame(f *testing.F) {
	auth, _ := felix.AppendMessageFrame(nil, &felix.Auth{TenantID: "t", Token: "x"})
	f.Add(auth, uint8(7))
	f.Add(felix.AppendHeader(nil, felix.Header{Length: 60 << 10}), uint8(1))
	f.Add(append(felix.AppendHeader(nil, felix.Header{Length: 5000}), make([]byte, 300)...), uint8(200))
	f.Add([]byte("FLX1\x01"), uint8(3))
	f.Add([]byte("XLX1\x01\x00\x00\x00\x00\x00\x00\x00"), uint8(12))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		n := int(chunk%64) + 1
		fr, err := readAuthFrame(chunked{bytes.NewReader(data), n}, felix.PreAuthMaxFrameBytes)
		r := felix.NewReader(bytes.NewReader(data))
		r.SetMaxPayload(felix.PreAuthMaxFrameBytes)
		r.SetLenientFlags(true)
		want, werr := r.ReadFrame()
		if (err == nil) != (werr == nil) {
			t.Fatalf("readAuthFrame err %v, Reader err %v", err, werr)
		}
		if err != nil {
			if felix.ErrorClass(err) != felix.ErrorClass(werr) && !(errors.Is(werr, io.EOF) && errors.Is(err, io.EOF)) {
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
