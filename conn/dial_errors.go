package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/flxproto/felix"
	"github.com/quic-go/quic-go"
)

// This file holds the errors of a failed Dial. Each names the address and
// what to check, and matches one sentinel with errors.Is, so that callers
// (and the cluster client's retry loop) can tell a mistake that no retry
// mends from a broker that is not there yet.

// Sentinel errors of a failed Dial (matched through a *DialError).
var (
	// ErrBadAddress: the address cannot be dialled as written (no port,
	// a port that is not a number or a known service name, a host name
	// that does not resolve). Nothing was sent; retrying the same address
	// cannot succeed.
	ErrBadAddress = errors.New("conn: bad broker address")
	// ErrNoAnswer: nothing answered the QUIC handshake before the dial's
	// context or the handshake idle timeout ended: no broker listens on
	// that UDP address, a firewall drops the packets, or the broker is
	// still starting. A later dial may succeed.
	ErrNoAnswer = errors.New("conn: no answer from the broker")
	// ErrCertUntrusted: the broker's certificate was refused (signed by an
	// authority the client does not trust, not valid for the server name,
	// expired). Retrying cannot succeed until the trust settings change.
	ErrCertUntrusted = errors.New("conn: broker certificate not trusted")
	// ErrBrokerBusy: the broker answered the handshake with the QUIC
	// error CONNECTION_REFUSED: it is there but takes no new connection
	// for now (its connection or handshake limits are reached, or its
	// accept queue is full under a flood). A later dial, after a
	// back-off, may succeed; the cluster client retries it within the
	// caller's deadline.
	ErrBrokerBusy = errors.New("conn: broker busy")
)

// DialError is a failed Dial: Addr could not be connected to or
// authenticated with. Nothing but the handshake and the auth frame was
// sent. errors.Is matches its Kind (ErrBadAddress, ErrNoAnswer,
// ErrCertUntrusted, ErrBrokerBusy or felix.ErrAuthRefused) and everything its cause matches:
// a refused auth is also a *felix.BrokerError (errors.As), a timeout also
// context.DeadlineExceeded when the caller's context expired.
type DialError struct {
	// Addr is the address dialled, as given.
	Addr string
	// Kind is the sentinel naming what went wrong.
	Kind error
	// Tenant is the tenant id offered (for a refused auth; "" otherwise).
	Tenant string
	// Waited is how long a dial that got no answer waited (0: unknown).
	Waited time.Duration
	// Err is the cause (net, x509, quic-go or *felix.BrokerError).
	Err error
}

// Error says what failed, where, and what to check.
func (e *DialError) Error() string {
	switch e.Kind {
	case ErrBadAddress:
		return fmt.Sprintf("conn: bad broker address %q: want host:port with a UDP port number, e.g. 127.0.0.1:7447 (%v)", e.Addr, e.Err)
	case ErrNoAnswer:
		within := ""
		if e.Waited > 0 {
			within = " within " + e.Waited.Round(time.Millisecond).String()
		}
		return "conn: no answer from " + e.Addr + within + ": is a broker listening on that UDP address? (check the host, the port and that the broker is running)"
	case ErrCertUntrusted:
		return "conn: the broker at " + e.Addr + " " + certAdvice(e.Err)
	case ErrBrokerBusy:
		return "conn: the broker at " + e.Addr + " refused the connection for now (CONNECTION_REFUSED: it is at its connection or handshake limits): dial again after a back-off, or connect to another broker"
	case felix.ErrAuthRefused:
		var be *felix.BrokerError
		if errors.As(e.Err, &be) && be.RetryClass() != felix.RetryFatal {
			// Not a verdict on the credentials: the broker takes no new
			// connection for now (draining, shutting down, throttled).
			what := "refused the connection for now"
			if be.Code == felix.CodeDraining {
				what = "is draining (shutting down) and takes no new connection"
			}
			return fmt.Sprintf("conn: the broker at %s %s: %s [%s, %s]: connect to another broker, or retry once it is back", e.Addr, what, be.Message, be.Code, be.RetryClass())
		}
		s := fmt.Sprintf("conn: the broker at %s refused the credentials offered for tenant %q: check the tenant id and the token (the broker does not say which is wrong)", e.Addr, e.Tenant)
		if be != nil {
			s += ": " + be.Message
			if be.Code != "" {
				s += " [" + string(be.Code) + "]"
			}
		}
		return s
	}
	return "conn: dial " + e.Addr + ": " + e.Err.Error()
}

// Unwrap returns the kind and the cause.
func (e *DialError) Unwrap() []error { return []error{e.Kind, e.Err} }

// certAdvice explains a refused broker certificate from its x509 cause.
func certAdvice(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknownCA):
		return "presented a certificate signed by an authority this client does not trust: trust the broker's certificate (a reference broker writes it with -cert-out)"
	case errors.As(err, &host):
		return fmt.Sprintf("presented a certificate that is not valid for the server name %q (it holds %s): set the server name to one it holds", host.Host, certNames(host.Certificate))
	case errors.As(err, &invalid):
		return "presented a certificate that is not usable (" + invalid.Error() + "): the broker needs a new certificate"
	}
	return "presented a certificate that was refused: " + err.Error()
}

// certNames lists the names a certificate holds, for an error message.
func certNames(c *x509.Certificate) string {
	if c == nil {
		return "no names"
	}
	var names []string
	names = append(names, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return "no names"
	}
	return strings.Join(names, ", ")
}

// resolveDialAddr resolves addr, mapping a malformed address, an unknown
// port and an unknown host to ErrBadAddress.
func resolveDialAddr(addr string) (*net.UDPAddr, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err == nil {
		return ua, nil
	}
	var ae *net.AddrError
	var de *net.DNSError
	if errors.As(err, &ae) || (errors.As(err, &de) && (de.IsNotFound || strings.Contains(de.Err, "unknown port"))) {
		return nil, &DialError{Addr: addr, Kind: ErrBadAddress, Err: err}
	}
	return nil, &DialError{Addr: addr, Kind: ErrNoAnswer, Err: &TransportError{Op: "dial", Err: err}}
}

// dialErr maps an error of the QUIC handshake with addr: a refused
// certificate, or no answer (the caller's deadline, the handshake idle
// timeout). started is when the dial began.
func dialErr(ctx context.Context, addr string, started time.Time, err error) error {
	var unknownCA x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError // any other refusal of the chain
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &host), errors.As(err, &invalid), errors.As(err, &verify):
		return &DialError{Addr: addr, Kind: ErrCertUntrusted, Err: &TransportError{Op: "dial", Err: err}}
	case errors.Is(ctx.Err(), context.Canceled):
		return ctx.Err() // the caller gave up: the plain context error, as everywhere
	case ctx.Err() != nil:
		return &DialError{Addr: addr, Kind: ErrNoAnswer, Waited: waited(ctx, started), Err: ctx.Err()}
	case isTimeout(err):
		return &DialError{Addr: addr, Kind: ErrNoAnswer, Waited: waited(ctx, started), Err: &TransportError{Op: "dial", Err: err}}
	case refusedByBroker(err):
		return &DialError{Addr: addr, Kind: ErrBrokerBusy, Err: &TransportError{Op: "dial", Err: err}}
	}
	return &TransportError{Op: "dial", Err: err}
}

// refusedByBroker reports a handshake the broker closed with
// CONNECTION_REFUSED.
func refusedByBroker(err error) bool {
	var te *quic.TransportError
	return errors.As(err, &te) && te.Remote && te.ErrorCode == quic.ConnectionRefused
}

// waited is how long a dial that started at started waited: up to the
// caller's deadline when that deadline ended it (so that a 1 s timeout
// reads "1s"), else the time it took (a handshake that timed out on its
// own, well before a distant deadline, says how long it really waited).
func waited(ctx context.Context, started time.Time) time.Duration {
	if d, ok := ctx.Deadline(); ok && ctx.Err() != nil {
		return d.Sub(started).Round(time.Millisecond)
	}
	return time.Since(started).Round(time.Millisecond)
}
