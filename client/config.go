package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/flxproto/felix/conn"
)

// Defaults used when a Config leaves a field zero.
const (
	// DefaultMaxRedirects bounds the not_leader hops one attempt follows
	// (upstream's ClusterClient: 3, never the same broker twice).
	DefaultMaxRedirects = 3
	// DefaultMaxAttempts is the retry budget of one call: how many times a
	// retryable failure (retry class retry / retry_after, a lost
	// connection, a failed dial) is retried. Redirects do not count.
	DefaultMaxAttempts = 8
	// DefaultBackoffBase and DefaultBackoffMax shape the capped exponential
	// backoff with full jitter between retries: a wait drawn uniformly
	// from [0, min(max, base·2^n)).
	DefaultBackoffBase = 50 * time.Millisecond
	DefaultBackoffMax  = 2 * time.Second
	// DefaultDialTimeout bounds one dial (QUIC handshake and first auth),
	// so that an unreachable broker is given up for another one.
	DefaultDialTimeout = 5 * time.Second
	// DefaultShardEvents bounds the events a sharded subscription buffers
	// per shard ahead of its consumer.
	DefaultShardEvents = 256
)

// Config configures a Client. Seeds and the credentials (TenantID and
// Token, or the same fields of Conn) are required; every other zero field
// takes its default.
type Config struct {
	// Seeds are broker addresses (host:port) to start from. The client
	// learns the rest of the cluster from them (topology, listener ports,
	// owner hints) and keeps using what it learnt after a seed is gone.
	Seeds []string
	// TenantID and Token are the credentials sent in the auth of every
	// stream; they fill Conn.TenantID and Conn.Token (set one or the
	// other, not both). Every Topic and CacheRef must name this tenant:
	// a connection acts for one tenant.
	TenantID, Token string
	// CAFile names a PEM file of the certificates to trust for the
	// brokers (a reference broker writes its own with -cert-out); CAPEM
	// is the same as bytes. Either fills Conn.TLS.RootCAs (on a clone of
	// Conn.TLS). With neither, the system roots are trusted.
	CAFile string
	CAPEM  []byte
	// TLS is the base TLS configuration of every connection: client
	// certificates, RootCAs, a custom VerifyPeerCertificate. It is cloned
	// (CAFile or CAPEM then sets RootCAs on the clone) and TLS 1.3 is
	// forced. Nil trusts the system roots. It fills Conn.TLS (set one or
	// the other, not both).
	TLS *tls.Config
	// ServerName is the name the brokers' certificates must be valid for
	// (default: TLS.ServerName, else the dialled host, or "localhost" for
	// an IP address). It fills Conn.ServerName (set one or the other).
	ServerName string
	// IdleTimeout is QUIC's idle timeout: a dead broker or path is noticed
	// within it (0: 6 s, upstream's). KeepAlive is the QUIC keep-alive
	// period that keeps quiet subscriptions alive (0: 2 s). They fill
	// Conn.IdleTimeout and Conn.KeepAlive (set one or the other).
	IdleTimeout, KeepAlive time.Duration
	// Conn is the full configuration of every connection, for what the
	// fields above do not cover: a quic.Config (Conn.QUIC), connection
	// hooks for metrics and tracing (Conn.Hooks), a token provider
	// (Conn.TokenFunc), the offered flags and features, the frame limit,
	// stream pools, a TLS key log. Most programs leave it zero. The fields
	// above and Conn's fields of the same name must not disagree (New
	// refuses the Config).
	Conn conn.Config
	// MaxRedirects bounds the redirect hops of one attempt (0: default).
	MaxRedirects int
	// MaxAttempts is the retry budget of one call (0: default). A negative
	// value disables retries.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the backoff between retries (0:
	// defaults). A broker's retry_after_ms is honoured when it is longer.
	BackoffBase, BackoffMax time.Duration
	// DialTimeout bounds one dial (0: default).
	DialTimeout time.Duration
	// NoDiscovery keeps the client on its seeds and the owners it is
	// redirected to: no topology query, no listener ports.
	NoDiscovery bool
	// OnNotice, when set, is called for every connection state change,
	// redirect, retry, resume and lost shard (see Notice). It is called
	// synchronously, possibly concurrently, from the client's goroutines
	// and must not block. JoinNotices attaches several observers.
	OnNotice func(Notice)
	// Logger receives the same notices as structured logs (LogNotices:
	// discoveries at Debug, the rest at Info), after OnNotice; nil
	// discards them.
	Logger *slog.Logger
}

// resolve fills Conn from the credential and trust fields and checks
// them: conflicting credentials or an unusable CA are refused at New.
func (c *Config) resolve() (Config, error) {
	d := *c
	if d.TenantID != "" {
		if d.Conn.TenantID != "" && d.Conn.TenantID != d.TenantID {
			return d, fmt.Errorf("client: Config.TenantID %q and Config.Conn.TenantID %q differ: set one", d.TenantID, d.Conn.TenantID)
		}
		d.Conn.TenantID = d.TenantID
	}
	if d.Token != "" {
		if d.Conn.Token != "" && d.Conn.Token != d.Token {
			return d, errors.New("client: Config.Token and Config.Conn.Token differ: set one")
		}
		d.Conn.Token = d.Token
	}
	d.TenantID, d.Token = d.Conn.TenantID, d.Conn.Token
	if err := fill(&d.Conn.TLS, d.TLS, "TLS"); err != nil {
		return d, err
	}
	if err := fill(&d.Conn.ServerName, d.ServerName, "ServerName"); err != nil {
		return d, err
	}
	if err := fill(&d.Conn.IdleTimeout, d.IdleTimeout, "IdleTimeout"); err != nil {
		return d, err
	}
	if err := fill(&d.Conn.KeepAlive, d.KeepAlive, "KeepAlive"); err != nil {
		return d, err
	}
	if d.CAFile != "" || d.CAPEM != nil {
		if d.CAFile != "" && d.CAPEM != nil {
			return d, errors.New("client: Config.CAFile and Config.CAPEM are both set: set one")
		}
		var pool *x509.CertPool
		var err error
		if d.CAFile != "" {
			pool, err = conn.CertPoolFromFile(d.CAFile)
		} else {
			pool, err = conn.CertPoolFromPEM(d.CAPEM, "Config.CAPEM")
		}
		if err != nil {
			return d, fmt.Errorf("client: %w", err)
		}
		var tc *tls.Config
		if d.Conn.TLS != nil {
			tc = d.Conn.TLS.Clone()
		} else {
			tc = &tls.Config{}
		}
		tc.RootCAs = pool
		d.Conn.TLS = tc
	}
	d.TLS, d.ServerName, d.IdleTimeout, d.KeepAlive = d.Conn.TLS, d.Conn.ServerName, d.Conn.IdleTimeout, d.Conn.KeepAlive
	return d.withDefaults(), nil
}

// fill copies a Config field v into its Conn field *dst when v is set, and
// refuses a Config whose two fields are both set and differ.
func fill[T comparable](dst *T, v T, name string) error {
	var zero T
	if v == zero {
		return nil
	}
	if *dst != zero && *dst != v {
		return fmt.Errorf("client: Config.%s and Config.Conn.%s differ: set one", name, name)
	}
	*dst = v
	return nil
}

func (c *Config) withDefaults() Config {
	d := *c
	if d.MaxRedirects <= 0 {
		d.MaxRedirects = DefaultMaxRedirects
	}
	if d.MaxAttempts == 0 {
		d.MaxAttempts = DefaultMaxAttempts
	} else if d.MaxAttempts < 0 {
		d.MaxAttempts = 0
	}
	if d.DialTimeout <= 0 {
		d.DialTimeout = DefaultDialTimeout
	}
	if d.BackoffBase <= 0 {
		d.BackoffBase = DefaultBackoffBase
	}
	if d.BackoffMax <= 0 {
		d.BackoffMax = DefaultBackoffMax
	}
	if d.BackoffMax < d.BackoffBase {
		d.BackoffMax = d.BackoffBase
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return d
}

// backoff returns the wait before retry n (1-based): full jitter over a
// capped exponential, never shorter than retryAfter.
func (c *Config) backoff(n int, retryAfter time.Duration) time.Duration {
	ceil := c.BackoffMax
	if n < 31 {
		if e := c.BackoffBase << uint(n-1); e > 0 && e < ceil {
			ceil = e
		}
	}
	d := time.Duration(rand.Int64N(int64(ceil) + 1))
	return max(d, retryAfter)
}
