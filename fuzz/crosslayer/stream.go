package crosslayer

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/flxproto/felix"
)

// StreamResult is everything a felix.Reader produced from one stream: the
// frames (copied) and the error that ended it (io.EOF at a clean end).
type StreamResult struct {
	Frames []felix.Frame
	End    error
}

// ReadAll reads r to its end with a felix.Reader limited to maxPayload and
// returns the frames (payloads copied) and the terminal error.
func ReadAll(r io.Reader, maxPayload uint32) StreamResult {
	fr := felix.NewReader(r)
	fr.SetMaxPayload(maxPayload)
	var res StreamResult
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			res.End = err
			return res
		}
		f.Payload = bytes.Clone(f.Payload)
		res.Frames = append(res.Frames, f)
	}
}

// SplitReader returns data through Read calls whose sizes follow splits:
// byte b of splits allows a read of (b&0x7f)+1 bytes, cycling through
// splits; with the high bit set, a read that reaches the end of data
// returns io.EOF together with the last bytes (as io.Reader allows). An
// empty splits returns everything in one read.
func SplitReader(data, splits []byte) io.Reader {
	return &splitReader{data: data, splits: splits}
}

type splitReader struct {
	data   []byte
	splits []byte
	i      int
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := len(s.data)
	eofWithData := false
	if len(s.splits) > 0 {
		b := s.splits[s.i%len(s.splits)]
		s.i++
		n = min(n, int(b&0x7f)+1)
		eofWithData = b&0x80 != 0
	}
	n = copy(p, s.data[:n])
	s.data = s.data[n:]
	if len(s.data) == 0 && eofWithData {
		return n, io.EOF
	}
	return n, nil
}

// CheckStream reads data twice, whole and split by splits, and reports an
// error when the two readings differ (frames, or the class and position of
// the error that ended them), when a clean end is not at the end of data,
// or when a frame read fails RoundTrip.
func CheckStream(data, splits []byte, maxPayload uint32) error {
	whole := ReadAll(bytes.NewReader(data), maxPayload)
	split := ReadAll(SplitReader(data, splits), maxPayload)
	if err := sameStream(whole, split); err != nil {
		return err
	}
	n := 0
	for _, f := range whole.Frames {
		n += felix.HeaderLen + len(f.Payload)
	}
	if whole.End == io.EOF {
		if n != len(data) {
			return fmt.Errorf("clean end after %d of %d bytes", n, len(data))
		}
	} else {
		if felix.ErrorClass(whole.End) == "" {
			return fmt.Errorf("stream ended without a classed error: %v", whole.End)
		}
		if errors.Is(whole.End, felix.ErrTruncated) != errors.Is(whole.End, io.ErrUnexpectedEOF) {
			return fmt.Errorf("truncation must also match io.ErrUnexpectedEOF: %v", whole.End)
		}
	}
	for i, f := range whole.Frames {
		frame, err := felix.AppendFrame(nil, f.Flags, f.Payload)
		if err != nil {
			return fmt.Errorf("frame %d: %v", i, err)
		}
		if _, err := RoundTrip(frame, maxPayload); err != nil {
			return fmt.Errorf("frame %d: %v", i, err)
		}
	}
	return nil
}

func sameStream(a, b StreamResult) error {
	if len(a.Frames) != len(b.Frames) {
		return fmt.Errorf("whole read gives %d frames (%v), split read %d (%v)", len(a.Frames), a.End, len(b.Frames), b.End)
	}
	for i := range a.Frames {
		fa, fb := a.Frames[i], b.Frames[i]
		if fa.Header != fb.Header || !bytes.Equal(fa.Payload, fb.Payload) {
			return fmt.Errorf("frame %d differs: whole %+v %x, split %+v %x", i, fa.Header, fa.Payload, fb.Header, fb.Payload)
		}
	}
	if (a.End == io.EOF) != (b.End == io.EOF) || felix.ErrorClass(a.End) != felix.ErrorClass(b.End) {
		return fmt.Errorf("whole read ends with %v, split read with %v", a.End, b.End)
	}
	var ea, eb *felix.Error
	if errors.As(a.End, &ea) && errors.As(b.End, &eb) && ea.Offset != eb.Offset {
		return fmt.Errorf("whole read ends at offset %d (%v), split read at %d (%v)", ea.Offset, a.End, eb.Offset, b.End)
	}
	return nil
}
