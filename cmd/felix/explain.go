package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/flxproto/felix"
)

// This file turns the errors of broker operations into one line that names
// what failed and the likely fix: which address did not answer, which flag
// makes a certificate trusted, which operation timed out.

// brokerHint is how to start a broker for the hints below.
const brokerHint = "start one with: go run ./examples/broker -cert-out broker.pem"

// explain rewrites err, an error of operation op against the broker at
// c.addr, into an actionable message. Errors it does not recognise are
// returned with op as context.
func (c *clientFlags) explain(op string, err error) error {
	if err == nil {
		return nil
	}
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var netErr net.Error
	switch {
	case errors.As(err, &unknownCA):
		if c.cert != "" {
			return fmt.Errorf("%s: the broker at %s presented a certificate that %s does not sign: pass the PEM that this broker wrote with -cert-out", op, c.addr, c.cert)
		}
		return fmt.Errorf("%s: the broker at %s presented a certificate no trusted authority signed: pass -cert FILE with the PEM the broker wrote with -cert-out (or -insecure for a local test)", op, c.addr)
	case errors.As(err, &hostErr):
		return fmt.Errorf("%s: the broker's certificate at %s is not valid for %q (%v): set -server-name to a name it holds", op, c.addr, c.serverName, hostErr)
	case errors.As(err, &invalid):
		return fmt.Errorf("%s: the broker's certificate at %s is not usable: %v", op, c.addr, invalid)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		if op == "connect" {
			if c.timeout < time.Second {
				// A handshake needs a round trip or two: a broker may be
				// there and simply not have been given the time.
				return fmt.Errorf("no answer from %s within %s: raise -timeout (a QUIC handshake needs more), or check that a broker listens on that UDP address (%s; or set -addr / FELIX_ADDR)", c.addr, c.timeout, brokerHint)
			}
			return fmt.Errorf("no answer from %s within %s: is a broker listening on that UDP address? (%s; or set -addr / FELIX_ADDR)", c.addr, c.timeout, brokerHint)
		}
		return fmt.Errorf("%s: timed out after %s waiting for the broker at %s (raise -timeout)", op, c.timeout, c.addr)
	}
	var fe *felix.Error
	if errors.As(err, &fe) && errors.Is(err, felix.ErrFrameTooLarge) {
		return fmt.Errorf("%s: %v (frames are limited to %d bytes)", op, err, felix.DefaultMaxFrameBytes)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// timeoutCtx returns a context bounded by the -timeout flag.
func (c *clientFlags) timeoutCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}
