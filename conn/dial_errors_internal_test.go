package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A certificate chain refused for a reason that is none of the x509
// types named in dialErr (tls wraps every verification failure) is still
// judged untrusted: the cluster client's table then fails the dial at
// once instead of retrying it.
func TestDialErrCertificateVerificationIsUntrusted(t *testing.T) {
	cause := &tls.CertificateVerificationError{Err: errors.New("x509: certificate has expired or is not yet valid")}
	err := dialErr(context.Background(), "127.0.0.1:7447", time.Now(), cause)
	require.ErrorIs(t, err, ErrCertUntrusted)
	require.ErrorAs(t, err, new(*tls.CertificateVerificationError))
}
