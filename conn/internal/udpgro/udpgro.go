// Package udpgro is the UDP socket package conn hands quic-go: on Linux, a
// *net.UDPConn whose socket receives with UDP GRO (the kernel hands over up
// to 64 KiB of coalesced datagrams of one flow per recvmsg, with their
// segment size) and that implements the batch read quic-go uses for its own
// connections, so that quic-go keeps everything else it does on a plain
// *net.UDPConn: GSO on sends (UDP_SEGMENT), ECN (IP_TOS / IPV6_TCLASS) and
// packet info, all through the embedded *net.UDPConn.
//
// quic-go (v0.65, sys_conn.go and sys_conn_oob.go) wraps any connection that
// is a quic.OOBCapablePacketConn in its out-of-band path: it enables
// IP_RECVTOS / IPV6_RECVTCLASS (and packet info on an unspecified address)
// on the socket, reads through the connection's own ReadBatch when it has
// one (otherwise through x/net's recvmmsg), and writes every packet with
// WriteMsgUDP, adding the UDP_SEGMENT and ECN control messages. Conn is
// such a connection: everything but ReadBatch is the embedded
// *net.UDPConn's.
package udpgro

import (
	"net"
)

// Size is the receive buffer of one Conn: the largest coalesced read (the
// kernel builds GRO packets of at most 64 KiB).
const Size = 1 << 16

// Wrap returns the packet connection quic-go should be given for c: with
// gro on Linux, a *Conn reading c's socket with UDP GRO; otherwise, or when
// the socket refuses UDP_GRO (an older kernel), c itself. The caller keeps
// owning c (closing the returned connection closes c).
func Wrap(c *net.UDPConn, gro bool) net.PacketConn {
	if !gro {
		return c
	}
	return wrap(c, Size, enableGRO)
}
