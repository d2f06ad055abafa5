package conn

import (
	"time"
)

// This file schedules the reading of unauthenticated streams: a bounded
// set per connection (MaxUnauthStreams), of which PreAuthStreams are read
// at once by as many worker goroutines; the rest wait in a FIFO queue.
// Every stream has its own deadline (AuthTimeout from its arrival), kept
// while it waits and while it is read. A stream whose auth frame header has
// not fully arrived gives its slot up after preAuthSlice when others wait,
// and goes to the back of the queue, so streams that send nothing (all the
// streams below the highest id a client opened, for example) cannot starve
// one that sent its auth. While nobody waits, a slot waits for its header
// without polling; a stream joining the queue interrupts those waits.

// preAuthSlice is how long a read slot waits for an auth frame header
// before it serves a waiting stream instead.
const preAuthSlice = 50 * time.Millisecond

type handshakeResult uint8

const (
	hsFailed handshakeResult = iota // refused, timed out or ended: forgotten
	hsOK                            // authenticated: handed to AcceptStream
	hsYield                         // nothing to read yet: back to the queue
)

// preAuth is the per-connection scheduler (guarded by ServerConn.mu).
type preAuth struct {
	queue   []*Stream // waiting for a read slot, oldest first
	pending int       // unauthenticated streams: queued + being read
	workers int       // goroutines holding a read slot
	refused int       // streams refused over the budget
	idle    map[*Stream]struct{}
	sweep   *time.Timer
	closed  bool
}

// armHeaderWait sets the read deadline of a slot waiting for st's auth
// header: a slice when other streams wait for the slot, else st's own
// deadline, in which case st is registered to be interrupted when a
// stream joins the queue.
func (c *ServerConn) armHeaderWait(st *Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	until := st.authDeadline
	if len(c.pre.queue) > 0 {
		if slice := time.Now().Add(preAuthSlice); until.IsZero() || slice.Before(until) {
			until = slice
		}
	} else {
		if c.pre.idle == nil {
			c.pre.idle = make(map[*Stream]struct{})
		}
		c.pre.idle[st] = struct{}{}
	}
	st.recv.SetReadDeadline(until)
}

func (c *ServerConn) endHeaderWait(st *Stream) {
	c.mu.Lock()
	delete(c.pre.idle, st)
	c.mu.Unlock()
}

// admit takes a newly accepted stream: it is reset when none of the
// connection's streams authenticated yet and it already has
// MaxUnauthStreams unauthenticated streams, else read by a free worker or
// queued. Once a stream authenticated, the client holds credentials and
// its streams are bounded by the connection's stream limits (MaxStreams
// of each kind, which QUIC enforces) as its authenticated streams are:
// the burst of a client that sets up many subscriptions at once (one
// stream each) is queued, not refused.
func (c *ServerConn) admit(st *Stream) {
	cfg := &c.l.cfg
	if cfg.AuthTimeout > 0 {
		st.authDeadline = time.Now().Add(cfg.AuthTimeout)
	}
	c.mu.Lock()
	if c.pre.closed || (c.pre.pending >= cfg.MaxUnauthStreams && !c.authed.Load()) {
		c.mu.Unlock()
		c.l.st.refusedStreams.Add(1)
		c.log.Debug("stream refused", "reason", "unauthenticated stream budget", "limit", cfg.MaxUnauthStreams)
		c.hookRefused(st, errPreAuthBudget)
		resetStream(st.recv, st.send, ResetPreAuthBudget)
		c.mu.Lock()
		c.pre.refused++
		flood := c.pre.refused > cfg.MaxUnauthStreams && !c.authed.Load()
		c.mu.Unlock()
		if flood {
			// Twice the budget opened and not one stream authenticated: not
			// a client, and each refused stream QUIC still tracks costs
			// memory until the connection ends.
			c.log.Debug("connection closed", "reason", "unauthenticated stream flood", "refused", cfg.MaxUnauthStreams+1)
			c.qc.CloseWithError(CloseAuthTimeout, "too many unauthenticated streams")
		}
		return
	}
	c.pre.pending++
	if c.pre.workers < cfg.PreAuthStreams {
		c.pre.workers++
		c.mu.Unlock()
		c.wg.Add(1)
		go c.work(st)
		return
	}
	c.enqueueLocked(st)
	c.mu.Unlock()
}

// enqueueLocked appends st to the queue and arms the sweep timer for the
// oldest deadline.
func (c *ServerConn) enqueueLocked(st *Stream) {
	c.pre.queue = append(c.pre.queue, st)
	if len(c.pre.queue) == 1 && !st.authDeadline.IsZero() {
		c.armSweepLocked(st.authDeadline)
	}
	// Slots waiting without a slice for a header take one now.
	now := time.Now()
	for idle := range c.pre.idle {
		idle.recv.SetReadDeadline(now)
		delete(c.pre.idle, idle)
	}
}

func (c *ServerConn) armSweepLocked(at time.Time) {
	d := time.Until(at)
	if c.pre.sweep == nil {
		c.pre.sweep = time.AfterFunc(d, c.sweepExpired)
	} else {
		c.pre.sweep.Reset(d)
	}
}

// sweepExpired resets the queued streams whose deadline passed while they
// waited for a read slot.
func (c *ServerConn) sweepExpired() {
	c.mu.Lock()
	expired := c.popExpiredLocked(time.Now())
	if len(c.pre.queue) > 0 && !c.pre.closed && !c.pre.queue[0].authDeadline.IsZero() {
		c.armSweepLocked(c.pre.queue[0].authDeadline)
	}
	c.mu.Unlock()
	c.expire(expired)
}

// popExpiredLocked removes the expired streams from the head of the queue
// (deadlines grow along it, except for yielded streams, which keep theirs:
// those are found when they reach the head).
func (c *ServerConn) popExpiredLocked(now time.Time) []*Stream {
	var out []*Stream
	for len(c.pre.queue) > 0 {
		st := c.pre.queue[0]
		if st.authDeadline.IsZero() || now.Before(st.authDeadline) {
			break
		}
		out = append(out, st)
		c.pre.queue[0] = nil
		c.pre.queue = c.pre.queue[1:]
		c.pre.pending--
	}
	return out
}

func (c *ServerConn) expire(sts []*Stream) {
	for _, st := range sts {
		c.l.st.expiredStreams.Add(1)
		resetStream(st.recv, st.send, ResetAuthTimeout)
		c.hookRefused(st, errAuthTimeout)
	}
	if len(sts) > 0 {
		c.log.Debug("unauthenticated streams expired", "n", len(sts))
	}
}

// othersWaiting reports whether a stream waits for a read slot.
func (c *ServerConn) othersWaiting() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pre.queue) > 0
}

// work is one read slot: it authenticates st, then the queued streams one
// after the other, and ends when the queue is empty.
func (c *ServerConn) work(st *Stream) {
	defer c.wg.Done()
	for st != nil {
		res := c.handshake(st)
		c.hookHandshake(st, res)
		if res == hsOK {
			c.deliver(st)
		}
		c.mu.Lock()
		if res == hsYield {
			c.enqueueLocked(st)
		} else {
			c.pre.pending--
		}
		expired := c.popExpiredLocked(time.Now())
		st = nil
		if len(c.pre.queue) > 0 {
			st = c.pre.queue[0]
			c.pre.queue[0] = nil
			c.pre.queue = c.pre.queue[1:]
		} else {
			c.pre.workers--
		}
		c.mu.Unlock()
		c.expire(expired)
	}
}

// deliver hands an authenticated stream to AcceptStream without holding a
// read slot while the application is busy.
func (c *ServerConn) deliver(st *Stream) {
	ctx := c.qc.Context()
	select {
	case c.streams <- st:
		return
	default:
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case c.streams <- st:
		case <-ctx.Done():
			st.Abort()
		}
	}()
}

// closePreAuth stops the sweep timer and drops the queue once the
// connection ended (its streams are gone with it).
func (c *ServerConn) closePreAuth() {
	c.mu.Lock()
	c.pre.closed = true
	if c.pre.sweep != nil {
		c.pre.sweep.Stop()
	}
	clear(c.pre.queue)
	c.pre.queue = nil
	c.mu.Unlock()
}
