// Package webpki emulates, for tests, the checks that rustls's certificate
// verifier (the webpki crate) makes on a server's end-entity certificate,
// where they are stricter than Go's crypto/x509: a certificate with Basic
// Constraints CA:TRUE is refused as an end entity (CaUsedAsEndEntity), the
// name is matched against subject alternative names only, the extended key
// usage must allow serverAuth, and the issuer must be a trust anchor whose
// subject names the issuer and whose key verifies the signature. A trust
// anchor is built from a trusted certificate's subject and key alone, so a
// self-signed leaf pinned as a root anchors itself.
//
// It is an emulation for tests, not a verifier to deploy.
package webpki

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"
)

// The refusals, named after webpki's errors.
var (
	ErrBadDer                   = errors.New("webpki: BadDer")
	ErrUnsupportedCertVersion   = errors.New("webpki: UnsupportedCertVersion")
	ErrCaUsedAsEndEntity        = errors.New("webpki: CaUsedAsEndEntity")
	ErrUnknownCriticalExtension = errors.New("webpki: UnsupportedCriticalExtension")
	ErrRequiredEkuNotFound      = errors.New("webpki: RequiredEkuNotFound")
	ErrExpired                  = errors.New("webpki: CertExpired or CertNotValidYet")
	ErrNameMismatch             = errors.New("webpki: CertNotValidForName")
	ErrUnknownIssuer            = errors.New("webpki: UnknownIssuer")
)

// anchor is what webpki keeps of a trusted certificate.
type anchor struct {
	subject []byte
	cert    *x509.Certificate // for its public key only
}

// Verifier checks server certificates against trust anchors.
type Verifier struct {
	anchors []anchor
	// Now returns the verification time (time.Now when nil).
	Now func() time.Time
}

// New builds trust anchors from DER certificates (for example the blocks of
// a PEM file written by a broker's -cert-out).
func New(trusted ...[]byte) (*Verifier, error) {
	v := &Verifier{}
	for _, der := range trusted {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("%w: trust anchor: %v", ErrBadDer, err)
		}
		v.anchors = append(v.anchors, anchor{subject: c.RawSubject, cert: c})
	}
	return v, nil
}

// Verify checks chain (end entity first, as sent in TLS) for serverName.
func (v *Verifier) Verify(chain [][]byte, serverName string) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: no certificate", ErrBadDer)
	}
	ee, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadDer, err)
	}
	if ee.Version != 3 {
		return ErrUnsupportedCertVersion
	}
	if ee.BasicConstraintsValid && ee.IsCA {
		return ErrCaUsedAsEndEntity
	}
	if len(ee.UnhandledCriticalExtensions) > 0 {
		return ErrUnknownCriticalExtension
	}
	if len(ee.ExtKeyUsage) > 0 || len(ee.UnknownExtKeyUsage) > 0 {
		ok := false
		for _, u := range ee.ExtKeyUsage {
			ok = ok || u == x509.ExtKeyUsageServerAuth
		}
		if !ok {
			return ErrRequiredEkuNotFound
		}
	}
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	if now.Before(ee.NotBefore) || now.After(ee.NotAfter) {
		return ErrExpired
	}
	if !nameMatches(ee, serverName) {
		return fmt.Errorf("%w: %q", ErrNameMismatch, serverName)
	}
	// Path building, one level: the end entity must be issued by an anchor.
	// (Intermediates in chain[1:] are not needed by the tests using this.)
	for _, a := range v.anchors {
		if !bytes.Equal(a.subject, ee.RawIssuer) {
			continue
		}
		// CheckSignature uses the anchor's key only and, unlike
		// CheckSignatureFrom, does not ask whether the anchor is a CA.
		if a.cert.CheckSignature(ee.SignatureAlgorithm, ee.RawTBSCertificate, ee.Signature) == nil {
			return nil
		}
	}
	return ErrUnknownIssuer
}

// nameMatches matches serverName against the subject alternative names
// only (webpki ignores the common name): an IP address against IP SANs, a
// DNS name against DNS SANs (exact, case-insensitive, or one wildcard
// label).
func nameMatches(c *x509.Certificate, serverName string) bool {
	if ip := net.ParseIP(serverName); ip != nil {
		for _, a := range c.IPAddresses {
			if a.Equal(ip) {
				return true
			}
		}
		return false
	}
	if len(c.DNSNames) == 0 {
		return false
	}
	return c.VerifyHostname(serverName) == nil
}

// VerifyPeerCertificate returns a crypto/tls VerifyPeerCertificate hook
// that applies Verify for serverName; use it with InsecureSkipVerify so
// that it replaces Go's own verification.
func (v *Verifier) VerifyPeerCertificate(serverName string) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error { return v.Verify(raw, serverName) }
}
