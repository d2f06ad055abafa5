package conn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// testCA issues client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test client CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// client issues a client certificate with subject common name cn.
func (ca *testCA) client(t *testing.T, cn string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// principal is the identity of the mTLS test's Authenticator.
type principal struct {
	Name   string
	Remote net.Addr
}

// TestMutualTLSBindsCertificateToToken: over mTLS, the Authenticator sees
// the verified client certificate and address (AuthPeerFromContext) and
// accepts a token only for the principal the certificate names; the
// server reads the identity back typed (IdentityOf) and the certificate
// from the connection.
func TestMutualTLSBindsCertificateToToken(t *testing.T) {
	leakCheck(t)
	ca := newTestCA(t)
	type seen struct {
		id   principal
		ok   bool
		cert string
	}
	got := make(chan seen, 4)
	h := serveHandler(t, func(c *ServerConfig) {
		c.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		c.TLS.ClientCAs = ca.pool
		c.Authenticate = func(ctx context.Context, a *felix.Auth) (any, error) {
			peer, ok := AuthPeerFromContext(ctx)
			if !ok || peer.Certificate == nil || len(peer.TLS.VerifiedChains) == 0 {
				return nil, &felix.BrokerError{Message: "client certificate required", Code: felix.CodeUnauthenticated}
			}
			name, ok := strings.CutPrefix(a.Token, "token-for-")
			if !ok {
				return nil, &felix.BrokerError{Message: "bad token", Code: felix.CodeUnauthenticated}
			}
			if peer.Certificate.Subject.CommonName != name {
				return nil, &felix.BrokerError{Message: "certificate subject does not match the token", Code: felix.CodeForbidden}
			}
			return principal{Name: name, Remote: peer.RemoteAddr}, nil
		}
	}, func(st *Stream) {
		defer st.Close()
		id, ok := IdentityOf[principal](st)
		_, wrong := IdentityOf[string](st)
		got <- seen{id: id, ok: ok && !wrong, cert: st.Conn().PeerCertificate().Subject.CommonName}
		st.ReadRequest(st.Conn().Context())
	})
	dial := func(cert *tls.Certificate, token string) (*Client, error) {
		tc := &tls.Config{RootCAs: h.pool}
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		c, err := Dial(testCtx(t), h.ln.Addr().String(), &Config{TLS: tc, TenantID: "t1", Token: token})
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}
	alice := ca.client(t, "alice")

	c, err := dial(&alice, "token-for-alice")
	require.NoError(t, err)
	s := recv(t, got, "the identity the server saw")
	require.True(t, s.ok)
	require.Equal(t, "alice", s.id.Name)
	require.Equal(t, "alice", s.cert)
	require.Equal(t, c.qc.LocalAddr().(*net.UDPAddr).Port, s.id.Remote.(*net.UDPAddr).Port, "the Authenticator saw the client's address")

	// Alice's certificate with Bob's token: refused with forbidden.
	_, err = dial(&alice, "token-for-bob")
	require.ErrorIs(t, err, felix.ErrAuthRefused)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeForbidden, be.Code)
	require.Contains(t, be.Message, "does not match")

	// No certificate: the TLS handshake itself fails.
	_, err = dial(nil, "token-for-alice")
	var te *TransportError
	require.ErrorAs(t, err, &te)

	// A certificate from another CA: refused by TLS verification too.
	mallory := newTestCA(t).client(t, "alice")
	_, err = dial(&mallory, "token-for-alice")
	require.ErrorAs(t, err, &te)
}

// TestAuthPeerWithoutMTLS: without client certificates the Authenticator
// still sees the address and TLS state; Certificate is nil.
func TestAuthPeerWithoutMTLS(t *testing.T) {
	leakCheck(t)
	peers := make(chan AuthPeer, 1)
	h := serveHandler(t, func(c *ServerConfig) {
		c.Authenticate = func(ctx context.Context, a *felix.Auth) (any, error) {
			p, _ := AuthPeerFromContext(ctx)
			select {
			case peers <- p:
			default:
			}
			return a.TenantID, nil
		}
	}, func(st *Stream) {
		defer st.Close()
		if id, ok := IdentityOf[string](st); !ok || id != "t1" {
			t.Errorf("identity %v %v", id, ok)
		}
		st.ReadRequest(st.Conn().Context())
	})
	c := h.dial(t, nil)
	p := recv(t, peers, "the peer the server saw")
	require.Nil(t, p.Certificate)
	require.Equal(t, uint16(tls.VersionTLS13), p.TLS.Version)
	require.Equal(t, c.qc.LocalAddr().(*net.UDPAddr).Port, p.RemoteAddr.(*net.UDPAddr).Port)
	_, ok := AuthPeerFromContext(context.Background())
	require.False(t, ok)
}
