package conn

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// TestClientConcurrentWriteCancellation: two publishes share one stream
// whose reader (the broker) has stopped. The first is blocked inside its
// frame on flow control; the second waits for the writer. Cancelling the
// second must not touch the first's frame (the write deadline is only moved
// by the writer that holds the stream), and cancelling the first then
// resets the stream.
func TestClientConcurrentWriteCancellation(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, func(cfg *Config) { cfg.PublishStreams = 1 })
	frozen := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "freeze"}
	// The broker reads this frame and then stops reading the stream.
	_, err := c.Publish(testCtx(t), frozen, []byte("x"), PublishOptions{NoAck: true})
	require.NoError(t, err)

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	big := make([]byte, 8<<20) // far beyond the initial stream window
	// Holding the writer's lock is not enough: the 8 MiB frame is encoded
	// under the lock before it is written, and on a loaded machine that
	// can take longer than any sleep. Wait until the frame's Write has
	// started (it then blocks on flow control, the broker reads nothing).
	ps := c.pubs[0]
	writing := make(chan struct{})
	ew := &enteredWriter{Writer: ps.cs.w.w, min: 1 << 20, entered: writing}
	ps.cs.w.w = ew
	// Every move of the stream's write deadline is recorded: the deadline
	// is how a cancelled write is interrupted.
	dl := &recordingDeadliner{d: ps.cs.w.d}
	ps.cs.w.d = dl
	errA := make(chan error, 1)
	go func() {
		_, err := c.Publish(ctxA, frozen, big, PublishOptions{NoAck: true})
		errA <- err
	}()
	select {
	case <-writing:
	case err := <-errA:
		t.Fatalf("first publish ended before writing: %v", err)
	}
	require.Equal(t, 1, len(ps.cs.w.sem), "first publish holds the writer")

	ctxB, cancelB := context.WithCancel(context.Background())
	errB := make(chan error, 1)
	go func() {
		_, err := c.Publish(ctxB, frozen, []byte("y"), PublishOptions{NoAck: true})
		errB <- err
	}()
	// The second publish is queued behind the first, waiting for the lock.
	waitFor(t, func() bool { return ps.cs.w.waiting.Load() == 1 }, "the second publish waits for the writer")
	cancelB()
	err = recv(t, errB, "the queued publish giving up on its cancelled context")
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, errWriteInterrupted), "the waiting publish wrote nothing")
	// Cancelling the waiting publish touched neither the deadline nor the
	// frame being written: the first Write is still blocked.
	require.Zero(t, dl.calls(), "the waiting publish moved the write deadline")
	require.False(t, ew.returned.Load(), "cancelling the waiting publish interrupted the writing one")
	select {
	case err := <-errA:
		t.Fatalf("cancelling the waiting publish ended the writing one: %v", err)
	default:
	}

	cancelA()
	err = recv(t, errA, "the first publish giving up on its cancelled context")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errWriteInterrupted, "a frame cut short resets the stream")
	require.Equal(t, 2, dl.calls(), "only the writing publish moved the deadline: to now, then back")
	waitFor(t, ps.dead, "the reset stream is abandoned")
}

// enteredWriter closes entered when a Write of at least min bytes starts,
// and sets returned when that Write returns.
type enteredWriter struct {
	io.Writer
	min      int
	entered  chan struct{}
	once     sync.Once
	returned atomic.Bool
}

func (w *enteredWriter) Write(b []byte) (int, error) {
	if len(b) < w.min {
		return w.Writer.Write(b)
	}
	w.once.Do(func() { close(w.entered) })
	defer w.returned.Store(true)
	return w.Writer.Write(b)
}

// recordingDeadliner counts the write-deadline moves it passes on.
type recordingDeadliner struct {
	d writeDeadliner
	n atomic.Int32
}

func (r *recordingDeadliner) SetWriteDeadline(t time.Time) error {
	r.n.Add(1)
	return r.d.SetWriteDeadline(t)
}

func (r *recordingDeadliner) calls() int { return int(r.n.Load()) }
