package conn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/webpki"
)

// TestSelfSignedIsLeaf parses the generated certificate and asserts what
// upstream's broker generates: an ECDSA P-256 end-entity certificate.
func TestSelfSignedIsLeaf(t *testing.T) {
	cfg, pool, err := SelfSigned()
	require.NoError(t, err)
	require.Len(t, cfg.Certificates, 1)
	require.Len(t, cfg.Certificates[0].Certificate, 1)
	c, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	require.NoError(t, err)

	assert.Equal(t, 3, c.Version)
	assert.True(t, c.BasicConstraintsValid, "basic constraints present")
	assert.False(t, c.IsCA, "CA:FALSE")
	assert.Equal(t, x509.KeyUsageDigitalSignature, c.KeyUsage)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, c.ExtKeyUsage)
	assert.Empty(t, c.UnknownExtKeyUsage)
	assert.Equal(t, []string{"localhost"}, c.DNSNames)
	require.Len(t, c.IPAddresses, 2)
	assert.True(t, c.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)))
	assert.True(t, c.IPAddresses[1].Equal(net.IPv6loopback))
	assert.Equal(t, "localhost", c.Subject.CommonName)
	assert.Equal(t, c.RawSubject, c.RawIssuer, "self-issued")
	assert.Equal(t, x509.ECDSA, c.PublicKeyAlgorithm)
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	require.True(t, ok)
	assert.Equal(t, elliptic.P256(), pub.Curve)
	assert.Equal(t, x509.ECDSAWithSHA256, c.SignatureAlgorithm)
	require.NoError(t, c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature), "self-signed")
	assert.True(t, time.Now().After(c.NotBefore) && time.Now().Before(c.NotAfter))

	// Go's verifier accepts the non-CA leaf because it is itself in the pool.
	for _, name := range []string{"localhost", "127.0.0.1", "::1"} {
		_, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		assert.NoError(t, err, name)
	}
	_, err = c.Verify(x509.VerifyOptions{Roots: pool, DNSName: "example.com"})
	assert.Error(t, err)
	// And so does the webpki emulation, with the certificate as its own anchor.
	v, err := webpki.New(c.Raw)
	require.NoError(t, err)
	for _, name := range []string{"localhost", "127.0.0.1", "::1"} {
		assert.NoError(t, v.Verify([][]byte{c.Raw}, name), name)
	}
	assert.ErrorIs(t, v.Verify([][]byte{c.Raw}, "example.com"), webpki.ErrNameMismatch)
}

func TestSelfSignedHosts(t *testing.T) {
	cfg, _, err := SelfSigned("broker.test", "10.1.2.3")
	require.NoError(t, err)
	c := cfg.Certificates[0].Leaf
	require.NotNil(t, c)
	assert.Equal(t, []string{"broker.test"}, c.DNSNames)
	require.Len(t, c.IPAddresses, 1)
	assert.True(t, c.IPAddresses[0].Equal(net.IPv4(10, 1, 2, 3)))
	assert.False(t, c.IsCA)
}

// caCert makes a certificate like the one SelfSigned used to make
// (CA:TRUE), to show that the webpki emulation refuses what rustls refused.
func caCert(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return der
}

func TestWebpkiEmulationRefuses(t *testing.T) {
	ca := caCert(t)
	v, err := webpki.New(ca)
	require.NoError(t, err)
	assert.ErrorIs(t, v.Verify([][]byte{ca}, "localhost"), webpki.ErrCaUsedAsEndEntity)

	cfg, _, err := SelfSigned()
	require.NoError(t, err)
	leaf := cfg.Certificates[0].Certificate[0]
	assert.ErrorIs(t, v.Verify([][]byte{leaf}, "localhost"), webpki.ErrUnknownIssuer, "anchored elsewhere")
	other, _, err := SelfSigned()
	require.NoError(t, err)
	v2, err := webpki.New(other.Certificates[0].Certificate[0])
	require.NoError(t, err)
	assert.ErrorIs(t, v2.Verify([][]byte{leaf}, "localhost"), webpki.ErrUnknownIssuer, "same subject, other key")
	v3, err := webpki.New(leaf)
	require.NoError(t, err)
	v3.Now = func() time.Time { return time.Now().Add(2 * 365 * 24 * time.Hour) }
	assert.ErrorIs(t, v3.Verify([][]byte{leaf}, "localhost"), webpki.ErrExpired)
}

// TestSelfSignedPEMOnly dials a server carrying a SelfSigned certificate
// with nothing but its PEM: once as a Go client pinning it as a root, once
// with rustls/webpki semantics (the leaf must not be a CA).
func TestSelfSignedPEMOnly(t *testing.T) {
	leakCheck(t)
	srvTLS, _, err := SelfSigned()
	require.NoError(t, err)
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvTLS.Certificates[0].Certificate[0]})
	b := startBroker(t, brokerOpts{offer: fullOffer(), srvTLS: srvTLS})

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pemBytes))
	block, _ := pem.Decode(pemBytes)
	require.NotNil(t, block)
	v, err := webpki.New(block.Bytes)
	require.NoError(t, err)

	topic := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "pemonly"}
	for _, tc := range []struct {
		name string
		tls  *tls.Config
		sni  string
	}{
		{"go roots", &tls.Config{RootCAs: pool}, "localhost"},
		{"go roots ip", &tls.Config{RootCAs: pool}, "127.0.0.1"},
		{"webpki", &tls.Config{InsecureSkipVerify: true, VerifyPeerCertificate: v.VerifyPeerCertificate("localhost")}, "localhost"},
		{"webpki ip", &tls.Config{InsecureSkipVerify: true, VerifyPeerCertificate: v.VerifyPeerCertificate("127.0.0.1")}, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := b.dial(t, func(c *Config) { c.TLS = tc.tls; c.ServerName = tc.sni })
			ctx := testCtx(t)
			_, err := c.Publish(ctx, topic, []byte("x"), PublishOptions{Ack: felix.AckPerBatch})
			require.NoError(t, err)
			require.NoError(t, c.Close())
		})
	}
	// A trust store without the certificate is refused by both.
	other, _, err := SelfSigned()
	require.NoError(t, err)
	v2, err := webpki.New(other.Certificates[0].Certificate[0])
	require.NoError(t, err)
	cfg := b.clientConfig()
	cfg.TLS = &tls.Config{InsecureSkipVerify: true, VerifyPeerCertificate: v2.VerifyPeerCertificate("localhost")}
	_, err = Dial(testCtx(t), b.addr(), cfg)
	require.Error(t, err)
}
