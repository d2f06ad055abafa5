package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
)

// This file gives a server what it needs to bind an identity to a stream:
// the connection's TLS state and address, seen by the Authenticator
// (AuthPeerFromContext) and afterwards (ServerConn.TLS, PeerCertificate),
// and the Authenticator's identity typed (IdentityOf).

// AuthPeer describes the connection an auth frame arrived on, for an
// Authenticator: where it comes from and what its TLS handshake proved.
type AuthPeer struct {
	// Conn is the connection (also ConnFromContext).
	Conn *ServerConn
	// RemoteAddr is the client's UDP address.
	RemoteAddr net.Addr
	// TLS is the connection's TLS state: with client certificates
	// (ServerConfig.TLS.ClientAuth), PeerCertificates and VerifiedChains
	// hold what the client presented and what verified.
	TLS tls.ConnectionState
	// Certificate is the client's leaf certificate (PeerCertificates[0]),
	// nil when it presented none.
	Certificate *x509.Certificate
}

// AuthPeerFromContext returns the connection an Authenticator is asked
// about: its context carries it. A broker binds the certificate's subject
// to the token's principal there, or counts failed auths per address.
func AuthPeerFromContext(ctx context.Context) (AuthPeer, bool) {
	c, ok := ConnFromContext(ctx)
	if !ok {
		return AuthPeer{}, false
	}
	return AuthPeer{Conn: c, RemoteAddr: c.RemoteAddr(), TLS: c.TLS(), Certificate: c.PeerCertificate()}, true
}

// TLS returns the connection's TLS state (negotiated version, ALPN, the
// client's certificates when it presented any).
func (c *ServerConn) TLS() tls.ConnectionState { return c.qc.ConnectionState().TLS }

// PeerCertificate returns the client's leaf certificate, or nil when it
// presented none. It is verified when ServerConfig.TLS.ClientAuth asked
// for verification (tls.VerifyClientCertIfGiven or
// tls.RequireAndVerifyClientCert).
func (c *ServerConn) PeerCertificate() *x509.Certificate {
	if certs := c.qc.ConnectionState().TLS.PeerCertificates; len(certs) > 0 {
		return certs[0]
	}
	return nil
}

// IdentityOf returns the identity the Authenticator returned for s as a
// T, and whether it is one: the typed form of Stream.Identity, for servers
// whose Authenticator returns one identity type.
func IdentityOf[T any](s *Stream) (T, bool) {
	v, ok := s.identity.(T)
	return v, ok
}
