package conn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"time"

	"github.com/flxproto/felix/conn/internal/tlsconf"
)

// ALPN is the protocol id of the Felix client listener ("felix/1"). Brokers
// talk to each other with a different id on a different listener.
const ALPN = tlsconf.ALPN

// The TLS policy of both halves (TLS 1.3 only, the ALPN choice, key
// logging) is written once in internal/tlsconf, which the debugging relay
// (conn/tap) applies too.
var (
	clientTLS  = tlsconf.Client
	serverTLS  = tlsconf.Server
	withKeyLog = tlsconf.WithKeyLog
	errNoTLS   = tlsconf.ErrNoTLS
)

// SelfSigned returns a fresh self-signed ECDSA P-256 leaf certificate, as
// a development broker uses: a server TLS configuration carrying it and a
// pool with the certificate for clients to trust. With no hosts it names
// "localhost", 127.0.0.1 and ::1; otherwise the given DNS names and IP
// addresses (the first is also the subject common name).
//
// The certificate is an end-entity certificate, as upstream's broker
// generates: Basic Constraints CA:FALSE, key usage digitalSignature,
// extended key usage serverAuth. Verifiers that refuse a CA certificate as
// a server certificate (rustls/webpki: CaUsedAsEndEntity) accept it, and
// it still works as the root a client pins: Go's x509 verification accepts
// a leaf that is itself in the root pool, and webpki builds a trust anchor
// from it (subject and key), under which the self-signature verifies.
func SelfSigned(hosts ...string) (*tls.Config, *x509.CertPool, error) {
	return SelfSignedFor(365*24*time.Hour, hosts...)
}

// SelfSignedFor is SelfSigned with a certificate valid for the given
// duration from now (SelfSigned's is valid one year), as a broker that
// keeps its certificate across restarts wants.
func SelfSignedFor(validity time.Duration, hosts ...string) (*tls.Config, *x509.CertPool, error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: hosts[0]},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  false,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}}}
	return cfg, pool, nil
}
