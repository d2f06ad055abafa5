// Package server is the QUIC side of the Felix reference broker: it accepts
// client connections with package conn, authenticates every stream against a
// token list, dispatches requests to an engine.Engine and writes the
// answers, shaped to what each client offered.
//
// A Server serves exactly what its advertised flag and feature sets say
// (see Flags and Features) and nothing else.
package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
)

// Defaults.
const (
	DefaultAddr          = "127.0.0.1:7447"
	DefaultPublishWindow = 256
	DefaultDrainTimeout  = 5 * time.Second
	// DefaultMaxSubscriptionsPerConn bounds subscriptions plus cache
	// watches on one connection.
	DefaultMaxSubscriptionsPerConn = 4096
	// DemoTenant and DemoToken are the credentials accepted when no token
	// list is configured.
	DemoTenant = "t1"
	DemoToken  = "demo-token"
)

// Flags is the broker's own flag set (server_flags): every layout it reads
// or writes. It leaves out 0x0080 (ack owner: this broker never forwards)
// and 0x0800 (skipped_before: it never has undeliverable offsets).
const Flags = felix.FlagBinaryPublishBatch | felix.FlagBinaryEventBatch | felix.FlagBinaryEventBatchShared |
	felix.FlagBinaryPublishAcked | felix.FlagBinaryPublishAck | felix.FlagEventBatchOffsets |
	felix.FlagBinaryPublishKeyed | felix.FlagBinaryPublishIdempotent | felix.FlagBinaryPublishAckCode |
	felix.FlagBinaryPublishAckDetail | felix.FlagBinaryPublishAckOffset | felix.FlagEventBatchPublisher |
	felix.FlagEventBatchTimestamps

// Features is the feature set the broker advertises: each bit is served.
// FeaturePublishPipeline and FeatureStreamPublishWindow are dropped when
// the publish window is disabled.
const Features = felix.FeatureCacheDelete | felix.FeatureStreamShards | felix.FeatureCacheWatch |
	felix.FeatureCacheWatchRetained | felix.FeatureCounters | felix.FeatureIdempotentProducer |
	felix.FeatureCacheShards | felix.FeatureErrorCodes | felix.FeatureUnsupported |
	felix.FeatureSequenceReused | felix.FeaturePublishPipeline | felix.FeatureStreamPublishWindow |
	felix.FeatureAckOnCommit | felix.FeatureSubscriptionLagged | felix.FeatureCacheConditional |
	felix.FeatureStreamRead | felix.FeatureSubscribeQueue | felix.FeatureInspect | GroupFeatures | CommitFeatures

// Config configures a Server.
type Config struct {
	// Addr is the UDP address to listen on (DefaultAddr when empty).
	Addr string
	// TLS carries the server certificate; nil makes a self-signed one for
	// "localhost" (see Server.CertificatePEM).
	TLS *tls.Config
	// Tokens maps a token to its identity; nil accepts DemoToken for
	// DemoTenant only.
	Tokens map[string]Identity
	// Engine configures the broker core.
	Engine engine.Config
	// PublishWindow is the publish window granted to pipelining clients
	// (0 = DefaultPublishWindow); NoPipeline disables the grant.
	PublishWindow uint32
	NoPipeline    bool
	// MaxSubscriptionsPerConn bounds the subscriptions and cache watches
	// open on one connection (0 = DefaultMaxSubscriptionsPerConn); beyond
	// it subscribe and cache_watch are refused with limit_exceeded.
	MaxSubscriptionsPerConn int
	// MaxTenantSubscriptionBytes bounds what one tenant's subscriptions
	// and cache watches hold on all connections together, each charged
	// SubscriptionCost plus its key or prefix (0 =
	// DefaultMaxTenantSubscriptionBytes; negative: no bound); beyond it
	// subscribe and cache_watch are refused with limit_exceeded.
	MaxTenantSubscriptionBytes int64
	// MaxSubscriptionBytes bounds the same on the whole broker (0 =
	// DefaultMaxSubscriptionBytes; negative: no bound).
	MaxSubscriptionBytes int64
	// TenantDeliveryWorkers bounds the goroutines that write one tenant's
	// subscriptions and watches to their event streams (0 =
	// DefaultTenantDeliveryWorkers): a subscription with nothing to
	// deliver holds none, and a client that stops reading holds at most
	// its tenant's workers, each until EventWriteTimeout.
	TenantDeliveryWorkers int
	// DeliveryWorkers bounds the same broker-wide (0 =
	// DefaultDeliveryWorkers; at least TenantDeliveryWorkers). A tenant
	// with deliveries ready and no worker while all run gets the next
	// worker that finishes a turn.
	DeliveryWorkers int
	// MaxFrameBytes bounds frames after authentication (0 = 16 MiB).
	MaxFrameBytes uint32
	// AuthLimits throttles failed authentications per source address,
	// per connection and broker-wide; valid tokens are never throttled
	// (zero fields take the defaults).
	AuthLimits AuthLimits
	// AuthTimeout is passed to conn (0 = its default, negative disables).
	AuthTimeout time.Duration
	// EventWriteTimeout bounds one write to an event stream whose client
	// stopped reading (0 = DefaultEventWriteTimeout); the stream is then
	// reset.
	EventWriteTimeout time.Duration
	// DrainTimeout bounds graceful shutdown (0 = DefaultDrainTimeout).
	DrainTimeout time.Duration
	// Logger receives the broker's logs (nil discards them).
	Logger *slog.Logger
	// ConnLogger receives conn's debug logs (nil discards them).
	ConnLogger *slog.Logger
	// ConnLimits, when set, adjusts the conn server limits (MaxConnections,
	// MaxStreams, MaxUnauthStreams, MaxConnInFlightBytes, ...; zero fields
	// keep conn's defaults) before the listener starts.
	ConnLimits func(*conn.ServerConfig)
	// Hooks observes the listener (conn.ServerConfig.Hooks), e.g. the
	// Prometheus adapter of examples/metrics.
	Hooks *conn.Hooks
	// KeyLogWriter receives the TLS secrets of every connection in NSS key
	// log format (conn.ServerConfig.KeyLogWriter): for debugging only.
	KeyLogWriter io.Writer
	// Metrics, when set, is served at /metrics beside /stats by ServeStats
	// (e.g. a promhttp handler).
	Metrics http.Handler

	// SharedEngine, when set, is used instead of a new engine built from
	// Engine: several servers (the nodes of a cluster) then serve one log.
	// The server never closes a shared engine; Shutdown ends only the
	// subscriptions and watches it serves.
	SharedEngine *engine.Engine
	// Router makes the server one node of a cluster (see Router); it
	// then also advertises ClusterFlags and ClusterFeatures.
	Router Router
	// Intercept, when set, sees every request read on an authenticated
	// stream before it is served, and may answer it instead
	// (see Interception): a test's way to script a broker's answers.
	Intercept func(Intercepted) *Interception
}

// Server is a running broker. Create it with Listen, run Serve, stop it
// with Shutdown.
type Server struct {
	cfg     Config
	ln      *conn.Listener
	eng     *engine.Engine
	log     *slog.Logger
	certPEM []byte
	pool    *x509.CertPool
	offer   felix.BrokerOffer

	ctx      context.Context // cancelled at the end of Shutdown
	cancel   context.CancelFunc
	ending   context.Context // cancelled when Shutdown ends subscriptions
	endSubs  context.CancelFunc
	draining atomic.Bool
	inflight atomic.Int64 // requests being answered
	pumps    atomic.Int64 // subscriptions and watches delivering (feeds)
	// deliv runs the feeds on bounded workers (delivery.go).
	deliv deliverySched
	// subBudget is what subscriptions and watches hold per tenant and in
	// all (sub_budget.go).
	subBudget subBudget
	wg        sync.WaitGroup // connection, stream and delivery goroutines, and live feeds
	served    chan struct{}
	stopOnce  sync.Once

	auth    *throttle
	tokens  tokenIndex
	authLog logLimiter
	subReg  subRegistry // subscriptions served, for subscriptions_list

	st stats
}

type stats struct {
	conns, streams, requests, badFrames      atomic.Uint64
	authFailures, authThrottled, authDelayed atomic.Uint64
	writeTimeouts, drainedSubs, subRefused   atomic.Uint64
	openConns                                atomic.Int64
}

// Listen creates the engine and starts listening; call Serve to accept
// clients.
func Listen(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.PublishWindow == 0 {
		cfg.PublishWindow = DefaultPublishWindow
	}
	if cfg.MaxSubscriptionsPerConn <= 0 {
		cfg.MaxSubscriptionsPerConn = DefaultMaxSubscriptionsPerConn
	}
	if cfg.MaxTenantSubscriptionBytes == 0 {
		cfg.MaxTenantSubscriptionBytes = DefaultMaxTenantSubscriptionBytes
	}
	if cfg.MaxSubscriptionBytes == 0 {
		cfg.MaxSubscriptionBytes = DefaultMaxSubscriptionBytes
	}
	if cfg.TenantDeliveryWorkers <= 0 {
		cfg.TenantDeliveryWorkers = DefaultTenantDeliveryWorkers
	}
	if cfg.DeliveryWorkers <= 0 {
		cfg.DeliveryWorkers = DefaultDeliveryWorkers
	}
	cfg.DeliveryWorkers = max(cfg.DeliveryWorkers, cfg.TenantDeliveryWorkers)
	if cfg.EventWriteTimeout <= 0 {
		cfg.EventWriteTimeout = DefaultEventWriteTimeout
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.Tokens == nil {
		cfg.Tokens = map[string]Identity{DemoToken: {Tenant: DemoTenant, Principal: DemoTenant}}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log, served: make(chan struct{}), auth: newThrottle(cfg.AuthLimits),
		tokens: indexTokens(cfg.Tokens)}
	s.subBudget.tenantMax, s.subBudget.totalMax = cfg.MaxTenantSubscriptionBytes, cfg.MaxSubscriptionBytes
	s.deliv = deliverySched{s: s, tenantMax: cfg.TenantDeliveryWorkers, totalMax: cfg.DeliveryWorkers}
	tc := cfg.TLS
	if tc == nil {
		var err error
		tc, s.pool, err = conn.SelfSigned() // a leaf for localhost, 127.0.0.1, ::1
		if err != nil {
			return nil, fmt.Errorf("self-signed certificate: %w", err)
		}
		leaf := tc.Certificates[0].Leaf
		s.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw})
	} else if len(tc.Certificates) > 0 && len(tc.Certificates[0].Certificate) > 0 {
		s.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tc.Certificates[0].Certificate[0]})
		s.pool = x509.NewCertPool()
		s.pool.AppendCertsFromPEM(s.certPEM)
	}
	window := cfg.PublishWindow
	if cfg.NoPipeline {
		window = 0
	}
	feats, flags := Features, Flags
	if window == 0 {
		feats &^= felix.FeaturePublishPipeline | felix.FeatureStreamPublishWindow
	}
	if cfg.Router != nil {
		feats, flags = feats|ClusterFeatures, flags|ClusterFlags
	}
	s.offer = felix.BrokerOffer{Flags: flags, Features: feats, PublishWindow: window}
	if cfg.Engine.MaxFrameBytes == 0 {
		cfg.Engine.MaxFrameBytes = cfg.MaxFrameBytes
	}
	if cfg.Engine.MaxFrameBytes == 0 {
		cfg.Engine.MaxFrameBytes = felix.DefaultMaxFrameBytes
	}
	s.eng = cfg.SharedEngine
	if s.eng == nil {
		s.eng = engine.New(cfg.Engine)
	}
	scfg := &conn.ServerConfig{
		TLS:           tc,
		Offer:         s.offer,
		Authenticate:  s.authenticate,
		AuthTimeout:   cfg.AuthTimeout,
		MaxFrameBytes: cfg.MaxFrameBytes,
		Logger:        cfg.ConnLogger,
		Hooks:         cfg.Hooks,
		KeyLogWriter:  cfg.KeyLogWriter,
	}
	if cfg.ConnLimits != nil {
		cfg.ConnLimits(scfg)
	}
	ln, err := conn.Listen(cfg.Addr, scfg)
	if err != nil {
		if cfg.SharedEngine == nil {
			s.eng.Close()
		}
		return nil, err
	}
	s.ln = ln
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ending, s.endSubs = context.WithCancel(context.Background())
	log.Info("broker listening", "addr", ln.Addr().String(), "flags", flags.SetString(), "features", feats.String(),
		"publish_window", window)
	return s, nil
}

// ConnStats returns the listener's connection figures and refusals
// (connections, refused connections and streams, oversize frames).
func (s *Server) ConnStats() conn.ListenerStats { return s.ln.Stats() }

// Addr returns the UDP address the broker listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Engine returns the broker core (for in-process inspection).
func (s *Server) Engine() *engine.Engine { return s.eng }

// Offer returns what the broker answers in auth_ok.
func (s *Server) Offer() felix.BrokerOffer { return s.offer }

// CertificatePEM returns the server certificate in PEM form, for clients
// to trust.
func (s *Server) CertificatePEM() []byte { return s.certPEM }

// CertPool returns a pool holding the server certificate.
func (s *Server) CertPool() *x509.CertPool { return s.pool }

// WriteCertificate writes CertificatePEM to path. The file appears whole
// (it is written beside path and renamed), so a client polling for it never
// reads half a certificate.
func (s *Server) WriteCertificate(path string) error {
	if len(s.certPEM) == 0 {
		return errors.New("no certificate")
	}
	return WriteFileAtomic(path, s.certPEM)
}

// WriteFileAtomic writes data to a temporary file in path's directory and
// renames it to path, so that readers see either no file or all of it. The
// file is world-readable (mode 0644): for certificates and addresses, not
// secrets (WriteSecretFileAtomic).
func WriteFileAtomic(path string, data []byte) error { return writeFileAtomic(path, data, 0o644) }

// WriteSecretFileAtomic is WriteFileAtomic for a file holding credentials:
// only its owner may read it (mode 0600), from the moment it appears.
func WriteSecretFileAtomic(path string, data []byte) error {
	return writeFileAtomic(path, data, 0o600)
}

func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(f.Name(), perm)); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// Serve accepts connections until Shutdown (it then returns nil) or a
// listener failure.
func (s *Server) Serve() error {
	defer close(s.served)
	for {
		sc, err := s.ln.Accept(s.ctx)
		if err != nil {
			if s.draining.Load() || s.ctx.Err() != nil || errors.Is(err, conn.ErrClosed) {
				return nil
			}
			return err
		}
		s.st.conns.Add(1)
		s.log.Debug("connection", "remote", sc.RemoteAddr().String(), "alpn", sc.NegotiatedALPN())
		s.wg.Add(1)
		go s.serveConn(sc)
	}
}

func (s *Server) serveConn(sc *conn.ServerConn) {
	defer s.wg.Done()
	s.st.openConns.Add(1)
	defer s.st.openConns.Add(-1)
	subs := new(atomic.Int64) // subscriptions and watches open on sc
	for {
		st, err := sc.AcceptStream(s.ctx)
		if err != nil {
			return
		}
		if s.draining.Load() {
			st.Abort()
			continue
		}
		s.st.streams.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			h := &handler{s: s, st: st, peer: st.Peer(), subs: subs}
			if id, ok := st.Identity().(Identity); ok {
				h.id = id
			}
			h.serve()
		}()
	}
}

// Close is Shutdown with a background context.
func (s *Server) Close() error { return s.Shutdown(context.Background()) }

// Stats is a snapshot of the server's counters with the engine's.
type Stats struct {
	Connections, Streams, Requests, BadFrames uint64
	// AuthFailures counts credentials checked and refused; AuthThrottled
	// auths answered auth throttled (a failure over a budget, and the
	// auths of connections it barred, refused unchecked); AuthDelayed
	// failures whose answer the throttle held back.
	AuthFailures, AuthThrottled, AuthDelayed uint64
	// EventWriteTimeouts counts event streams reset because one write
	// outlasted EventWriteTimeout.
	EventWriteTimeouts uint64
	// DrainedSubscriptions counts subscriptions a shutdown ended with
	// records undelivered (with a terminal frame, never a clean end).
	DrainedSubscriptions uint64
	// SubscriptionsRefused counts subscribe and cache_watch requests
	// refused by the tenant's or the broker's subscription budget.
	SubscriptionsRefused uint64
	Engine               engine.Stats
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	return Stats{Connections: s.st.conns.Load(), Streams: s.st.streams.Load(), Requests: s.st.requests.Load(),
		BadFrames: s.st.badFrames.Load(), AuthFailures: s.st.authFailures.Load(),
		AuthThrottled: s.st.authThrottled.Load(), AuthDelayed: s.st.authDelayed.Load(),
		EventWriteTimeouts: s.st.writeTimeouts.Load(), DrainedSubscriptions: s.st.drainedSubs.Load(),
		SubscriptionsRefused: s.st.subRefused.Load(), Engine: s.eng.Stats()}
}
