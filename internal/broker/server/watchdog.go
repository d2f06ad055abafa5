package server

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultEventWriteTimeout bounds one write to an event stream.
const DefaultEventWriteTimeout = 30 * time.Second

// writeWatchdog bounds how long one event-stream write may block on a
// client that stopped reading: armed around each write, it cancels the
// pump's context when the write outlasts Config.EventWriteTimeout, which
// interrupts the write and resets the stream (a partial frame cannot be
// continued), so the pump, its frame and its queue are released.
//
// Arming and disarming are two atomic stores of the write's start time
// (no timer operation per frame: resetting and stopping a runtime timer
// around every write took the timer heap's lock twice per frame, the
// largest broker-side cost of a pump in the end-to-end profile). One timer
// per pump checks the write in progress: it fires at most every timeout,
// and when a write is running it re-arms itself for the moment that write
// reaches the timeout, so a stuck write is still cut at exactly its
// deadline.
type writeWatchdog struct {
	s       *Server
	t       *time.Timer
	cancel  func() // cancels the pump's context and resets the stream
	stopCtx context.CancelFunc
	d       time.Duration
	base    time.Time
	// writing is the start of the write in progress, as nanoseconds
	// since base plus one; 0 when no write runs.
	writing atomic.Int64
	mu      sync.Mutex // serialises check with stop
	stopped bool
}

// watchdog returns the pump's context (a child of parent) and its
// watchdog, disarmed. On a timeout it cancels that context and calls
// abort (which resets the event stream), so a write blocked under the
// stream's own context (no context.AfterFunc per write: frames are
// written under it) is cut as well as one under the pump's context.
func (s *Server) watchdog(parent context.Context, abort func()) (context.Context, *writeWatchdog) {
	ctx, cancel := context.WithCancel(parent)
	w := &writeWatchdog{s: s, cancel: func() { cancel(); abort() }, stopCtx: cancel, d: s.cfg.EventWriteTimeout, base: time.Now()}
	w.t = time.AfterFunc(w.d, w.check)
	return ctx, w
}

func (w *writeWatchdog) now() int64 { return int64(time.Since(w.base)) + 1 }

// check runs on the timer: it cancels the pump when the write in progress
// has reached the timeout, and otherwise re-arms for when it would.
func (w *writeWatchdog) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	next := w.d
	if st := w.writing.Load(); st != 0 {
		elapsed := time.Duration(w.now() - st)
		if elapsed >= w.d {
			w.s.st.writeTimeouts.Add(1)
			w.s.log.Debug("event stream write timed out: stream reset", "timeout", w.d)
			w.cancel()
			return
		}
		next = w.d - elapsed
	}
	w.t.Reset(next)
}

func (w *writeWatchdog) arm()    { w.writing.Store(w.now()) }
func (w *writeWatchdog) disarm() { w.writing.Store(0) }

func (w *writeWatchdog) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.t.Stop()
	w.stopCtx()
}
