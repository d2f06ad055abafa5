// Package tlsconf is the TLS policy of Felix connections, shared by the
// client and server halves of conn and by the debugging relay (conn/tap):
// TLS 1.3 only, the "felix/1" ALPN choice, the server name and key
// logging.
package tlsconf

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"slices"
)

// ALPN is the protocol id of the Felix client listener (conn.ALPN).
const ALPN = "felix/1"

// Client returns the TLS configuration a client dials with: a clone of
// base (or a fresh one), TLS 1.3 only, with NextProtos set to [ALPN] when
// offerALPN is true and emptied otherwise (an older broker configures no ALPN
// and refuses any client that offers one).
func Client(base *tls.Config, serverName string, offerALPN bool) *tls.Config {
	var c *tls.Config
	if base != nil {
		c = base.Clone()
	} else {
		c = &tls.Config{}
	}
	c.MinVersion = tls.VersionTLS13
	if serverName != "" {
		c.ServerName = serverName
	} else if c.ServerName == "" {
		c.ServerName = "localhost"
	}
	if offerALPN {
		c.NextProtos = []string{ALPN}
	} else {
		c.NextProtos = nil
	}
	return c
}

// ErrNoTLS refuses a server configuration without a certificate
// (conn.Listen: ServerConfig.TLS is missing).
var ErrNoTLS = errors.New("conn: ServerConfig.TLS with a certificate is required")

// Server returns the TLS configuration of a client listener. It accepts
// clients that offer ALPN (they must offer "felix/1", which is then
// selected) and, unless requireALPN is set, clients that offer no ALPN at
// all. QUIC's TLS refuses a handshake that ends without a protocol when
// either side configured one, so one configuration cannot serve both: the
// choice is made per ClientHello with GetConfigForClient.
func Server(base *tls.Config, requireALPN bool) (*tls.Config, error) {
	if base == nil || (len(base.Certificates) == 0 && base.GetCertificate == nil && base.GetConfigForClient == nil) {
		return nil, ErrNoTLS
	}
	withALPN := base.Clone()
	withALPN.MinVersion = tls.VersionTLS13
	withALPN.NextProtos = []string{ALPN}
	withALPN.GetConfigForClient = nil
	noALPN := withALPN.Clone()
	noALPN.NextProtos = nil
	outer := withALPN.Clone()
	inner := base.GetConfigForClient
	outer.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if inner != nil {
			// A caller-supplied hook (e.g. certificate rotation) decides
			// first; its answer is then given the ALPN policy below.
			c, err := inner(hello)
			if err != nil {
				return nil, err
			}
			if c != nil {
				c = c.Clone()
				c.MinVersion = tls.VersionTLS13
				return applyALPN(c, hello, requireALPN)
			}
		}
		if len(hello.SupportedProtos) > 0 || requireALPN {
			return applyALPN(withALPN.Clone(), hello, requireALPN)
		}
		return noALPN, nil
	}
	return outer, nil
}

// errALPN refuses a client that offered ALPN ids but not "felix/1".
var errALPN = errors.New("conn: client offered no supported ALPN protocol (want " + ALPN + ")")

func applyALPN(c *tls.Config, hello *tls.ClientHelloInfo, requireALPN bool) (*tls.Config, error) {
	if len(hello.SupportedProtos) == 0 {
		if requireALPN {
			return nil, errALPN
		}
		c.NextProtos = nil
		return c, nil
	}
	if !slices.Contains(hello.SupportedProtos, ALPN) {
		return nil, errALPN
	}
	c.NextProtos = []string{ALPN}
	return c, nil
}

// WithKeyLog returns base with its KeyLogWriter set to w (a clone; base
// when w is nil), including the configurations a GetConfigForClient hook
// returns.
func WithKeyLog(base *tls.Config, w io.Writer) *tls.Config {
	if base == nil || w == nil {
		return base
	}
	c := base.Clone()
	c.KeyLogWriter = w
	if inner := c.GetConfigForClient; inner != nil {
		c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			cc, err := inner(hello)
			if cc != nil {
				cc = cc.Clone()
				cc.KeyLogWriter = w
			}
			return cc, err
		}
	}
	return c
}

// ServerName picks the TLS server name a client verifies: configured,
// else tlsName (the TLS configuration's own), else the host of addr when
// it is a name, else "localhost" (a development broker's certificate
// name) for an IP address.
func ServerName(configured, tlsName, addr string) string {
	if configured != "" {
		return configured
	}
	if tlsName != "" {
		return tlsName
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" && net.ParseIP(host) == nil {
		return host
	}
	return "localhost"
}
