package webpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func selfSigned(t *testing.T, mod func(*x509.Certificate)) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if mod != nil {
		mod(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return der
}

// Each webpki refusal the emulation models, against a leaf that passes.
func TestVerify(t *testing.T) {
	leaf := selfSigned(t, nil)
	v, err := New(leaf)
	require.NoError(t, err)
	require.NoError(t, v.Verify([][]byte{leaf}, "localhost"))
	require.NoError(t, v.Verify([][]byte{leaf}, "127.0.0.1"))
	require.ErrorIs(t, v.Verify([][]byte{leaf}, "::1"), ErrNameMismatch)
	require.ErrorIs(t, v.Verify(nil, "localhost"), ErrBadDer)
	require.ErrorIs(t, v.Verify([][]byte{{1, 2}}, "localhost"), ErrBadDer)

	for name, tc := range map[string]struct {
		mod  func(*x509.Certificate)
		want error
	}{
		"CA as end entity":     {func(c *x509.Certificate) { c.IsCA = true }, ErrCaUsedAsEndEntity},
		"client auth only":     {func(c *x509.Certificate) { c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth} }, ErrRequiredEkuNotFound},
		"expired":              {func(c *x509.Certificate) { c.NotAfter = time.Now().Add(-time.Minute) }, ErrExpired},
		"common name only":     {func(c *x509.Certificate) { c.DNSNames, c.IPAddresses = nil, nil }, ErrNameMismatch},
		"other name":           {func(c *x509.Certificate) { c.DNSNames = []string{"example.com"} }, ErrNameMismatch},
		"no EKU is accepted":   {func(c *x509.Certificate) { c.ExtKeyUsage = nil }, nil},
		"wildcard SAN":         {func(c *x509.Certificate) { c.DNSNames = []string{"*.localhost", "localhost"} }, nil},
		"no basic constraints": {func(c *x509.Certificate) { c.BasicConstraintsValid = false }, nil},
	} {
		t.Run(name, func(t *testing.T) {
			der := selfSigned(t, tc.mod)
			v, err := New(der)
			require.NoError(t, err)
			err = v.Verify([][]byte{der}, "localhost")
			if tc.want == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.want)
			}
		})
	}
	// Anchored by another certificate with the same subject: unknown issuer.
	require.ErrorIs(t, v.Verify([][]byte{selfSigned(t, nil)}, "localhost"), ErrUnknownIssuer)
	_, err = New([]byte{0})
	require.ErrorIs(t, err, ErrBadDer)
}
