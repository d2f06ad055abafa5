// Package interposer is a UDP relay that sits in front of one broker and
// injects link faults on command: it is how tests (and the reference
// cluster's control endpoint) make a client's QUIC connection lose every
// datagram for a while, die for good, or stall.
//
// Each client address gets a session with an upstream socket of its own,
// so the broker sees one 4-tuple per client. The faults:
//
//   - Drop(h): every datagram both ways is discarded for h, then the link
//     heals by itself.
//   - Reset(): every session open now is dead for good (its datagrams are
//     discarded both ways forever); a new connection gets through at once,
//     even from the same client address (a QUIC Initial packet from a dead
//     session's address opens a fresh session).
//   - Stall(h): every datagram is held until h from now and then delivered
//     in arrival order.
//
// QUIC authenticates every packet, so the relay forges nothing: a client
// learns of a drop or a reset from its idle timeout.
package interposer

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Limits.
const (
	// MaxSessions bounds the client sessions; datagrams from further
	// client addresses are discarded.
	MaxSessions = 1024
	// QueueLen bounds the datagrams waiting for delivery (held by a stall);
	// beyond it datagrams are discarded, as a full router queue would.
	QueueLen    = 8192
	maxDatagram = 65535
)

// Fault names accepted by Apply.
const (
	FaultDrop  = "drop"
	FaultReset = "reset"
	FaultStall = "stall"
)

// ErrUnknownFault is returned by Apply for a fault it does not know.
var ErrUnknownFault = errors.New("interposer: unknown fault")

// Relay is a running UDP relay. Create it with Listen; Close stops it.
type Relay struct {
	pc     *net.UDPConn
	target *net.UDPAddr
	log    *slog.Logger

	mu         sync.Mutex
	sessions   map[string]*session
	dropUntil  time.Time
	stallUntil time.Time
	closed     bool

	q      chan packet
	healed chan struct{} // Heal releases held datagrams
	done   chan struct{}
	wg     sync.WaitGroup

	stats Stats
}

// Stats counts datagrams.
type Stats struct {
	Forwarded, Dropped, Stalled, Sessions, DeadDiscarded uint64
}

type session struct {
	client *net.UDPAddr
	up     *net.UDPConn
	dead   bool
}

type packet struct {
	data    []byte
	release time.Time
	s       *session
	toUp    bool // client → broker
}

// Listen starts a relay on listen (e.g. "127.0.0.1:0") forwarding to the
// UDP address target. log may be nil.
func Listen(listen, target string, log *slog.Logger) (*Relay, error) {
	ta, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, fmt.Errorf("interposer: target: %w", err)
	}
	la, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		return nil, fmt.Errorf("interposer: listen: %w", err)
	}
	pc, err := net.ListenUDP("udp", la)
	if err != nil {
		return nil, fmt.Errorf("interposer: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Relay{pc: pc, target: ta, log: log, sessions: make(map[string]*session),
		q: make(chan packet, QueueLen), healed: make(chan struct{}, 1), done: make(chan struct{})}
	r.wg.Add(2)
	go r.readClients()
	go r.deliver()
	return r, nil
}

// Addr returns the address clients dial.
func (r *Relay) Addr() net.Addr { return r.pc.LocalAddr() }

// Target returns the broker address the relay forwards to.
func (r *Relay) Target() net.Addr { return r.target }

// Drop discards every datagram, both ways, for hold from now.
func (r *Relay) Drop(hold time.Duration) {
	r.mu.Lock()
	r.dropUntil = time.Now().Add(hold)
	r.mu.Unlock()
	r.log.Info("link fault: drop", "hold", hold)
}

// Stall holds every datagram until hold from now, then delivers them in
// order.
func (r *Relay) Stall(hold time.Duration) {
	r.mu.Lock()
	r.stallUntil = time.Now().Add(hold)
	r.mu.Unlock()
	r.log.Info("link fault: stall", "hold", hold)
}

// Reset kills every session open now: their datagrams are discarded both
// ways from now on. New connections pass at once.
func (r *Relay) Reset() {
	r.mu.Lock()
	n := 0
	for _, s := range r.sessions {
		if !s.dead {
			s.dead = true
			n++
		}
	}
	r.mu.Unlock()
	r.log.Info("link fault: reset", "sessions", n)
}

// Heal ends a drop or stall now (held datagrams are delivered at once).
// Reset sessions stay dead.
func (r *Relay) Heal() {
	r.mu.Lock()
	r.dropUntil, r.stallUntil = time.Time{}, time.Time{}
	r.mu.Unlock()
	select {
	case r.healed <- struct{}{}:
	default:
	}
}

// Apply injects the named fault: FaultDrop and FaultStall for hold,
// FaultReset at once (hold is ignored).
func (r *Relay) Apply(fault string, hold time.Duration) error {
	switch fault {
	case FaultDrop:
		r.Drop(hold)
	case FaultStall:
		r.Stall(hold)
	case FaultReset:
		r.Reset()
	default:
		return fmt.Errorf("%w %q (want drop, reset or stall)", ErrUnknownFault, fault)
	}
	return nil
}

// Held returns how long the drop and the stall in force last from now (0
// when none is).
func (r *Relay) Held() (drop, stall time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	return max(r.dropUntil.Sub(now), 0), max(r.stallUntil.Sub(now), 0)
}

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Close stops the relay, closes every socket and waits for its goroutines.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.wg.Wait()
		return nil
	}
	r.closed = true
	ups := make([]*net.UDPConn, 0, len(r.sessions))
	for _, s := range r.sessions {
		ups = append(ups, s.up)
	}
	r.mu.Unlock()
	close(r.done)
	err := r.pc.Close()
	for _, u := range ups {
		_ = u.Close()
	}
	r.wg.Wait()
	return err
}

// isInitial reports whether b is a QUIC long-header Initial packet (v1).
func isInitial(b []byte) bool {
	return len(b) >= 5 && b[0]&0xC0 == 0xC0 && (b[0]>>4)&0x3 == 0
}

func (r *Relay) readClients() {
	defer r.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := r.pc.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		s := r.session(from, isInitial(buf[:n]))
		if s == nil {
			continue
		}
		r.enqueue(s, buf[:n], true)
	}
}

// session returns the live session of client address a, opening one when
// there is none (or the old one is dead and the datagram opens a new
// connection); nil means discard.
func (r *Relay) session(a *net.UDPAddr, initial bool) *session {
	key := a.String()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	s := r.sessions[key]
	if s != nil && (!s.dead || !initial) {
		if s.dead {
			r.stats.DeadDiscarded++
			return nil
		}
		return s
	}
	if s == nil && len(r.sessions) >= MaxSessions {
		r.stats.Dropped++
		return nil
	}
	up, err := net.DialUDP("udp", nil, r.target)
	if err != nil {
		r.log.Warn("interposer: upstream socket", "err", err)
		return nil
	}
	if s != nil {
		_ = s.up.Close() // the dead session's reader ends
	}
	ns := &session{client: a, up: up}
	r.sessions[key] = ns
	r.stats.Sessions++
	r.wg.Add(1)
	go r.readUpstream(ns)
	return ns
}

func (r *Relay) readUpstream(s *session) {
	defer r.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, err := s.up.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ICMP port unreachable while the broker restarts
		}
		r.enqueue(s, buf[:n], false)
	}
}

// enqueue applies the current fault to one datagram and queues it for
// delivery (a copy: the read buffer is reused).
func (r *Relay) enqueue(s *session, b []byte, toUp bool) {
	now := time.Now()
	r.mu.Lock()
	switch {
	case s.dead:
		r.stats.DeadDiscarded++
		r.mu.Unlock()
		return
	case now.Before(r.dropUntil):
		r.stats.Dropped++
		r.mu.Unlock()
		return
	}
	release := now
	if now.Before(r.stallUntil) {
		release = r.stallUntil
		r.stats.Stalled++
	}
	r.mu.Unlock()
	p := packet{data: append([]byte(nil), b...), release: release, s: s, toUp: toUp}
	select {
	case r.q <- p:
	default:
		r.mu.Lock()
		r.stats.Dropped++
		r.mu.Unlock()
	}
}

// deliver writes queued datagrams in arrival order, each not before its
// release time.
func (r *Relay) deliver() {
	defer r.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var p packet
		select {
		case p = <-r.q:
		case <-r.done:
			return
		}
		for {
			r.mu.Lock()
			st := r.stallUntil
			r.mu.Unlock()
			d := time.Until(p.release)
			if d <= 0 || p.release.After(st) { // due, or the stall was healed
				break
			}
			t.Reset(d)
			select {
			case <-t.C:
			case <-r.healed:
			case <-r.done:
				return
			}
		}
		r.mu.Lock()
		dead := p.s.dead
		if !dead {
			r.stats.Forwarded++
		} else {
			r.stats.DeadDiscarded++
		}
		r.mu.Unlock()
		if dead {
			continue
		}
		if p.toUp {
			_, _ = p.s.up.Write(p.data)
		} else {
			_, _ = r.pc.WriteToUDP(p.data, p.s.client)
		}
	}
}
