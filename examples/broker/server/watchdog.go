package server

import (
	"context"
	"time"
)

// DefaultEventWriteTimeout bounds one write to an event stream.
const DefaultEventWriteTimeout = 30 * time.Second

// writeWatchdog bounds how long one event-stream write may block on a
// client that stopped reading: armed around each write, it cancels the
// pump's context when the write outlasts Config.EventWriteTimeout, which
// interrupts the write and resets the stream (a partial frame cannot be
// continued), so the pump, its frame and its queue are released. One timer
// per pump: a write allocates nothing for it.
type writeWatchdog struct {
	s      *Server
	t      *time.Timer
	cancel context.CancelFunc
	d      time.Duration
}

// watchdog returns the pump's context (a child of parent) and its
// watchdog, disarmed.
func (s *Server) watchdog(parent context.Context) (context.Context, *writeWatchdog) {
	ctx, cancel := context.WithCancel(parent)
	w := &writeWatchdog{s: s, cancel: cancel, d: s.cfg.EventWriteTimeout}
	w.t = time.AfterFunc(time.Hour, func() {
		s.st.writeTimeouts.Add(1)
		s.log.Debug("event stream write timed out: stream reset", "timeout", w.d)
		cancel()
	})
	w.t.Stop()
	return ctx, w
}

func (w *writeWatchdog) arm()    { w.t.Reset(w.d) }
func (w *writeWatchdog) disarm() { w.t.Stop() }
func (w *writeWatchdog) stop()   { w.t.Stop(); w.cancel() }
