package conn

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"
)

// Defaults used when a Config or ServerConfig leaves a field zero.
const (
	// DefaultKeepAlive is the QUIC keep-alive period (upstream's current
	// default, FELIX_KEEPALIVE_MS). A quiet subscription sends nothing in
	// either direction; without keep-alives QUIC's idle timeout would drop
	// it.
	DefaultKeepAlive = 2 * time.Second
	// DefaultIdleTimeout is the QUIC idle timeout (upstream's current
	// default, FELIX_MAX_IDLE_TIMEOUT_MS): a dead peer or path is noticed
	// within it.
	DefaultIdleTimeout = 6 * time.Second
	// DefaultMaxStreams is the number of concurrent streams of each kind
	// (bidirectional, unidirectional) a client may open on one connection
	// to a server (docs/transport.md §4: 1024 per direction).
	DefaultMaxStreams = 1024
	// DefaultMaxEventStreams is the number of concurrent unidirectional
	// streams a client lets a broker open on one connection: one per
	// subscription or cache watch (upstream's client keeps up to 16,384
	// pending event streams; quic-go's own default of 100 is too few).
	DefaultMaxEventStreams = 16384
	// DefaultAuthTimeout is how long a connection may go without any
	// authenticated stream before the server closes it with
	// CloseAuthTimeout, and how long each client stream may stay
	// unauthenticated before the server resets it (ResetAuthTimeout).
	DefaultAuthTimeout = 10 * time.Second
	// DefaultAnswerWriteTimeout is ServerConfig.AnswerWriteTimeout, the
	// same bound as the reference broker's event writes.
	DefaultAnswerWriteTimeout = 30 * time.Second
	// DefaultPreAuthStreams is how many unauthenticated streams per
	// connection the server reads at once, each with a goroutine of its
	// own (docs/transport.md §6: upstream reads 16). Reading an auth frame
	// that has arrived takes microseconds and a slot waiting for one that
	// has not gives it up after a short slice, so 8 serve a client's burst
	// of new streams; each slot more costs every unauthenticated
	// connection a goroutine.
	DefaultPreAuthStreams = 8
	// DefaultPipelineDepth bounds unanswered acked publishes per stream when
	// the broker granted no publish_window.
	DefaultPipelineDepth = 256
)

// Config configures a client (Dial). The zero value of every field but
// TenantID and Token is usable.
type Config struct {
	// TLS is the base TLS configuration (RootCAs, certificates). It is
	// cloned; MinVersion is forced to TLS 1.3 and NextProtos is set from
	// OfferALPN. Nil uses the system roots.
	TLS *tls.Config
	// ServerName overrides TLS.ServerName. When both are empty the host of
	// the dialled address is used, or "localhost" (the name of a
	// development broker's certificate) when that is an IP address.
	ServerName string
	// OfferALPN offers the "felix/1" ALPN id. Off by default: an older
	// broker configures no ALPN and refuses any client that offers one.
	OfferALPN bool

	// TenantID and Token are sent in the auth frame of every stream.
	TenantID string
	Token    string
	// TokenFunc, when set, supplies the token for every auth instead of
	// Token (e.g. a refreshing JWT provider); a refused auth is then
	// retried once on a fresh stream with a fresh token. Its error fails
	// the call that needed the stream.
	TokenFunc func(ctx context.Context) (string, error)
	// Flags is the client_flags offer: the modifier bits the broker may set
	// on frames to this client. 0 means felix.DefaultClientFlags(). Only
	// offer bits this package decodes (every felix.KnownFlags bit).
	Flags felix.Flags
	// Features is the client_features offer; 0 means
	// felix.DefaultClientFeatures(). Use NoFeatures to offer none.
	Features felix.Features
	// NoFeatures offers an empty feature set (Features is ignored).
	NoFeatures bool
	// Legacy makes the client authenticate like a pre-negotiation client:
	// no client_flags and no features, answered with a plain ok.
	Legacy bool
	// ForceJSON sends publishes in their JSON forms even when the broker
	// advertised the binary bits (for debugging).
	ForceJSON bool

	// MaxFrameBytes bounds the payload of frames read after a stream
	// authenticated, and of the frames this client writes: a larger
	// request is refused before sending with a *felix.FrameLimitError (0:
	// felix.DefaultMaxFrameBytes, 16 MiB, a broker's default limit too).
	MaxFrameBytes uint32
	// PublishStreams is the number of publish streams (default 1). Publishes
	// are spread over them round-robin.
	PublishStreams int
	// CacheStreams is the number of pooled cache/counter streams (default 2).
	CacheStreams int
	// QUIC overrides the QUIC configuration. Nil uses the package defaults
	// (keep-alive DefaultKeepAlive, idle DefaultIdleTimeout, DefaultMaxStreams
	// incoming uni streams, large flow-control windows). When set it is
	// cloned, and KeepAlivePeriod and MaxIncomingUniStreams are raised to
	// the defaults if left zero.
	QUIC *quic.Config
	// IdleTimeout and KeepAlive override the QUIC idle timeout and
	// keep-alive period (0: QUIC's, else DefaultIdleTimeout and
	// DefaultKeepAlive) without building a quic.Config.
	IdleTimeout, KeepAlive time.Duration
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// Hooks observes the client for metrics and tracing (see Hooks;
	// JoinHooks attaches several sets); nil costs nothing.
	Hooks *Hooks
	// KeyLogWriter, when set, receives the TLS secrets of every connection
	// in NSS key log format (SSLKEYLOGFILE), so that captured QUIC traffic
	// can be decrypted by standard tools. It defeats the connection's
	// confidentiality: for debugging only (see docs/debugging.md).
	KeyLogWriter io.Writer
	// NoGRO reads the client's UDP socket without UDP GRO. By default (on
	// Linux, when the kernel takes the UDP_GRO socket option) one recvmsg
	// reads up to 64 KiB of datagrams the kernel coalesced, which the
	// client hands to QUIC one packet at a time (GSO on sends and ECN are
	// kept): it saves system calls and allocation on the receive path (a
	// subscriber's CPU per byte -10 to -26 %, its allocation per byte
	// about a third: BENCHMARKS.md, issue 31), at the cost of a 64 KiB
	// read buffer per client and one extra copy of every received packet. Other systems
	// read without it whatever this says.
	NoGRO bool
}

// ServerConfig configures a Listener.
type ServerConfig struct {
	// TLS carries the server certificate (required). It is cloned; the ALPN
	// policy (see RequireALPN) is applied per ClientHello.
	TLS *tls.Config
	// RequireALPN refuses clients that offer no ALPN (FELIX_TLS_REQUIRE_ALPN).
	RequireALPN bool
	// Offer is the broker's own capability set, answered in auth_ok.
	Offer felix.BrokerOffer
	// LegacyAuth makes the listener behave like a pre-negotiation broker:
	// every auth is answered with a plain ok and every client is treated as
	// an original v1 client (for testing clients' fallbacks).
	LegacyAuth bool
	// Authenticate checks every auth frame. Nil accepts every token.
	Authenticate Authenticator
	// AuthTimeout closes a connection with CloseAuthTimeout when no stream
	// authenticated within it. 0 means DefaultAuthTimeout; negative disables.
	AuthTimeout time.Duration
	// ConnAuthTimeout, when set, replaces AuthTimeout for the connection
	// as a whole (each stream still has AuthTimeout to authenticate once
	// it is opened): how long a connection may stay without an
	// authenticated stream before it is closed with CloseAuthTimeout. 0
	// keeps AuthTimeout (the spec's 10 s); negative: no bound. Raise it to
	// accept older clients that open pools of connections and
	// authenticate a stream on one only when they first use it. Such a
	// connection holds one of the MaxUnauthConns places meanwhile (the
	// oldest is closed when a new one needs the place): docs/limits.md.
	ConnAuthTimeout time.Duration
	// PreAuthMaxFrameBytes bounds frames before a stream authenticated
	// (0: felix.PreAuthMaxFrameBytes, 64 KiB).
	PreAuthMaxFrameBytes uint32
	// MaxFrameBytes bounds frames after authentication (0: 16 MiB).
	MaxFrameBytes uint32
	// PreAuthStreams is how many unauthenticated streams of one connection
	// are read at once (0: DefaultPreAuthStreams); others wait in a queue
	// bounded by MaxUnauthStreams. A stream whose auth frame has not begun
	// to arrive gives its read slot to a waiting stream after a short
	// slice, so idle streams cannot starve the others.
	PreAuthStreams int
	// MaxUnauthStreams bounds the unauthenticated streams (being read or
	// waiting) of a connection none of whose streams authenticated yet: a
	// stream opened beyond it is reset at once (ResetPreAuthBudget), never
	// queued (0: DefaultMaxUnauthStreams; see ServerLimits). Once one
	// stream authenticated, MaxStreams bounds the connection's new streams
	// as it bounds its authenticated ones.
	MaxUnauthStreams int
	// MaxStreams is the number of concurrent streams of each kind a client
	// may open on one connection (0: DefaultMaxStreams, 1024). QUIC
	// enforces it: a client cannot open more (its stream limit error).
	// Ignored for a kind whose limit QUIC sets explicitly.
	MaxStreams int64
	// MaxConnections caps the established connections of the listener,
	// charged when their QUIC handshake completes (0:
	// DefaultMaxConnections, 8192; negative: no cap). A connection arriving
	// while the cap is reached is refused during the QUIC handshake with
	// the transport error CONNECTION_REFUSED (docs/transport.md §1), not
	// queued; one whose handshake completes when the cap was reached
	// meanwhile is closed with CloseShuttingDown.
	MaxConnections int
	// MaxUnauthConns caps the connections that are unauthenticated at the
	// same time: registered by Accept (their handshake completed) and none
	// of whose streams authenticated yet (0: DefaultMaxUnauthConns, 256;
	// negative: no cap). A connection accepted while MaxUnauthConns are
	// unauthenticated is admitted, and the oldest unauthenticated one is
	// closed with CloseAuthTimeout ("too many unauthenticated
	// connections"); see server_unauth.go.
	MaxUnauthConns int
	// MaxHandshakes caps the handshakes in progress (0:
	// DefaultMaxHandshakes; negative: no cap): a new connection beyond it
	// is refused with CONNECTION_REFUSED. Handshakes never take the places
	// of connections (MaxConnections); see server_handshake.go.
	MaxHandshakes int
	// RetryHandshakes is how many handshakes may be in progress before a
	// new one must first validate its source address with a QUIC Retry (0:
	// DefaultRetryHandshakes; negative: never). An address that already
	// has MaxHandshakesPerAddr in progress is asked for one too.
	RetryHandshakes int
	// AnswerWriteTimeout bounds each answer written on a client stream,
	// waiting for room in the connection's answer budget included (0:
	// DefaultAnswerWriteTimeout; negative: none). A write still blocked
	// when it expires fails with ErrAnswerTimeout and resets the stream.
	// The bytes of the answers being written count against a budget of
	// MaxConnInFlightBytes per connection: a stream whose answer does not
	// fit waits (it reads no further request meanwhile), holding no
	// encoded copy of its answer.
	AnswerWriteTimeout time.Duration
	// MaxConnInFlightBytes bounds the request bytes one connection's
	// frames being read hold in the server (0: DefaultMaxConnInFlightBytes,
	// 16 MiB), and, as a budget of its own, its answer bytes being
	// written. It also caps MaxConnReceiveWindow.
	MaxConnInFlightBytes uint64
	// MaxConnReceiveWindow bounds the bytes one client may have sent on a
	// connection that the server has not read yet: the most its QUIC
	// connection receive window, and each stream's, grows to (0:
	// DefaultMaxConnReceiveWindow, 1 MiB; at most MaxConnInFlightBytes, at
	// least the pre-auth window). Until a stream of the connection
	// authenticated, the window stays at its initial size
	// (DefaultPreAuthConnWindow) and does not grow. Unread bytes sent as
	// tiny STREAM frames cost quic-go about 160 times their size, so this
	// bounds what one authenticated connection can pin (measured 160 MiB
	// at the default); a connection's upload is at most this
	// window per round trip (1 MiB at 50 ms: about 20 MiB/s), so raise it
	// for clients that publish fast from far away (docs/limits.md).
	MaxConnReceiveWindow uint64
	// MaxAnswerBytes bounds the answer bytes being written on all the
	// listener's connections together, on top of each connection's
	// MaxConnInFlightBytes (0: DefaultMaxAnswerBytes, 256 MiB; negative: no
	// listener-wide bound). An answer that does not fit waits as it does
	// for its connection's budget (holding no encoding), within
	// AnswerWriteTimeout: many connections that do not read their answers
	// hold at most this much together.
	MaxAnswerBytes int64
	// MaxTenantAnswerBytes bounds the answer bytes being written on the
	// streams authenticated for one tenant, on all connections together
	// (0: DefaultMaxTenantAnswerBytes, 64 MiB; negative: no per-tenant
	// bound). It is each tenant's share of MaxAnswerBytes: one tenant
	// whose clients do not read cannot take the listener's whole answer
	// budget from the others.
	MaxTenantAnswerBytes int64
	// MaxTenantConns caps the authenticated connections of one tenant:
	// those whose first authenticated stream named it (0:
	// DefaultMaxTenantConns, 32; negative: no cap). The first auth of a
	// connection beyond it is answered with an error, code limit_exceeded,
	// reason "max_tenant_conns", retry class retry_after (a connection of
	// the tenant may close meanwhile), and the connection stays
	// unauthenticated. With MaxTenantWindowGrowth it bounds what one
	// tenant's connections can make the server hold unread
	// (server_tenant.go; docs/limits.md §2.1).
	MaxTenantConns int
	// MaxTenantWindowGrowth bounds how much the QUIC receive windows of one
	// tenant's authenticated connections grow above their initial size
	// (DefaultPreAuthConnWindow), on all its connections together (0:
	// DefaultMaxTenantWindowGrowth, 4 MiB; negative: no bound). A
	// connection whose window may not grow keeps its current window: its
	// client is slowed by flow control (window ÷ RTT), not refused.
	MaxTenantWindowGrowth int64
	// MaxHandshakesPerAddr bounds the handshakes in progress from one
	// verified source address (0: DefaultMaxHandshakesPerAddr, 8;
	// negative: no bound). Clients behind one NAT share an address: a
	// busy dialer there delays or refuses its neighbours' handshakes
	// (CONNECTION_REFUSED) while it has this many in progress; raise it
	// for brokers whose clients sit behind large NATs (docs/limits.md).
	MaxHandshakesPerAddr int
	// QUIC overrides the QUIC configuration, as for Config.QUIC; the
	// incoming bidi and uni stream limits default to MaxStreams, and the
	// receive windows to the server defaults above when left zero.
	QUIC *quic.Config
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// Hooks observes the listener and its connections for metrics and
	// tracing (see Hooks; JoinHooks attaches several sets); nil costs
	// nothing.
	Hooks *Hooks
	// KeyLogWriter, when set, receives the TLS secrets of every accepted
	// connection in NSS key log format, as Config.KeyLogWriter.
	KeyLogWriter io.Writer
	// NoGRO reads the listener's UDP socket without UDP GRO, as
	// Config.NoGRO does for a client (one 64 KiB read buffer per
	// listener).
	NoGRO bool
}

// quicConfig returns the QUIC configuration for one side: a clone of base
// (or a new one) with keep-alive on. A client gets windows big enough for
// 16 MiB frames and accepts DefaultMaxEventStreams uni streams (and no
// bidi streams); a server gets the bounded windows and stream limits of
// server_limits.go, which Listen then adjusts to its ServerConfig.
// DefaultQUICConfig returns a fresh copy of the QUIC settings a client
// uses when Config.QUIC is nil (idle timeout, keep-alive, receive windows,
// stream limits): adjust it and set it as Config.QUIC to change one setting
// without losing the others.
func DefaultQUICConfig() *quic.Config { return quicConfig(nil, false) }

func quicConfig(base *quic.Config, server bool) *quic.Config {
	var q *quic.Config
	switch {
	case base != nil:
		q = base.Clone()
	case server:
		q = &quic.Config{
			MaxIdleTimeout:                 DefaultIdleTimeout,
			InitialStreamReceiveWindow:     DefaultPreAuthConnWindow,
			MaxStreamReceiveWindow:         DefaultMaxConnReceiveWindow,
			InitialConnectionReceiveWindow: DefaultPreAuthConnWindow,
			MaxConnectionReceiveWindow:     DefaultMaxConnReceiveWindow,
		}
	default:
		q = &quic.Config{
			MaxIdleTimeout:                 DefaultIdleTimeout,
			InitialStreamReceiveWindow:     1 << 20,
			MaxStreamReceiveWindow:         64 << 20,
			InitialConnectionReceiveWindow: 4 << 20,
			MaxConnectionReceiveWindow:     256 << 20,
		}
	}
	if q.KeepAlivePeriod == 0 {
		q.KeepAlivePeriod = DefaultKeepAlive
	}
	if server {
		if q.MaxIncomingUniStreams == 0 {
			q.MaxIncomingUniStreams = DefaultMaxStreams
		}
		if q.MaxIncomingStreams == 0 {
			q.MaxIncomingStreams = DefaultMaxStreams
		}
		return q
	}
	if q.MaxIncomingUniStreams == 0 {
		q.MaxIncomingUniStreams = DefaultMaxEventStreams
	}
	if q.MaxIncomingStreams == 0 {
		q.MaxIncomingStreams = -1 // a broker opens no bidi streams
	}
	return q
}

// dialQUICConfig is quicConfig for a client dial under ctx: when ctx allows
// longer than quic-go's handshake idle timeout (5 s) and base sets none, the
// handshake waits as long as ctx allows, so a caller's deadline (not a
// hidden 5 s) decides when a silent address is given up.
func dialQUICConfig(ctx context.Context, base *quic.Config) *quic.Config {
	q := quicConfig(base, false)
	if d, ok := ctx.Deadline(); ok && q.HandshakeIdleTimeout == 0 {
		if left := time.Until(d); left > defaultHandshakeIdle {
			q.HandshakeIdleTimeout = left
		}
	}
	return q
}

// defaultHandshakeIdle is quic-go's default HandshakeIdleTimeout.
const defaultHandshakeIdle = 5 * time.Second

func logger(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// clientOffer returns the felix.ClientOffer of c.
func (c *Config) clientOffer() felix.ClientOffer {
	o := felix.ClientOffer{TenantID: c.TenantID, Token: c.Token, Flags: c.Flags, Features: c.Features, Legacy: c.Legacy}
	if o.Flags == 0 {
		o.Flags = felix.DefaultClientFlags()
	}
	if c.NoFeatures {
		o.Features = 0
	} else if o.Features == 0 {
		o.Features = felix.DefaultClientFeatures()
	}
	return o
}
