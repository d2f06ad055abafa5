package conn

import (
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrNoCertificate: a PEM file or block meant to hold certificates to trust
// holds none.
var ErrNoCertificate = errors.New("conn: no PEM certificate")

// CertPoolFromPEM returns a pool of the certificates in pemBytes (for
// tls.Config.RootCAs), such as the file a reference broker writes with
// -cert-out. source names where the bytes came from, for the error.
func CertPoolFromPEM(pemBytes []byte, source string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("%w in %s (want the PEM certificate the broker presents, e.g. the file a reference broker writes with -cert-out)", ErrNoCertificate, source)
	}
	return pool, nil
}

// CertPoolFromFile is CertPoolFromPEM of the file at path.
func CertPoolFromFile(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("conn: reading the certificates to trust: %w", err)
	}
	return CertPoolFromPEM(b, path)
}
