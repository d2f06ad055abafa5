package server

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultEventWriteTimeout bounds one write to an event stream.
const DefaultEventWriteTimeout = 30 * time.Second

// writeWatchdog bounds how long one event-stream write may block on a
// client that stopped reading: each delivery worker has one, armed around
// each write with the feed written to; when a write outlasts
// Config.EventWriteTimeout it resets that feed's stream, which fails the
// write (a partial frame cannot be continued), so the worker goes on with
// other feeds and the stalled feed ends, releasing its frame and queue.
//
// Arming and disarming are atomic stores (no timer operation per frame:
// resetting and stopping a runtime timer around every write took the timer
// heap's lock twice per frame, the largest broker-side cost of a pump in
// the end-to-end profile). One timer per worker checks the write in
// progress: it fires at most every timeout, and when a write is running it
// re-arms itself for the moment that write reaches the timeout, so a stuck
// write is still cut at exactly its deadline.
type writeWatchdog struct {
	s    *Server
	t    *time.Timer
	d    time.Duration
	base time.Time
	// target is the feed written to; writing is the start of the write
	// in progress, as nanoseconds since base plus one; 0 when no write
	// runs. arm stores target first, disarm zeroes writing, so a check
	// that sees the same writing before and after loading target has the
	// write's own feed.
	target  atomic.Pointer[feed]
	writing atomic.Int64
	mu      sync.Mutex // serialises check with start and stop
	stopped bool
}

// watchdog returns a watchdog, stopped: start it for a worker.
func (s *Server) watchdog() *writeWatchdog {
	return &writeWatchdog{s: s, d: s.cfg.EventWriteTimeout, base: time.Now(), stopped: true}
}

// start runs the watchdog's timer, disarmed, for a worker.
func (w *writeWatchdog) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = false
	w.writing.Store(0)
	if w.t == nil {
		w.t = time.AfterFunc(w.d, w.check)
		return
	}
	w.t.Reset(w.d)
}

func (w *writeWatchdog) now() int64 { return int64(time.Since(w.base)) + 1 }

// check runs on the timer: it cuts the write in progress when it has
// reached the timeout, and otherwise re-arms for when it would.
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
			if f := w.target.Load(); f != nil && w.writing.Load() == st {
				w.s.st.writeTimeouts.Add(1)
				w.s.log.Debug("event stream write timed out: stream reset", "timeout", w.d)
				f.cutWrite()
			}
		} else {
			next = w.d - elapsed
		}
	}
	w.t.Reset(next)
}

// arm marks the start of a write to f's stream; disarm its end.
func (w *writeWatchdog) arm(f *feed) {
	w.target.Store(f)
	w.writing.Store(w.now())
}

func (w *writeWatchdog) disarm() { w.writing.Store(0) }

func (w *writeWatchdog) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.t.Stop()
	w.target.Store(nil) // the feed may end: do not keep it
}
