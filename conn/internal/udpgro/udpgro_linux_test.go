//go:build linux

package udpgro

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/quic-go/quic-go"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// The connection quic-go is given must take its out-of-band path (GSO,
// ECN) and its batch read.
var (
	_ quic.OOBCapablePacketConn = (*Conn)(nil)
	_ interface {
		ReadBatch([]ipv4.Message, int) (int, error)
	} = (*Conn)(nil)
)

// rig is a GRO receiver and the sockets that send to it, on loopback.
type rig struct {
	t  *testing.T
	g  *Conn
	to *net.UDPAddr
}

// newRig listens on network's loopback (unspecified when any) with a
// receive buffer of size, turns on what quic-go turns on (TOS or traffic
// class, packet info) and gives the test a 10 s read deadline, so that a
// bug fails an assertion instead of hanging.
func newRig(t *testing.T, network string, size int, any bool) *rig {
	t.Helper()
	ip := net.IPv4(127, 0, 0, 1)
	if network == "udp6" {
		ip = net.IPv6loopback
	}
	laddr := &net.UDPAddr{IP: ip}
	if any {
		laddr = &net.UDPAddr{IP: net.IPv4zero}
	}
	c, err := net.ListenUDP(network, laddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	pc := wrap(c, size, enableGRO)
	g, ok := pc.(*Conn)
	if !ok {
		t.Fatalf("wrap returned %T: the kernel refused UDP_GRO", pc)
	}
	rc, _ := c.SyscallConn()
	rc.Control(func(fd uintptr) {
		if network == "udp6" {
			unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1)
		} else {
			unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_RECVTOS, 1)
			unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		}
	})
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	to := &net.UDPAddr{IP: ip, Port: c.LocalAddr().(*net.UDPAddr).Port}
	return &rig{t: t, g: g, to: to}
}

// sender opens a socket to send to the rig from.
func (r *rig) sender() *net.UDPConn {
	r.t.Helper()
	network := "udp4"
	if r.to.IP.To4() == nil {
		network = "udp6"
	}
	s, err := net.ListenUDP(network, &net.UDPAddr{IP: r.to.IP})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { s.Close() })
	return s
}

// send writes p in one sendmsg, cut into seg-byte datagrams by the kernel
// (UDP_SEGMENT) when seg > 0, marked with the ECN bits ecn when ecn > 0,
// with the control messages quic-go writes.
func (r *rig) send(s *net.UDPConn, p []byte, seg, ecn int) {
	r.t.Helper()
	var oob []byte
	if seg > 0 {
		oob = appendCmsg(oob, unix.IPPROTO_UDP, unix.UDP_SEGMENT, 2)
		binary.NativeEndian.PutUint16(oob[len(oob)-unix.CmsgSpace(2)+unix.CmsgSpace(0):], uint16(seg))
	}
	if ecn > 0 {
		if r.to.IP.To4() != nil {
			oob = appendCmsg(oob, unix.IPPROTO_IP, unix.IP_TOS, 1)
			oob[len(oob)-unix.CmsgSpace(1)+unix.CmsgSpace(0)] = byte(ecn)
		} else {
			oob = appendCmsg(oob, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, 4)
			binary.NativeEndian.PutUint32(oob[len(oob)-unix.CmsgSpace(4)+unix.CmsgSpace(0):], uint32(ecn))
		}
	}
	if _, _, err := s.WriteMsgUDP(p, oob, r.to); err != nil {
		r.t.Fatal(err)
	}
}

func appendCmsg(b []byte, level, typ int32, dataLen int) []byte {
	start := len(b)
	b = append(b, make([]byte, unix.CmsgSpace(dataLen))...)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[start]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(dataLen))
	return b
}

// msgs returns n messages as quic-go prepares them (one buffer of
// bufSize, 128 bytes of OOB).
func msgs(n, bufSize int) []ipv4.Message {
	ms := make([]ipv4.Message, n)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, bufSize)}
		ms[i].OOB = make([]byte, 128)
	}
	return ms
}

// read calls ReadBatch once and returns the datagrams it filled.
func (r *rig) read(ms []ipv4.Message) [][]byte {
	r.t.Helper()
	n, err := r.g.ReadBatch(ms, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	var got [][]byte
	for _, m := range ms[:n] {
		got = append(got, m.Buffers[0][:m.N])
	}
	return got
}

// pattern returns n bytes, each segment of seg bytes filled with its
// index (so order and boundaries show).
func pattern(n, seg int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i/seg + 1)
	}
	return p
}

func sizes(ds [][]byte) []int {
	var s []int
	for _, d := range ds {
		s = append(s, len(d))
	}
	return s
}

func TestSegmentsSplitExactly(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n, seg    int
		want      []int
		coalesced bool
	}{
		{"last segment short", 3500, 1000, []int{1000, 1000, 1000, 500}, true},
		{"whole segments", 4000, 1000, []int{1000, 1000, 1000, 1000}, true},
		{"one byte over", 2001, 1000, []int{1000, 1000, 1}, true},
		{"quic-go packet size", 8 * 1452, 1452, []int{1452, 1452, 1452, 1452, 1452, 1452, 1452, 1452}, true},
		{"plain datagram", 700, 0, []int{700}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "udp4", Size, false)
			p := pattern(tc.n, max(tc.seg, tc.n))
			if tc.seg > 0 {
				p = pattern(tc.n, tc.seg)
			}
			r.send(r.sender(), p, tc.seg, 0)
			got := r.read(msgs(8, 1452))
			if !equalInts(sizes(got), tc.want) {
				t.Fatalf("segment sizes %v, want %v", sizes(got), tc.want)
			}
			if !bytes.Equal(bytes.Join(got, nil), p) {
				t.Fatal("the segments are not the datagram in order")
			}
			if r.g.recvmsgs != 1 {
				t.Fatalf("%d recvmsg calls, want 1 (coalesced %v)", r.g.recvmsgs, tc.coalesced)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Segments that do not fit the messages come from later calls without a
// system call, and a call they only partly fill does not wait for more.
func TestCarryOver(t *testing.T) {
	r := newRig(t, "udp4", Size, false)
	s := r.sender()
	p := pattern(10*1000, 1000)
	r.send(s, p, 1000, 0)
	var all [][]byte
	for i, want := range []int{4, 4, 2} {
		got := r.read(msgs(4, 1452))
		if len(got) != want {
			t.Fatalf("call %d: %d datagrams, want %d", i, len(got), want)
		}
		if r.g.recvmsgs != 1 {
			t.Fatalf("call %d: %d recvmsg calls, want 1", i, r.g.recvmsgs)
		}
		for _, d := range got {
			all = append(all, bytes.Clone(d))
		}
	}
	if !bytes.Equal(bytes.Join(all, nil), p) {
		t.Fatal("the carried segments are not the datagram in order")
	}
	// Two coalesced datagrams queued: one call takes the carried rest
	// of the first and the start of the second.
	r.send(s, pattern(3*1000, 1000), 1000, 0)
	r.send(s, pattern(2*500, 500), 500, 0)
	if got := sizes(r.read(msgs(2, 1452))); !equalInts(got, []int{1000, 1000}) {
		t.Fatalf("sizes %v", got)
	}
	if got := sizes(r.read(msgs(4, 1452))); !equalInts(got, []int{1000, 500, 500}) {
		t.Fatalf("carried and next: sizes %v, want [1000 500 500]", got)
	}
}

// Every message of one sender carries the same *net.UDPAddr; another
// sender gets a new one and the one handed out before keeps its value.
func TestAddressCachedAndChanged(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			r := newRig(t, network, Size, false)
			a, b := r.sender(), r.sender()
			r.send(a, pattern(3000, 1000), 1000, 0)
			ms := msgs(8, 1452)
			n, err := r.g.ReadBatch(ms, 0)
			if err != nil || n != 3 {
				t.Fatalf("ReadBatch = %d, %v", n, err)
			}
			first := ms[0].Addr.(*net.UDPAddr)
			if first.String() != a.LocalAddr().String() {
				t.Fatalf("address %v, want %v", first, a.LocalAddr())
			}
			for _, m := range ms[1:n] {
				if m.Addr != net.Addr(first) {
					t.Fatal("a segment of the same read got another address value")
				}
			}
			r.send(a, []byte("again"), 0, 0)
			r.read(ms[:1])
			if ms[0].Addr != net.Addr(first) {
				t.Fatal("a second datagram from the same sender got a new address")
			}
			r.send(b, []byte("other"), 0, 0)
			r.read(ms[:1])
			second := ms[0].Addr.(*net.UDPAddr)
			if second == first || second.String() != b.LocalAddr().String() {
				t.Fatalf("other sender: address %v (same value %v), want %v", second, second == first, b.LocalAddr())
			}
			if first.String() != a.LocalAddr().String() {
				t.Fatalf("the address handed out first changed to %v", first)
			}
			r.send(a, []byte("back"), 0, 0)
			r.read(ms[:1])
			if back := ms[0].Addr.(*net.UDPAddr); back == second || back.String() != a.LocalAddr().String() {
				t.Fatalf("back to the first sender: address %v", back)
			}
		})
	}
}

// Reading from one sender allocates nothing.
func TestReadAllocatesNothing(t *testing.T) {
	r := newRig(t, "udp4", Size, false)
	s := r.sender()
	to := r.to.AddrPort()
	p := pattern(4*1000, 1000)
	ms := msgs(8, 1452)
	var oob []byte
	oob = appendCmsg(oob, unix.IPPROTO_UDP, unix.UDP_SEGMENT, 2)
	binary.NativeEndian.PutUint16(oob[unix.CmsgSpace(0):], 1000)
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := s.WriteMsgUDPAddrPort(p, oob, to); err != nil {
			t.Fatal(err)
		}
		if n, err := r.g.ReadBatch(ms, 0); err != nil || n != 4 {
			t.Fatalf("ReadBatch = %d, %v", n, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per send and read, want 0", allocs)
	}
}

// ecnOf and pktinfoOf parse a message's OOB as quic-go's
// oobConn.ReadPacket does.
func ecnOf(t *testing.T, oob []byte) (ecn int, found bool) {
	for len(oob) > 0 {
		h, body, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			t.Fatalf("OOB does not parse (quic-go would close the transport): %v", err)
		}
		switch {
		case h.Level == unix.IPPROTO_IP && h.Type == unix.IP_TOS:
			if len(body) != 1 {
				t.Fatalf("IP_TOS of %d bytes", len(body))
			}
			ecn, found = int(body[0]&3), true
		case h.Level == unix.IPPROTO_IPV6 && h.Type == unix.IPV6_TCLASS:
			if len(body) != 4 {
				t.Fatalf("IPV6_TCLASS of %d bytes", len(body))
			}
			ecn, found = int(binary.NativeEndian.Uint32(body)&3), true
		case h.Level == unix.IPPROTO_UDP:
			t.Fatalf("a segment's OOB carries the UDP_GRO message")
		}
		oob = rest
	}
	return ecn, found
}

func pktinfoOf(t *testing.T, oob []byte) (netip.Addr, bool) {
	for len(oob) > 0 {
		h, body, rest, err := unix.ParseOneSocketControlMessage(oob)
		if err != nil {
			t.Fatal(err)
		}
		if h.Level == unix.IPPROTO_IP && h.Type == unix.IP_PKTINFO && len(body) == 12 {
			return netip.AddrFrom4([4]byte(body[8:12])), true
		}
		oob = rest
	}
	return netip.Addr{}, false
}

// The ECN bits of a coalesced datagram reach every segment's OOB in the
// form quic-go parses (IP_TOS, IPV6_TCLASS), and so does the packet info
// of a socket on the unspecified address.
func TestECNDelivered(t *testing.T) {
	for _, tc := range []struct {
		network string
		ecn     int
	}{
		{"udp4", 1}, {"udp4", 2}, {"udp4", 3}, {"udp6", 1}, {"udp6", 2}, {"udp6", 3},
	} {
		t.Run(tc.network+"/"+string(rune('0'+tc.ecn)), func(t *testing.T) {
			r := newRig(t, tc.network, Size, false)
			r.send(r.sender(), pattern(2500, 1000), 1000, tc.ecn)
			ms := msgs(8, 1452)
			n, err := r.g.ReadBatch(ms, 0)
			if err != nil || n != 3 {
				t.Fatalf("ReadBatch = %d, %v", n, err)
			}
			for i, m := range ms[:n] {
				ecn, ok := ecnOf(t, m.OOB[:m.NN])
				if !ok || ecn != tc.ecn {
					t.Fatalf("segment %d: ECN %d (found %v), want %d", i, ecn, ok, tc.ecn)
				}
			}
		})
	}
	t.Run("pktinfo", func(t *testing.T) {
		r := newRig(t, "udp4", Size, true)
		r.to.IP = net.IPv4(127, 0, 0, 1)
		r.send(r.sender(), pattern(2000, 1000), 1000, 2)
		ms := msgs(8, 1452)
		n, err := r.g.ReadBatch(ms, 0)
		if err != nil || n != 2 {
			t.Fatalf("ReadBatch = %d, %v", n, err)
		}
		for i, m := range ms[:n] {
			dst, ok := pktinfoOf(t, m.OOB[:m.NN])
			if !ok || dst != netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
				t.Fatalf("segment %d: packet info %v (found %v)", i, dst, ok)
			}
			if ecn, _ := ecnOf(t, m.OOB[:m.NN]); ecn != 2 {
				t.Fatalf("segment %d: ECN %d", i, ecn)
			}
		}
	})
	t.Run("OOB too small", func(t *testing.T) {
		r := newRig(t, "udp4", Size, true)
		r.to.IP = net.IPv4(127, 0, 0, 1)
		r.send(r.sender(), []byte("x"), 0, 2)
		ms := msgs(1, 1452)
		// The kernel puts packet info (32 bytes) before TOS: room for
		// the first message and part of the second.
		ms[0].OOB = ms[0].OOB[:unix.CmsgSpace(12)+8]
		if n, err := r.g.ReadBatch(ms, 0); err != nil || n != 1 {
			t.Fatalf("ReadBatch = %d, %v", n, err)
		}
		if ms[0].Flags != unix.MSG_CTRUNC || ms[0].NN != unix.CmsgSpace(12) {
			t.Fatalf("flags %#x NN %d, want MSG_CTRUNC and the first message whole", ms[0].Flags, ms[0].NN)
		}
		if _, ok := pktinfoOf(t, ms[0].OOB[:ms[0].NN]); !ok {
			t.Fatal("the packet info that fits was not kept")
		}
		if _, ok := ecnOf(t, ms[0].OOB[:ms[0].NN]); ok {
			t.Fatal("a cut control message was handed out")
		}
	})
}

// A datagram the kernel cut (MSG_TRUNC) or a message cannot take whole is
// dropped; whole segments before a cut are kept; the next datagram is read.
func TestTruncated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		size    int // receive buffer
		bufSize int // message buffer
		n, seg  int
		want    []int
	}{
		{"plain datagram over the buffer", 4096, 1452, 5000, 0, nil},
		{"coalesced over the buffer", 4096, 1452, 6000, 1000, []int{1000, 1000, 1000, 1000}},
		{"coalesced cut on a boundary", 4000, 1452, 6000, 1000, []int{1000, 1000, 1000, 1000}},
		{"segments over the message buffer", Size, 900, 3000, 1000, nil},
		{"only the last segment fits", Size, 500, 2300, 1000, []int{300}},
		{"plain datagram over the message buffer", Size, 500, 700, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "udp4", tc.size, false)
			s := r.sender()
			r.send(s, pattern(tc.n, max(tc.seg, 1)), tc.seg, 0)
			r.send(s, []byte("next"), 0, 0)
			ms := msgs(8, tc.bufSize)
			got := r.read(ms)
			want := append(tc.want, 4)
			if !equalInts(sizes(got), want) {
				t.Fatalf("sizes %v, want %v", sizes(got), want)
			}
			if string(got[len(got)-1]) != "next" {
				t.Fatalf("last datagram %q, want the next one", got[len(got)-1])
			}
			for i, d := range got[:len(got)-1] {
				if d[0] == 0 || !bytes.Equal(d, bytes.Repeat(d[:1], len(d))) {
					t.Fatalf("datagram %d is not one whole segment", i)
				}
			}
		})
	}
}

// A socket that refuses UDP_GRO is handed to quic-go as it is, and so is
// any socket when GRO is off.
func TestFallback(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	refuse := func(int) error { return unix.ENOPROTOOPT }
	if pc := wrap(c, Size, refuse); pc != net.PacketConn(c) {
		t.Fatalf("a socket refusing UDP_GRO: wrap returned %T, want the *net.UDPConn", pc)
	}
	if pc := Wrap(c, false); pc != net.PacketConn(c) {
		t.Fatalf("GRO off: Wrap returned %T, want the *net.UDPConn", pc)
	}
	if _, ok := Wrap(c, true).(*Conn); !ok {
		t.Fatal("GRO on: Wrap did not return a *Conn")
	}
	c.Close()
	if pc := Wrap(c, true); pc != net.PacketConn(c) {
		t.Fatalf("a closed socket: Wrap returned %T", pc)
	}
}

// ReadBatch blocks until a datagram comes; a passed read deadline is a
// temporary timeout (quic-go's read loop then checks whether its
// transport closed) once carried segments are handed out; a closed
// connection is net.ErrClosed, also for a reader blocked in ReadBatch.
func TestDeadlineAndClose(t *testing.T) {
	t.Run("blocks until a datagram", func(t *testing.T) {
		r := newRig(t, "udp4", Size, false)
		done := make(chan []int, 1)
		go func() {
			ms := msgs(8, 1452)
			n, err := r.g.ReadBatch(ms, 0)
			if err != nil {
				done <- nil
				return
			}
			done <- []int{n, ms[0].N}
		}()
		r.send(r.sender(), []byte("hello"), 0, 0)
		if got := <-done; !equalInts(got, []int{1, 5}) {
			t.Fatalf("blocked ReadBatch returned %v, want one 5-byte datagram", got)
		}
	})
	t.Run("empty socket waits", func(t *testing.T) {
		// Nothing queued: ReadBatch waits for the deadline (never 0
		// messages and no error, which quic-go would take for a packet).
		r := newRig(t, "udp4", Size, false)
		r.g.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := r.g.ReadBatch(msgs(8, 1452), 0)
		if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("ReadBatch on an empty socket = %d, %v; want it to wait until the deadline", n, err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		r := newRig(t, "udp4", Size, false)
		r.send(r.sender(), pattern(3000, 1000), 1000, 0)
		if got := sizes(r.read(msgs(1, 1452))); !equalInts(got, []int{1000}) {
			t.Fatalf("sizes %v", got)
		}
		r.g.SetReadDeadline(time.Now().Add(-time.Second))
		if got := sizes(r.read(msgs(8, 1452))); !equalInts(got, []int{1000, 1000}) {
			t.Fatalf("carried segments after the deadline: sizes %v", got)
		}
		n, err := r.g.ReadBatch(msgs(8, 1452), 0)
		var ne net.Error
		if n != 0 || !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("ReadBatch after the deadline = %d, %v; want a timeout", n, err)
		}
		//lint:ignore SA1019 quic-go's read loop decides on Temporary
		if !ne.Temporary() {
			t.Fatal("the deadline error is not Temporary: quic-go would close the transport with it")
		}
		var oe *net.OpError
		if !errors.As(err, &oe) || oe.Op != "read" {
			t.Fatalf("error %#v, want a *net.OpError of a read", err)
		}
	})
	t.Run("close", func(t *testing.T) {
		r := newRig(t, "udp4", Size, false)
		done := make(chan error, 1)
		go func() {
			_, err := r.g.ReadBatch(msgs(8, 1452), 0)
			done <- err
		}()
		r.g.Close()
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("ReadBatch on close = %v, want net.ErrClosed", err)
		}
		if _, err := r.g.ReadBatch(msgs(8, 1452), 0); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("ReadBatch after close = %v, want net.ErrClosed", err)
		}
	})
	t.Run("recvmsg error", func(t *testing.T) {
		r := newRig(t, "udp4", Size, false)
		// A failing recvmsg (here: a bad iovec, EFAULT) is a *net.OpError
		// of a read over the system call's error.
		r.g.hdr.Iov = nil
		_, err := r.g.ReadBatch(msgs(1, 1452), 0)
		var oe *net.OpError
		var se *os.SyscallError
		if !errors.As(err, &oe) || !errors.As(err, &se) || se.Syscall != "recvmsg" || se.Err != syscall.EFAULT {
			t.Fatalf("ReadBatch = %v, want recvmsg's EFAULT", err)
		}
	})
}

// WriteMsgUDP sends what the embedded conn sends, to the same address
// whatever its form (IPv4 as 4 or 16 bytes, IPv6), with its control
// messages, and allocates nothing.
func TestWriteMsgUDP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		network string
		ip      net.IP
	}{
		{"ipv4", "udp4", net.IP{127, 0, 0, 1}},
		{"ipv4 as 16 bytes", "udp4", net.IPv4(127, 0, 0, 1)},
		{"ipv6", "udp6", net.IPv6loopback},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := newRig(t, tc.network, Size, false)
			src := newRig(t, tc.network, Size, false)
			to := &net.UDPAddr{IP: tc.ip, Port: dst.to.Port}
			p := pattern(2000, 1000)
			var oob []byte
			oob = appendCmsg(oob, unix.IPPROTO_UDP, unix.UDP_SEGMENT, 2)
			binary.NativeEndian.PutUint16(oob[unix.CmsgSpace(0):], 1000)
			n, oobn, err := src.g.WriteMsgUDP(p, oob, to)
			if err != nil || n != len(p) || oobn != len(oob) {
				t.Fatalf("WriteMsgUDP = %d, %d, %v", n, oobn, err)
			}
			ms := msgs(8, 1452)
			got := dst.read(ms)
			if !equalInts(sizes(got), []int{1000, 1000}) || !bytes.Equal(bytes.Join(got, nil), p) {
				t.Fatalf("received sizes %v, want the two segments sent", sizes(got))
			}
			if a := ms[0].Addr.(*net.UDPAddr); a.Port != src.to.Port {
				t.Fatalf("from %v, want port %d", a, src.to.Port)
			}
			allocs := testing.AllocsPerRun(50, func() {
				if _, _, err := src.g.WriteMsgUDP(p, oob, to); err != nil {
					t.Fatal(err)
				}
				if n, err := dst.g.ReadBatch(ms, 0); err != nil || n != 2 {
					t.Fatalf("ReadBatch = %d, %v", n, err)
				}
			})
			if allocs != 0 {
				t.Fatalf("%v allocations per write and read, want 0", allocs)
			}
		})
	}
}
