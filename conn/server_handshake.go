package conn

import (
	"container/list"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// This file admits new connections. A connection is a handshake from its
// first packet until its QUIC handshake completes, then an established
// connection until it closes. The two are budgeted apart, so that
// handshakes nobody finishes cannot take the places of connections:
//
//   - established connections are capped by MaxConnections, charged when the
//     handshake completes;
//   - handshakes in progress are capped by MaxHandshakes, and a verified
//     source address (one that answered a Retry) by MaxHandshakesPerAddr;
//   - once RetryHandshakes handshakes are in progress, or the source address
//     of a new one already has MaxHandshakesPerAddr in progress, the new one
//     must first prove its source address with a QUIC Retry (RFC 9000
//     §8.1.2): the server answers its Initial statelessly, and a peer that
//     never reads (or spoofs its address) costs nothing more;
//   - a handshake lasts at most twice the QUIC HandshakeIdleTimeout
//     (DefaultHandshakeIdleTimeout on the server: 4 s);
//   - an address from which a connection authenticated recently (one of
//     the last knownAddrsMax such addresses) is not asked for a Retry
//     while fewer than half of MaxHandshakes are in progress and it has
//     fewer than MaxHandshakesPerAddr in progress itself: a full
//     authenticated connection proved it more than a Retry would. Under a
//     flood of handshakes from many addresses that follow Retries (a
//     distributed guessing attack) quic-go answers Retries from one
//     goroutine behind an 8-deep queue and drops the Initials that do not
//     fit, so a client asked for a Retry may see its Initials dropped for
//     seconds and its QUIC retransmissions back off to tens of seconds
//     (TestLegitDialsUnderDistributedGuessing); a known client reconnecting
//     skips that queue. A peer that spoofs a known address gets no more
//     than MaxHandshakesPerAddr half-open handshakes from it, and at most
//     half of MaxHandshakes from all of them.
//
// A connection beyond a budget is refused during the handshake with the
// transport error CONNECTION_REFUSED; nothing is allocated for it.

const (
	// DefaultMaxHandshakes is ServerConfig.MaxHandshakes.
	DefaultMaxHandshakes = 1024
	// DefaultRetryHandshakes is ServerConfig.RetryHandshakes.
	DefaultRetryHandshakes = 64
	// DefaultMaxHandshakesPerAddr is ServerConfig.MaxHandshakesPerAddr:
	// the handshakes in progress from one verified source IP address (a
	// Retry proved the peer receives there); an address with that many in
	// progress is also asked to prove itself with a Retry before its next
	// one.
	DefaultMaxHandshakesPerAddr = 8
	// DefaultHandshakeIdleTimeout is the server's QUIC HandshakeIdleTimeout
	// when ServerConfig.QUIC leaves it zero: a handshake is abandoned after
	// twice as long (quic-go's rule), releasing its place.
	DefaultHandshakeIdleTimeout = 2 * time.Second
)

// knownAddrsMax bounds the addresses remembered as having authenticated
// (the most recent ones; about 100 bytes each).
const knownAddrsMax = 4096

var (
	errTooManyHandshakes = errors.New("conn: handshakes in progress at the limit")
	errAddrHandshakes    = errors.New("conn: handshakes in progress from this address at the limit")
)

// admission counts handshakes in progress, in total and per source IP,
// and remembers the addresses that authenticated recently.
type admission struct {
	handshaking atomic.Int64
	mu          sync.Mutex
	byAddr      map[netip.Addr]*addrHandshakes // at most MaxHandshakes entries
	known       map[netip.Addr]*list.Element   // at most knownAddrsMax entries
	knownOrder  list.List                      // of netip.Addr, least recent first
}

// remember records that a connection from ip authenticated.
func (a *admission) remember(ip netip.Addr) {
	if !ip.IsValid() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.known[ip]; e != nil {
		a.knownOrder.MoveToBack(e)
		return
	}
	if a.known == nil {
		a.known = make(map[netip.Addr]*list.Element)
	}
	if a.knownOrder.Len() >= knownAddrsMax {
		delete(a.known, a.knownOrder.Remove(a.knownOrder.Front()).(netip.Addr))
	}
	a.known[ip] = a.knownOrder.PushBack(ip)
}

type addrHandshakes struct{ all, verified int }

// connSlot is what a connection holds of the budgets; it is stored in the
// connection's context and released when that context ends.
type connSlot struct {
	mu          sync.Mutex
	ip          netip.Addr
	verified    bool
	handshaking bool // holds a handshake place (else: nothing, or a connection place)
	established bool // holds a connection place
	ended       bool
}

type slotKey struct{}

func addrIP(a net.Addr) netip.Addr {
	if ua, ok := a.(*net.UDPAddr); ok {
		ip, _ := netip.AddrFromSlice(ua.IP)
		return ip.Unmap()
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// verifySourceAddress is the transport's VerifySourceAddress: a Retry is
// asked for once RetryHandshakes are in progress, or when the address
// already has MaxHandshakesPerAddr in progress.
func (l *Listener) verifySourceAddress(a net.Addr) bool {
	ip := addrIP(a)
	l.adm.mu.Lock()
	h, known := l.adm.byAddr[ip], l.adm.known[ip] != nil
	ask := h != nil && l.cfg.MaxHandshakesPerAddr > 0 && h.all >= l.cfg.MaxHandshakesPerAddr
	l.adm.mu.Unlock()
	if r := l.cfg.RetryHandshakes; !ask && r > 0 {
		n := l.adm.handshaking.Load()
		// An address that authenticated recently is spared the Retry
		// while fewer than half of MaxHandshakes are in progress.
		ask = n >= int64(r) && (!known || l.cfg.MaxHandshakes > 0 && n >= int64(l.cfg.MaxHandshakes/2))
	}
	if ask {
		l.st.retries.Add(1)
	}
	return ask
}

// connContext is the transport's ConnContext: it charges a new connection
// to the handshake budgets (refusing it beyond them, which quic-go answers
// with CONNECTION_REFUSED) and releases whatever the connection holds when
// it ends.
func (l *Listener) connContext(ctx context.Context, ci *quic.ClientInfo) (context.Context, error) {
	if max := l.cfg.MaxConnections; max > 0 && l.st.live.Load() >= int64(max) {
		return nil, l.refuseConn(&l.st.refusedConns, errTooManyConnections, "max_client_connections", max)
	}
	s := &connSlot{ip: addrIP(ci.RemoteAddr), verified: ci.AddrVerified}
	if max := l.cfg.MaxHandshakes; max > 0 {
		if n := l.adm.handshaking.Add(1); n > int64(max) {
			l.adm.handshaking.Add(-1)
			return nil, l.refuseConn(&l.st.refusedHandshakes, errTooManyHandshakes, "max_handshakes", max)
		}
	} else {
		l.adm.handshaking.Add(1)
	}
	l.adm.mu.Lock()
	h := l.adm.byAddr[s.ip]
	if h == nil {
		h = &addrHandshakes{}
	}
	if s.verified && l.cfg.MaxHandshakesPerAddr > 0 && h.verified >= l.cfg.MaxHandshakesPerAddr {
		l.adm.mu.Unlock()
		l.adm.handshaking.Add(-1)
		return nil, l.refuseConn(&l.st.refusedHandshakes, errAddrHandshakes, "max_handshakes_per_addr", l.cfg.MaxHandshakesPerAddr)
	}
	if l.adm.byAddr == nil {
		l.adm.byAddr = make(map[netip.Addr]*addrHandshakes)
	}
	l.adm.byAddr[s.ip] = h
	h.all++
	if s.verified {
		h.verified++
	}
	l.adm.mu.Unlock()
	s.handshaking = true
	context.AfterFunc(ctx, func() { l.endSlot(s, false) })
	return context.WithValue(ctx, slotKey{}, s), nil
}

// refuseConn counts and logs a refused connection and returns the cause
// quic-go logs.
func (l *Listener) refuseConn(n *atomic.Uint64, err error, reason string, limit int) error {
	n.Add(1)
	l.log.Debug("connection refused", "reason", reason, "limit", limit)
	return err
}

// established moves qc from the handshake budget to the connection budget
// once its handshake completed; it reports false (qc must be refused) when
// MaxConnections connections are established already.
func (l *Listener) established(qc *quic.Conn) bool {
	s, _ := qc.Context().Value(slotKey{}).(*connSlot)
	if s == nil {
		return true
	}
	l.endSlot(s, true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return true // closed meanwhile: Accept's caller sees it fail
	}
	if n := l.st.live.Add(1); l.cfg.MaxConnections > 0 && n > int64(l.cfg.MaxConnections) {
		l.st.live.Add(-1)
		l.st.refusedConns.Add(1)
		return false
	}
	s.established = true
	return true
}

// endSlot releases s's handshake place; when the connection ended (not
// done), it also releases its connection place.
func (l *Listener) endSlot(s *connSlot, done bool) {
	s.mu.Lock()
	hs := s.handshaking
	s.handshaking = false
	if !done {
		s.ended = true
		if s.established {
			s.established = false
			l.st.live.Add(-1)
		}
	}
	s.mu.Unlock()
	if !hs {
		return
	}
	l.adm.handshaking.Add(-1)
	l.adm.mu.Lock()
	if h := l.adm.byAddr[s.ip]; h != nil {
		h.all--
		if s.verified {
			h.verified--
		}
		if h.all <= 0 {
			delete(l.adm.byAddr, s.ip)
		}
	}
	l.adm.mu.Unlock()
}
