package conn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"slices"
	"time"
)

// ALPN is the protocol id of the Felix client listener ("felix/1"). Brokers
// talk to each other with a different id on a different listener.
const ALPN = "felix/1"

// clientTLS returns the TLS configuration a client dials with: a clone of
// base (or a fresh one), TLS 1.3 only, with NextProtos set to [ALPN] when
// offerALPN is true and emptied otherwise (an older broker configures no ALPN
// and refuses any client that offers one).
func clientTLS(base *tls.Config, serverName string, offerALPN bool) *tls.Config {
	var c *tls.Config
	if base != nil {
		c = base.Clone()
	} else {
		c = &tls.Config{}
	}
	c.MinVersion = tls.VersionTLS13
	if serverName != "" {
		c.ServerName = serverName
	} else if c.ServerName == "" {
		c.ServerName = "localhost"
	}
	if offerALPN {
		c.NextProtos = []string{ALPN}
	} else {
		c.NextProtos = nil
	}
	return c
}

// errNoTLS is returned by Listen when ServerConfig.TLS is missing.
var errNoTLS = errors.New("conn: ServerConfig.TLS with a certificate is required")

// serverTLS returns the TLS configuration of a client listener. It accepts
// clients that offer ALPN (they must offer "felix/1", which is then
// selected) and, unless requireALPN is set, clients that offer no ALPN at
// all. QUIC's TLS refuses a handshake that ends without a protocol when
// either side configured one, so one configuration cannot serve both: the
// choice is made per ClientHello with GetConfigForClient.
func serverTLS(base *tls.Config, requireALPN bool) (*tls.Config, error) {
	if base == nil || (len(base.Certificates) == 0 && base.GetCertificate == nil && base.GetConfigForClient == nil) {
		return nil, errNoTLS
	}
	withALPN := base.Clone()
	withALPN.MinVersion = tls.VersionTLS13
	withALPN.NextProtos = []string{ALPN}
	withALPN.GetConfigForClient = nil
	noALPN := withALPN.Clone()
	noALPN.NextProtos = nil
	outer := withALPN.Clone()
	inner := base.GetConfigForClient
	outer.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if inner != nil {
			// A caller-supplied hook (e.g. certificate rotation) decides
			// first; its answer is then given the ALPN policy below.
			c, err := inner(hello)
			if err != nil {
				return nil, err
			}
			if c != nil {
				c = c.Clone()
				c.MinVersion = tls.VersionTLS13
				return applyALPN(c, hello, requireALPN)
			}
		}
		if len(hello.SupportedProtos) > 0 || requireALPN {
			return applyALPN(withALPN.Clone(), hello, requireALPN)
		}
		return noALPN, nil
	}
	return outer, nil
}

// errALPN refuses a client that offered ALPN ids but not "felix/1".
var errALPN = errors.New("conn: client offered no supported ALPN protocol (want " + ALPN + ")")

func applyALPN(c *tls.Config, hello *tls.ClientHelloInfo, requireALPN bool) (*tls.Config, error) {
	if len(hello.SupportedProtos) == 0 {
		if requireALPN {
			return nil, errALPN
		}
		c.NextProtos = nil
		return c, nil
	}
	if !slices.Contains(hello.SupportedProtos, ALPN) {
		return nil, errALPN
	}
	c.NextProtos = []string{ALPN}
	return c, nil
}

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
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
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
