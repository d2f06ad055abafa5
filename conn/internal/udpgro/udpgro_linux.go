//go:build linux

package udpgro

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// Conn is a *net.UDPConn whose socket has UDP_GRO on, with the batch read
// quic-go looks for (ReadBatch). One recvmsg reads a coalesced datagram into
// a 64 KiB buffer; ReadBatch splits it into its segments (the kernel's
// gso_size; the last may be shorter), copies each into one message with a
// copy of the read's control messages (IP_TOS / IPV6_TCLASS, packet info:
// quic-go's ECN and packet-info paths see what a plain read gives them) and
// the sender's address, and keeps the segments that did not fit for the
// next call, which returns them without a system call.
//
// The address is one *net.UDPAddr per sender: a new one is made only when a
// datagram comes from another address than the one before (a value handed
// out is never changed), so reading allocates nothing.
//
// WriteMsgUDP, quic-go's only write, sends as the embedded conn does but
// allocates nothing either.
//
// Only ReadBatch reads: quic-go reads nothing else from a connection with a
// ReadBatch method. ReadFrom and ReadMsgUDP are the embedded *net.UDPConn's
// and would return coalesced datagrams whole.
type Conn struct {
	*net.UDPConn
	rc    syscall.RawConn
	laddr net.Addr

	buf     []byte // the coalesced datagram read last
	oob     []byte // its control messages, as received
	segOOB  []byte // its control messages but UDP_GRO: what each segment's message gets
	pending []byte // the segments of buf not handed out yet
	seg     int    // their size (the last may be shorter)

	ap    netip.AddrPort // the address of the last datagram
	scope uint32         // and its IPv6 scope
	addr  *net.UDPAddr   // both as handed out

	hdr  unix.Msghdr
	iov  unix.Iovec
	name unix.RawSockaddrAny

	// One ReadBatch's state for readFn (a method value bound once, so
	// that a read allocates no closure).
	ms     []ipv4.Message
	n      int
	serr   error
	readFn func(fd uintptr) bool

	recvmsgs int // recvmsg calls that returned a datagram (tests)
}

// enableGRO turns UDP_GRO on for the socket fd.
func enableGRO(fd int) error { return unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1) }

// wrap returns a *Conn over c with a receive buffer of size bytes, or c
// when enable fails on c's socket.
func wrap(c *net.UDPConn, size int, enable func(fd int) error) net.PacketConn {
	rc, err := c.SyscallConn()
	if err != nil {
		return c
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = enable(int(fd)) }); err != nil || serr != nil {
		return c
	}
	g := &Conn{UDPConn: c, rc: rc, laddr: c.LocalAddr(), buf: make([]byte, size), oob: make([]byte, oobSize)}
	g.segOOB = make([]byte, 0, oobSize)
	g.iov.Base = &g.buf[0]
	g.hdr.Name = (*byte)(unsafe.Pointer(&g.name))
	g.hdr.Iov = &g.iov
	g.hdr.SetIovlen(1)
	g.hdr.Control = &g.oob[0]
	g.readFn = g.read
	return g
}

// oobSize holds the control messages a read can carry: TOS or traffic
// class, packet info (IPv6: 40 bytes) and UDP_GRO, with room to spare.
const oobSize = 256

// ReadBatch reads datagrams into ms as x/net's ipv4.PacketConn.ReadBatch
// does for quic-go: it blocks until at least one datagram is there (or the
// read deadline passes, or the connection is closed: a *net.OpError, whose
// Timeout and Temporary are true for a deadline and which is net.ErrClosed
// once closed) and returns how many messages it filled. Each message gets
// the datagram in Buffers (N), the control messages in OOB (NN) and the
// sender in Addr; Flags is MSG_CTRUNC when OOB could not take every control
// message whole (those that fit are kept). A datagram larger than a
// message's buffers, or cut by the kernel (MSG_TRUNC, more than 64 KiB), is
// dropped, as quic-go could not decrypt it; whole segments before the cut
// are kept. flags is ignored (quic-go passes 0).
func (g *Conn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	n := g.fill(ms, 0)
	if n == len(ms) {
		return n, nil
	}
	g.ms, g.n, g.serr = ms, n, nil
	err := g.rc.Read(g.readFn)
	n = g.n
	g.ms = nil
	if n > 0 {
		return n, nil // an error after some datagrams comes again next call
	}
	if err == nil {
		err = g.serr
	}
	if err == nil {
		return 0, nil
	}
	return 0, &net.OpError{Op: "read", Net: g.laddr.Network(), Source: g.laddr, Err: err}
}

// WriteMsgUDP is the embedded *net.UDPConn's, given the address as a
// netip.AddrPort: the same system call and control messages (quic-go's
// UDP_SEGMENT and ECN), without the socket address *net.UDPConn.WriteMsgUDP
// allocates per packet.
func (g *Conn) WriteMsgUDP(b, oob []byte, addr *net.UDPAddr) (n, oobn int, err error) {
	if addr == nil {
		return g.UDPConn.WriteMsgUDP(b, oob, nil)
	}
	return g.UDPConn.WriteMsgUDPAddrPort(b, oob, addr.AddrPort())
}

// read is the rc.Read callback: it receives without blocking until the
// messages are full or the socket is empty, and asks to wait (false) only
// while nothing was received.
func (g *Conn) read(fd uintptr) bool {
	for g.n < len(g.ms) {
		if len(g.pending) == 0 {
			switch errno := g.recv(fd); errno {
			case 0:
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return g.n > 0
			default:
				if g.n == 0 {
					g.serr = os.NewSyscallError("recvmsg", errno)
				}
				return true
			}
		}
		g.n = g.fill(g.ms, g.n)
	}
	return true
}

// recv reads one (coalesced) datagram into buf and sets pending, seg,
// segOOB and the address.
func (g *Conn) recv(fd uintptr) syscall.Errno {
	g.iov.SetLen(len(g.buf))
	g.hdr.Namelen = unix.SizeofSockaddrAny
	g.hdr.SetControllen(len(g.oob))
	g.hdr.Flags = 0
	r, _, errno := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&g.hdr)), unix.MSG_DONTWAIT)
	if errno != 0 {
		return errno
	}
	g.recvmsgs++
	n := int(r)
	seg := 0
	g.segOOB = g.segOOB[:0]
	for b := g.oob[:g.hdr.Controllen]; len(b) > 0; {
		h, body, rest, err := unix.ParseOneSocketControlMessage(b)
		if err != nil {
			break
		}
		if h.Level == unix.IPPROTO_UDP && h.Type == unix.UDP_GRO && len(body) >= 4 {
			seg = int(binary.NativeEndian.Uint32(body))
		} else {
			g.segOOB = append(g.segOOB, b[:len(b)-len(rest)]...)
		}
		b = rest
	}
	if g.hdr.Flags&unix.MSG_TRUNC != 0 {
		if seg <= 0 {
			n = 0 // one datagram, cut
		} else {
			n -= n % seg // whole segments before the cut
		}
	}
	if seg <= 0 {
		seg = n
	}
	g.pending, g.seg = g.buf[:n], seg
	if !g.setAddr() {
		g.pending = nil
	}
	return 0
}

// setAddr sets addr to the sender of the datagram read last, making a new
// *net.UDPAddr only when it differs from the one before. It reports false
// for an address that is not IPv4 or IPv6.
func (g *Conn) setAddr() bool {
	var ap netip.AddrPort
	var scope uint32
	switch g.name.Addr.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&g.name))
		ap = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:]))
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&g.name))
		ap = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:]))
		scope = sa.Scope_id
	default:
		return false
	}
	if g.addr != nil && ap == g.ap && scope == g.scope {
		return true
	}
	a := &net.UDPAddr{Port: int(ap.Port())}
	if ap.Addr().Is4() {
		v := ap.Addr().As4()
		a.IP = net.IP(v[:])
	} else {
		v := ap.Addr().As16()
		a.IP = net.IP(v[:])
	}
	if scope != 0 {
		a.Zone = zoneName(scope)
	}
	g.ap, g.scope, g.addr = ap, scope, a
	return true
}

// zoneName is the name of interface index i, or i in decimal.
func zoneName(i uint32) string {
	if ifi, err := net.InterfaceByIndex(int(i)); err == nil {
		return ifi.Name
	}
	return strconv.FormatUint(uint64(i), 10)
}

// fill hands pending segments out to ms[i:] and returns the index after
// the last message filled.
func (g *Conn) fill(ms []ipv4.Message, i int) int {
	for i < len(ms) && len(g.pending) > 0 {
		k := min(g.seg, len(g.pending))
		s := g.pending[:k]
		g.pending = g.pending[k:]
		m := &ms[i]
		room := 0
		for _, b := range m.Buffers {
			room += len(b)
		}
		if k > room {
			continue // a datagram the reader cannot take whole
		}
		for _, b := range m.Buffers {
			s = s[copy(b, s):]
		}
		m.N, m.Addr, m.Flags = k, g.addr, 0
		m.NN = wholeCmsgs(g.segOOB, len(m.OOB))
		copy(m.OOB, g.segOOB[:m.NN])
		if m.NN < len(g.segOOB) {
			m.Flags = unix.MSG_CTRUNC
		}
		i++
	}
	return i
}

// wholeCmsgs returns the length of the longest prefix of the control
// messages b that is at most max bytes and cuts none.
func wholeCmsgs(b []byte, max int) int {
	if len(b) <= max {
		return len(b)
	}
	n := 0
	for rest := b; len(rest) > 0; {
		_, _, r, err := unix.ParseOneSocketControlMessage(rest)
		if err != nil {
			break
		}
		next := n + len(rest) - len(r)
		if next > max {
			break
		}
		n, rest = next, r
	}
	return n
}
