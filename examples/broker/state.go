package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/flxproto/felix/conn"
)

// The state directory (-state-dir) keeps what a restarted broker needs so
// that its clients stay pointed at it: today its certificate and key (the
// streams and caches are in memory and do not survive a restart).
const (
	stateCertFile = "cert.pem"
	stateKeyFile  = "key.pem"
)

// stateCert returns the certificate and key kept in dir: read when both
// files are there, else a new self-signed certificate for localhost,
// 127.0.0.1 and ::1 written there (the directory created 0700, the files
// 0600). created says which. One file without the other is refused: the
// broker does not guess which to trust.
func stateCert(dir string) (cert tls.Certificate, created bool, err error) {
	certPath, keyPath := filepath.Join(dir, stateCertFile), filepath.Join(dir, stateKeyFile)
	_, cerr := os.Stat(certPath)
	_, kerr := os.Stat(keyPath)
	switch {
	case cerr == nil && kerr == nil:
		if err := checkPrivate(keyPath); err != nil {
			return tls.Certificate{}, false, err
		}
		cert, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return tls.Certificate{}, false, fmt.Errorf("-state-dir %s: %w (remove both %s and %s to have new ones made)", dir, err, stateCertFile, stateKeyFile)
		}
		return cert, false, nil
	case errors.Is(cerr, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist):
	case cerr == nil || kerr == nil:
		return tls.Certificate{}, false, fmt.Errorf("-state-dir %s holds one of %s and %s without the other: restore it, or remove both to have new ones made (clients must then trust the new certificate)", dir, stateCertFile, stateKeyFile)
	default:
		return tls.Certificate{}, false, fmt.Errorf("-state-dir %s: %v", dir, errors.Join(cerr, kerr))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, false, fmt.Errorf("-state-dir: %w", err)
	}
	certPEM, keyPEM, err := selfSignedPEM()
	if err != nil {
		return tls.Certificate{}, false, err
	}
	// The key first and exclusively: a concurrent start fails instead of
	// mixing two keys.
	if err := writeNew(keyPath, keyPEM); err != nil {
		return tls.Certificate{}, false, err
	}
	if err := writeNew(certPath, certPEM); err != nil {
		return tls.Certificate{}, false, err
	}
	cert, err = tls.X509KeyPair(certPEM, keyPEM)
	return cert, true, err
}

// checkPrivate refuses a key file that others can read.
func checkPrivate(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("-state-dir: %s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	return nil
}

// writeNew creates path with mode 0600; it must not exist.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("-state-dir: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("-state-dir: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("-state-dir: %w", err)
	}
	return f.Close()
}

// selfSignedPEM makes conn.SelfSigned's certificate for localhost,
// 127.0.0.1 and ::1, valid ten years, as PEM.
func selfSignedPEM() (certPEM, keyPEM []byte, err error) {
	tc, _, err := conn.SelfSignedFor(10 * 365 * 24 * time.Hour)
	if err != nil {
		return nil, nil, err
	}
	c := tc.Certificates[0]
	kder, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}
