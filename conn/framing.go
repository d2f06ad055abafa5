package conn

import (
	"errors"
	"io"
	"sync"

	"github.com/flxproto/felix"
)

// frameWriter writes whole frames to a stream, one Write per frame, under a
// mutex so that several goroutines may answer on one stream. It reuses one
// encoding buffer.
type frameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// writeMessage encodes m as a JSON frame and writes it.
func (fw *frameWriter) writeMessage(m felix.Message) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	b, err := felix.AppendMessageFrame(fw.buf[:0], m)
	if err != nil {
		return err
	}
	fw.buf = keepSmall(b)
	_, err = fw.w.Write(b)
	return err
}

// writeFrame writes a frame with the given flags and payload.
func (fw *frameWriter) writeFrame(flags felix.Flags, payload []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	b, err := felix.AppendFrame(fw.buf[:0], flags, payload)
	if err != nil {
		return err
	}
	fw.buf = keepSmall(b)
	_, err = fw.w.Write(b)
	return err
}

// writeEncoded writes an already encoded whole frame.
func (fw *frameWriter) writeEncoded(frame []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	_, err := fw.w.Write(frame)
	return err
}

// encode runs enc on the writer's buffer and writes the resulting frame,
// all under the lock, so that a frame is encoded in place without
// allocating.
func (fw *frameWriter) encode(enc func(dst []byte) ([]byte, error)) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	b, err := enc(fw.buf[:0])
	if err != nil {
		return err
	}
	fw.buf = keepSmall(b)
	_, err = fw.w.Write(b)
	return err
}

// keepSmall returns b for reuse unless it grew beyond 1 MiB, so that one
// huge frame does not pin its buffer forever.
func keepSmall(b []byte) []byte {
	if cap(b) > 1<<20 {
		return nil
	}
	return b[:0]
}

// isTimeout reports whether err is a deadline error.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
