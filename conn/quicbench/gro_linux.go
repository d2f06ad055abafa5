package quicbench

import (
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// groConn is the UDP GRO receive experiment: a packet connection that
// reads up to 64 KiB of coalesced datagrams per recvmsg (UDP_GRO) and
// hands quic-go one datagram per ReadFrom, with a cached peer address (no
// allocation per datagram). It implements only net.PacketConn (plus the
// buffer setters), so quic-go treats it as a basic connection: no batch
// reads of its own, no ECN, no GSO on its sends (a receiver sends only
// ACKs).
type groConn struct {
	c        *net.UDPConn
	buf, oob []byte
	pending  []byte
	seg      int
	lastAP   netip.AddrPort
	lastAddr *net.UDPAddr
}

// udpGRO is the UDP_GRO socket option and control message type.
const udpGRO = 104

func newGROConn(c *net.UDPConn) (net.PacketConn, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_UDP, udpGRO, 1)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	return &groConn{c: c, buf: make([]byte, 1<<16), oob: make([]byte, 64)}, nil
}

func (g *groConn) ReadFrom(p []byte) (int, net.Addr, error) {
	if len(g.pending) == 0 {
		n, oobn, _, ap, err := g.c.ReadMsgUDPAddrPort(g.buf, g.oob)
		if err != nil {
			return 0, nil, err
		}
		g.seg = n
		if msgs, err := syscall.ParseSocketControlMessage(g.oob[:oobn]); err == nil {
			for _, m := range msgs {
				if m.Header.Level == syscall.IPPROTO_UDP && m.Header.Type == udpGRO && len(m.Data) >= 4 {
					g.seg = int(binary.NativeEndian.Uint32(m.Data))
				}
			}
		}
		if g.seg <= 0 {
			g.seg = n
		}
		g.pending = g.buf[:n]
		if ap != g.lastAP || g.lastAddr == nil {
			g.lastAP, g.lastAddr = ap, net.UDPAddrFromAddrPort(ap)
		}
	}
	k := min(g.seg, len(g.pending))
	n := copy(p, g.pending[:k])
	g.pending = g.pending[k:]
	return n, g.lastAddr, nil
}

func (g *groConn) WriteTo(p []byte, a net.Addr) (int, error) { return g.c.WriteTo(p, a) }
func (g *groConn) Close() error                              { return g.c.Close() }
func (g *groConn) LocalAddr() net.Addr                       { return g.c.LocalAddr() }
func (g *groConn) SetDeadline(t time.Time) error             { return g.c.SetDeadline(t) }
func (g *groConn) SetReadDeadline(t time.Time) error         { return g.c.SetReadDeadline(t) }
func (g *groConn) SetWriteDeadline(t time.Time) error        { return g.c.SetWriteDeadline(t) }
func (g *groConn) SetReadBuffer(n int) error                 { return g.c.SetReadBuffer(n) }
func (g *groConn) SetWriteBuffer(n int) error                { return g.c.SetWriteBuffer(n) }
