package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
)

// This file turns the errors of broker operations into one line that names
// what failed and the likely fix: which address did not answer, which flag
// makes a certificate trusted, which operation timed out.

// brokerHint is how to start a broker for the hints below.
const brokerHint = "start one with: go run ./examples/broker -cert-out broker.pem"

// explain returns err, an error of operation op against the broker at
// c.addr, as one line: the library's own message (conn.DialError,
// felix.FrameLimitError, ... say what failed, where and what to check),
// followed by the flag that applies the fix. Errors it does not recognise
// are returned with op as context.
func (c *clientFlags) explain(op string, err error) error {
	if err == nil {
		return nil
	}
	var ae *client.AmbiguousError
	if errors.As(err, &ae) {
		// Whatever else happened (a timeout, a lost connection), the
		// request may have been applied: say so first.
		why := ae.Err.Error()
		if errors.Is(ae.Err, context.DeadlineExceeded) {
			why = fmt.Sprintf("no answer within -timeout %s", c.timeout)
		}
		return fmt.Errorf("%s: outcome unknown: the broker at %s may or may not have applied it (%s); it was not re-sent: check (e.g. felix sub -from earliest) before sending it again", op, ae.Addr, why)
	}
	var de *conn.DialError
	if errors.As(err, &de) {
		msg := strings.TrimPrefix(de.Error(), "conn: ")
		switch de.Kind {
		case conn.ErrNoAnswer:
			if c.timeout < time.Second {
				// A handshake needs a round trip or two: a broker may be
				// there and simply not have been given the time.
				return fmt.Errorf("%s; raise -timeout first (a QUIC handshake needs a round trip or two), else %s, or set -addr / FELIX_ADDR", msg, brokerHint)
			}
			return fmt.Errorf("%s; %s, or set -addr / FELIX_ADDR", msg, brokerHint)
		case conn.ErrBadAddress:
			return fmt.Errorf("%s; set -addr / FELIX_ADDR", msg)
		case conn.ErrCertUntrusted:
			var unknownCA x509.UnknownAuthorityError
			var host x509.HostnameError
			switch {
			case errors.As(err, &unknownCA) && c.cert != "":
				return fmt.Errorf("%s; -cert %s does not sign it: pass the PEM that this broker wrote with -cert-out", msg, c.cert)
			case errors.As(err, &unknownCA):
				return fmt.Errorf("%s; pass it with -cert FILE (or -insecure for a local test)", msg)
			case errors.As(err, &host):
				return fmt.Errorf("%s; set -server-name", msg)
			}
			return errors.New(msg)
		case felix.ErrAuthRefused:
			return fmt.Errorf("%s; set -tenant and -token (or FELIX_TENANT and FELIX_TOKEN)", msg)
		}
		return errors.New(msg)
	}
	var fl *felix.FrameLimitError
	if errors.As(err, &fl) {
		return fmt.Errorf("%s: %s", op, strings.TrimPrefix(fl.Error(), "conn: "))
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout() {
		return fmt.Errorf("%s: timed out after %s waiting for the broker at %s (raise -timeout)", op, c.timeout, c.brokerAddr())
	}
	return fmt.Errorf("%s: %w", op, err)
}

// timeoutCtx returns a context bounded by the -timeout flag.
func (c *clientFlags) timeoutCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}
