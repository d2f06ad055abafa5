// Package quicbench is the transport baseline of felix bench raw: a raw
// quic-go sender and receiver, one unidirectional stream, no Felix
// protocol, with the QUIC configuration package conn uses
// (conn.DefaultQUICConfig), so that the cost of the transport alone can be
// measured in separate processes beside the same bytes sent and received
// through conn. It lives under conn because only conn may import quic-go.
package quicbench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"

	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/internal/udpgro"
)

// alpn is the protocol the raw sender and receiver agree on (not Felix's).
const alpn = "felix-bench-raw"

// Sender is a raw QUIC listener that writes a frame n times on a
// unidirectional stream to the first peer that connects.
type Sender struct {
	ln   *quic.Listener
	tr   *quic.Transport
	udp  *net.UDPConn
	cert []byte
}

// Listen starts a Sender on addr (host:port, port 0 for any) with a fresh
// self-signed certificate (Cert). With gro, its UDP socket is read as
// package conn reads it by default (UDP GRO on Linux; conn.Config.NoGRO).
func Listen(addr string, gro bool) (*Sender, error) {
	tc, _, err := conn.SelfSigned()
	if err != nil {
		return nil, err
	}
	tc = tc.Clone()
	tc.NextProtos = []string{alpn}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	tr := &quic.Transport{Conn: udpgro.Wrap(udp, gro)}
	ln, err := tr.Listen(tc, conn.DefaultQUICConfig())
	if err != nil {
		udp.Close()
		return nil, err
	}
	return &Sender{ln: ln, tr: tr, udp: udp, cert: tc.Certificates[0].Certificate[0]}, nil
}

// Addr is the address the Sender listens on.
func (s *Sender) Addr() net.Addr { return s.ln.Addr() }

// Cert is the DER certificate the Sender presents (Receive trusts it).
func (s *Sender) Cert() []byte { return s.cert }

// Close stops listening and closes the socket.
func (s *Sender) Close() error {
	err := s.ln.Close()
	s.tr.Close()
	s.udp.Close()
	return err
}

// Send accepts one connection, opens a unidirectional stream and writes n
// frames on it, frames[i%len(frames)] for the i-th, each with one Write
// call (as conn writes an encoded event batch), then finishes the stream
// and waits for the peer to close the connection (so that every byte was
// received). One frame is sent from the CPU's caches; n distinct frames
// from memory, as a broker sends from its log.
func (s *Sender) Send(ctx context.Context, frames [][]byte, n int) error {
	if len(frames) == 0 {
		return errors.New("quicbench: no frame to send")
	}
	qc, err := s.ln.Accept(ctx)
	if err != nil {
		return err
	}
	st, err := qc.OpenUniStreamSync(ctx)
	if err != nil {
		return err
	}
	for i := range n {
		if _, err := st.Write(frames[i%len(frames)]); err != nil {
			return err
		}
	}
	if err := st.Close(); err != nil {
		return err
	}
	select {
	case <-qc.Context().Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Receive dials a Sender at addr that presents the certificate cert,
// reads the frames of its stream with felix.Reader into one reused
// buffer (no decoding) until the stream ends, closes the connection and
// returns the frames and payload bytes read.
//
// With gro, the receiver's UDP socket is read as package conn reads it by
// default (UDP GRO on Linux, GSO and ECN kept; conn.Config.NoGRO).
func Receive(ctx context.Context, addr string, cert []byte, gro bool) (frames, bytes int64, err error) {
	c, err := x509.ParseCertificate(cert)
	if err != nil {
		return 0, 0, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	tc := &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{alpn}}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return 0, 0, err
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: ua.IP.To4()})
	if err != nil {
		return 0, 0, err
	}
	defer udp.Close()
	tr := &quic.Transport{Conn: udpgro.Wrap(udp, gro)}
	defer tr.Close()
	qc, err := tr.Dial(ctx, ua, tc, conn.DefaultQUICConfig())
	if err != nil {
		return 0, 0, err
	}
	defer qc.CloseWithError(0, "")
	st, err := qc.AcceptUniStream(ctx)
	if err != nil {
		return 0, 0, err
	}
	r := felix.NewReader(st)
	for {
		f, err := r.ReadFrame()
		if errors.Is(err, io.EOF) {
			return frames, bytes, nil
		}
		if err != nil {
			return frames, bytes, err
		}
		frames++
		bytes += int64(len(f.Payload))
	}
}
