package engine

import (
	"sync"

	"github.com/flxproto/felix"
)

// pubGate lets StopPublishes wait for the publishes in flight: every
// Publish holds it shared.
type pubGate struct {
	mu      sync.RWMutex
	stopped bool
}

// enter admits a publish (release with pubGate.mu.RUnlock) or returns the
// draining refusal.
func (g *pubGate) enter() error {
	g.mu.RLock()
	if g.stopped {
		g.mu.RUnlock()
		return &Error{Code: felix.CodeDraining, Retry: felix.RetryRetry, Message: "broker draining: publish refused, nothing written"}
	}
	return nil
}

// StopPublishes makes every later Publish fail with draining (retry
// class retry: nothing was written) and returns once the publishes in
// flight have finished, so that from then on the set of records to
// deliver is fixed.
func (e *Engine) StopPublishes() {
	e.gate.mu.Lock()
	e.gate.stopped = true
	e.gate.mu.Unlock()
}

// Undelivered returns how many subscriptions and watches still have
// something to deliver: queued batches or events, history not yet read,
// or a delivery handed out by Next or TryNext whose next call has not
// come yet (the transport is still writing it).
func (e *Engine) Undelivered() int {
	e.mu.Lock()
	subs := make([]*Subscription, 0, len(e.subs))
	for s := range e.subs {
		subs = append(subs, s)
	}
	watches := make([]*Watch, 0, len(e.watches))
	for w := range e.watches {
		watches = append(watches, w)
	}
	e.mu.Unlock()
	n := 0
	for _, s := range subs {
		if s.backlogged() {
			n++
		}
	}
	for _, w := range watches {
		if w.backlogged() {
			n++
		}
	}
	return n
}

// Drain ends every subscription and watch for a shutdown: one that has
// delivered everything is closed (its Next returns ErrClosed: a clean
// end), one that has not gets a terminal delivery instead: Delivery.Drained
// with ResumeFrom (durable streams) for a subscription, a lag report for a
// watch, so that its client resumes elsewhere or later. New subscriptions
// and watches are refused (draining). Call StopPublishes first.
func (e *Engine) Drain() {
	e.mu.Lock()
	e.closed = true
	e.drainedFlag.Store(true)
	subs := make([]*Subscription, 0, len(e.subs))
	for s := range e.subs {
		subs = append(subs, s)
	}
	watches := make([]*Watch, 0, len(e.watches))
	for w := range e.watches {
		watches = append(watches, w)
	}
	e.mu.Unlock()
	for _, s := range subs {
		s.drain()
	}
	for _, w := range watches {
		w.drain()
	}
}

// Draining reports whether Drain was called.
func (e *Engine) Draining() bool { return e.drainedFlag.Load() }

func (s *Subscription) backlogged() bool {
	return len(s.q) > 0 || s.handedOut.Load() || s.histPending.Load() || s.lagPending()
}

// lagPending reports whether s lagged (or was evicted) and its consumer
// has not taken the lag report yet: it lost records, so its end must not
// be a clean one.
func (s *Subscription) lagPending() bool { return lagPending(s.lagged, s.done) }

// lagPending reports whether lagged is closed and done is not: a lag
// report (closing lagged) is taken by closing done.
func lagPending(lagged, done <-chan struct{}) bool {
	select {
	case <-lagged:
	default:
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// drain ends s for a shutdown (see Engine.Drain).
func (s *Subscription) drain() {
	sh := s.sh
	sh.mu.Lock()
	if (s.stopped && !s.lagPending()) || !s.backlogged() {
		sh.mu.Unlock()
		s.Close()
		return
	}
	s.stopped = true // a lagged one ends drained: it resumes where it stopped
	delete(sh.subs, s)
	sh.mu.Unlock()
	close(s.drained)
	s.wake()
}

// drainDelivery is the terminal delivery of a subscription ended by Drain,
// or closed by the engine (closedWithBacklog), with records undelivered.
// Called from Next's goroutine: it knows where delivery stopped. The
// queued batches are given back by Close.
func (s *Subscription) drainDelivery() Delivery {
	s.terminal = true
	resume := s.hist
	if r, ok := s.evictedResume(); ok {
		resume = r // what the queue holds came after batches dropped
	} else if s.hist >= s.histEnd {
		resume = s.liveNext
		select {
		case b := <-s.q:
			resume = b.BaseOffset
			s.queued.Add(-b.cost())
			b.release(s.e)
		default:
		}
	}
	s.Close()
	return Delivery{Drained: true, ResumeFrom: resume, HasResume: s.info.Durable}
}

func (w *Watch) backlogged() bool {
	return len(w.q) > 0 || w.catchupN.Load() > 0 || w.handedOut.Load() || w.lagPending()
}

// lagPending reports whether w lagged (or was evicted) and its consumer
// has not taken the lag report yet.
func (w *Watch) lagPending() bool { return lagPending(w.lagged, w.done) }

// drainDelivery is the terminal delivery of a watch ended by Drain with
// events undelivered: a lag report naming the first of them (Next's
// goroutine).
func (w *Watch) drainDelivery() WatchDelivery {
	w.terminal = true
	resume := w.resumeFrom
	if len(w.catchup) > 0 {
		resume = w.catchup[0].Offset
	} else if r, ok := w.evictedResume(); ok {
		resume = r // what the queue holds came after events dropped
	} else {
		select {
		case we := <-w.q:
			w.queued.Add(-we.cost)
			we.acct.release(w.e)
			resume = we.ev.Offset
		default:
		}
	}
	w.Close()
	return WatchDelivery{Lagged: true, ResumeFrom: resume}
}

// drain ends w for a shutdown: closed when everything was delivered,
// otherwise ended with a lag report naming the first undelivered offset.
func (w *Watch) drain() {
	c := w.c
	c.mu.Lock()
	lagged := w.lagPending()
	if (w.stopped && !lagged) || !w.backlogged() {
		c.mu.Unlock()
		w.Close()
		return
	}
	w.stopped = true
	if !lagged { // a lagged one keeps its first dropped event
		w.resumeFrom = c.next // nothing queued: the first write not delivered
	}
	delete(c.watches, w)
	c.mu.Unlock()
	close(w.drained)
	w.wake()
}
