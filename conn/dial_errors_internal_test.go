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

// The wait a dial error states is the real one: a handshake that timed
// out on its own under a distant deadline says how long it waited, not
// the deadline; a dial the deadline ended says the deadline.
func TestDialWaitedIsTheRealWait(t *testing.T) {
	far, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	started := time.Now().Add(-5 * time.Second)
	require.Less(t, waited(far, started), time.Minute, "not the hour of the deadline")
	require.GreaterOrEqual(t, waited(far, started), 5*time.Second)
	ended, cancel2 := context.WithDeadline(context.Background(), started.Add(2*time.Second))
	defer cancel2()
	<-ended.Done()
	require.Equal(t, 2*time.Second, waited(ended, started))
}
