package server

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/flxproto/felix/conn"
)

// This file schedules what subscriptions and cache watches deliver (issue
// 35: one goroutine per subscription held 64,000 goroutines for 16
// connections of one token, and one tenant's fan-out could stall the
// others). A subscription or watch is a feed: it holds no goroutine while
// it has nothing to deliver. The engine's Notify, or the end of its event
// stream's context, of the server's subscriptions or of its shard's
// placement (context.AfterFunc), puts it on its tenant's run queue; a
// bounded pool of delivery workers per tenant, under a broker-wide cap,
// takes ready feeds in turn and writes at most deliveryQuantum deliveries
// (or deliveryQuantumBytes) per turn before the feed goes back to the queue's tail. A client that
// stops reading blocks the worker writing to it, for at most
// EventWriteTimeout (the worker's watchdog then resets that stream): it
// can hold its own tenant's workers, never another tenant's.

const (
	// DefaultTenantDeliveryWorkers is Config.TenantDeliveryWorkers.
	DefaultTenantDeliveryWorkers = 8
	// DefaultDeliveryWorkers is Config.DeliveryWorkers: 32 tenants at
	// their cap.
	DefaultDeliveryWorkers = 256
	// deliveryQuantum and deliveryQuantumBytes bound what one turn of a
	// feed writes: this many deliveries, or the delivery that reaches
	// this many bytes.
	deliveryQuantum      = 8
	deliveryQuantumBytes = 256 << 10
)

// Feed states. A feed is on a run queue only when queued, and run by one
// worker only when running; a notification while running sets
// feedRunningNotified, so that the worker queues it again rather than
// leaving it idle (no wake-up is lost).
const (
	feedIdle uint32 = iota
	feedQueued
	feedRunning
	feedRunningNotified
	feedDone
)

// turnResult is how a feed's turn ended.
type turnResult uint8

const (
	turnIdle turnResult = iota // nothing ready: idle until notified
	turnMore                   // the quantum is used: back to the queue's tail
	turnDone                   // the feed ended
)

// feedKind is what differs between a subscription and a watch.
type feedKind interface {
	// turn writes at most deliveryQuantum deliveries.
	turn(f *feed, wd *writeWatchdog) turnResult
	// close ends the engine side once the feed ended.
	close()
}

// feed is one subscription or watch as the scheduler sees it.
type feed struct {
	s     *Server
	kind  feedKind
	es    *conn.EventStream
	slot  *subSlot
	t     *tenantRun // set by start
	state atomic.Uint32
	cut   atomic.Bool // the watchdog reset the stream
	next  *feed       // run queue link, guarded by t.mu
	stops []func() bool
}

// newFeed returns a feed owned by its caller (running) until start: what
// the engine notifies meanwhile is kept, not lost.
func (s *Server) newFeed() *feed {
	f := &feed{s: s}
	f.state.Store(feedRunning)
	return f
}

// notify marks f ready: queued if idle, flagged if a worker runs it.
func (f *feed) notify() {
	for {
		switch f.state.Load() {
		case feedIdle:
			if f.state.CompareAndSwap(feedIdle, feedQueued) {
				f.t.push(f)
				return
			}
		case feedRunning:
			if f.state.CompareAndSwap(feedRunning, feedRunningNotified) {
				return
			}
		default: // queued, already flagged, or done
			return
		}
	}
}

// start hands the feed to its tenant's workers: it is counted as a pump
// until it ends, and woken by the end of each context its turn checks.
func (f *feed) start(tenant string, kind feedKind, es *conn.EventStream, slot *subSlot, ends ...context.Context) {
	f.kind, f.es, f.slot = kind, es, slot
	f.s.wg.Add(1)
	f.s.pumps.Add(1)
	f.t = f.s.deliv.tenant(tenant)
	f.stops = append(f.stops, context.AfterFunc(es.Context(), f.notify), context.AfterFunc(f.s.ending, f.notify))
	for _, c := range ends {
		f.stops = append(f.stops, context.AfterFunc(c, f.notify))
	}
	f.state.Store(feedQueued) // history, or what was notified before start
	f.t.push(f)
}

// run gives f one turn on a worker and decides where it goes next.
func (f *feed) run(wd *writeWatchdog) {
	switch f.kind.turn(f, wd) {
	case turnDone:
		f.state.Store(feedDone)
		f.finish()
	case turnMore:
		f.state.Store(feedQueued)
		f.t.push(f)
	case turnIdle:
		if f.state.CompareAndSwap(feedRunning, feedIdle) {
			return
		}
		// Notified during the turn: what it announced may not have been
		// seen, so the feed runs again.
		f.state.Store(feedQueued)
		f.t.push(f)
	}
}

// finish releases what an ended feed held.
func (f *feed) finish() {
	for _, stop := range f.stops {
		stop()
	}
	f.kind.close()
	f.slot.release()
	f.s.deliv.untenant(f.t)
	f.s.pumps.Add(-1)
	f.s.wg.Done()
}

// ended reports whether a feed with nothing to deliver must end: its
// stream was cut or its context ended, or the server ends subscriptions.
func (f *feed) ended() bool {
	return f.cut.Load() || f.es.Context().Err() != nil || f.s.ending.Err() != nil
}

// cutWrite is the watchdog's action on a write that outlasted its timeout:
// the stream is reset, which fails the write, and the feed ends.
func (f *feed) cutWrite() {
	f.cut.Store(true)
	f.es.Abort()
}

// deliverySched runs feeds on bounded worker pools, one per tenant.
type deliverySched struct {
	s                   *Server
	tenantMax, totalMax int

	mu      sync.Mutex
	tenants map[string]*tenantRun // tenants with live feeds
	total   int                   // workers running (at most totalMax)
	waitq   []*tenantRun          // tenants with ready feeds and no worker, total at its cap
	nwait   atomic.Int32          // len(waitq), read by workers after each turn
	// dogs are the workers' watchdogs, at most totalMax, reused: free
	// are those of no running worker.
	dogs, free []*writeWatchdog
}

// tenantRun is one tenant's run queue and workers.
type tenantRun struct {
	d    *deliverySched
	name string
	// guarded by d.mu
	feeds  int
	queued atomic.Int64 // feeds on the run queue (DeliveryStats)
	// guarded by mu
	mu         sync.Mutex
	head, tail *feed
	workers    int
	waiting    bool // in d.waitq
}

// DeliveryStats are the delivery workers' figures.
type DeliveryStats struct {
	// Workers is the number of delivery workers running, Writing those in
	// a write now (a client that does not read keeps its worker writing
	// until EventWriteTimeout).
	Workers, Writing int
	// Queued counts the subscriptions and watches ready and waiting for
	// a worker; WaitingTenants the tenants among theirs that have no
	// worker because DeliveryWorkers are all running.
	Queued, WaitingTenants int
}

// DeliveryStats returns the delivery workers' figures now.
func (s *Server) DeliveryStats() DeliveryStats {
	d := &s.deliv
	d.mu.Lock()
	defer d.mu.Unlock()
	st := DeliveryStats{Workers: d.total, WaitingTenants: len(d.waitq)}
	for _, t := range d.tenants {
		st.Queued += int(t.queued.Load())
	}
	for _, w := range d.dogs {
		if w.writing.Load() != 0 {
			st.Writing++
		}
	}
	return st
}

// tenant returns the tenant's run queue, counting one more feed on it.
func (d *deliverySched) tenant(name string) *tenantRun {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tenants[name]
	if t == nil {
		if d.tenants == nil {
			d.tenants = make(map[string]*tenantRun)
		}
		t = &tenantRun{d: d, name: name}
		d.tenants[name] = t
	}
	t.feeds++
	return t
}

// untenant counts one feed less on t, forgetting a tenant with none (its
// queue is then empty: only live feeds are queued).
func (d *deliverySched) untenant(t *tenantRun) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t.feeds--; t.feeds == 0 && d.tenants[t.name] == t {
		delete(d.tenants, t.name)
	}
}

// push appends f (queued) to the run queue and starts a worker when the
// tenant's and the broker's caps allow; when the broker's cap refuses the
// tenant its first worker, the tenant waits for the next worker's slot.
func (t *tenantRun) push(f *feed) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f.next = nil
	if t.tail == nil {
		t.head = f
	} else {
		t.tail.next = f
	}
	t.tail = f
	t.queued.Add(1)
	if t.waiting || t.workers >= t.d.tenantMax {
		return
	}
	if t.d.acquire(t) {
		t.workers++
		t.d.s.wg.Add(1) // f is live (counted): never a first Add
		go t.work()
	}
}

// acquire takes a broker-wide worker slot for t, or queues t for one if
// it has no worker. The caller holds t.mu.
func (d *deliverySched) acquire(t *tenantRun) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.total < d.totalMax {
		d.total++
		return true
	}
	if t.workers == 0 {
		t.waiting = true
		d.waitq = append(d.waitq, t)
		d.nwait.Store(int32(len(d.waitq)))
	}
	return false
}

// release gives a worker's slot to the first waiting tenant, or back;
// wait first queues t (whose last worker yields with feeds ready).
func (d *deliverySched) release(t *tenantRun, wait bool) {
	d.mu.Lock()
	if wait {
		d.waitq = append(d.waitq, t)
	}
	var next *tenantRun
	if len(d.waitq) > 0 {
		next = d.waitq[0]
		d.waitq[0] = nil
		d.waitq = d.waitq[1:]
		if len(d.waitq) == 0 {
			d.waitq = nil // let the array go
		}
	} else {
		d.total--
	}
	d.nwait.Store(int32(len(d.waitq)))
	d.mu.Unlock()
	if next != nil {
		next.mu.Lock()
		next.waiting = false
		next.workers++
		next.mu.Unlock()
		d.s.wg.Add(1) // the caller, a worker, is counted
		go next.work()
	}
}

// work is a delivery worker: it runs the tenant's ready feeds one turn
// each until the queue is empty, or, after a turn, while another tenant
// waits for a worker slot (the slot then goes to that tenant).
func (t *tenantRun) work() {
	d := t.d
	defer d.s.wg.Done()
	wd := d.watchdog()
	defer d.putWatchdog(wd)
	for {
		t.mu.Lock()
		f := t.head
		if f == nil || d.nwait.Load() > 0 {
			t.workers--
			wait := f != nil && t.workers == 0
			if wait {
				t.waiting = true
			}
			t.mu.Unlock()
			d.release(t, wait)
			return
		}
		t.head = f.next
		if t.head == nil {
			t.tail = nil
		}
		f.next = nil
		t.queued.Add(-1)
		t.mu.Unlock()
		f.state.Store(feedRunning)
		f.run(wd)
	}
}

// watchdog returns a started watchdog for a worker, reusing one a worker
// left (a worker costs no timer allocation once the pool has grown).
func (d *deliverySched) watchdog() *writeWatchdog {
	d.mu.Lock()
	var wd *writeWatchdog
	if n := len(d.free); n > 0 {
		wd = d.free[n-1]
		d.free[n-1] = nil
		d.free = d.free[:n-1]
	} else {
		wd = d.s.watchdog()
		d.dogs = append(d.dogs, wd)
	}
	d.mu.Unlock()
	wd.start()
	return wd
}

// putWatchdog stops a worker's watchdog and keeps it for the next worker.
func (d *deliverySched) putWatchdog(wd *writeWatchdog) {
	wd.stop()
	d.mu.Lock()
	d.free = append(d.free, wd)
	d.mu.Unlock()
}
