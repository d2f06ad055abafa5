// Package felixtest runs a Felix broker, or a cluster of broker nodes, in
// the test process, for the tests of applications that use package
// client: the way net/http/httptest runs an HTTP server.
//
// NewBroker and NewCluster start the nodes on loopback with a fresh
// self-signed certificate, a tenant and a random token, and stop them when
// the test ends. ClientConfig returns a client.Config that trusts them:
//
//	cl := felixtest.NewCluster(t, 3)
//	c, err := client.Dial(ctx, cl.ClientConfig())
//
// The nodes are the module's reference broker: every request is served as
// a production broker serves it, records live in memory only. Options
// declare streams and caches (by default both are created on first use),
// shard counts and routing, retention and limits.
//
// The fault methods (Kill, Drain, Restart, MoveShard, CutClient,
// StallClient, ResetClient, CutNodes, Heal) return once the fault is in
// effect, so a test needs no sleep. Intercept sees every request a node
// receives and may answer it with a chosen error; Stats and Appended are
// counters a test can assert on.
//
// See docs/testing.md for a worked example.
package felixtest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

// DefaultTenant is the tenant of a broker or cluster started without
// WithTenant.
const DefaultTenant = "test"

// Stream configures a declared stream (WithStream) or the streams created
// on first use (WithDefaultStream). The zero value is a durable stream of
// one shard with modulo routing and no retention bound.
type Stream struct {
	// Shards is the number of shards (0 means 1).
	Shards uint32
	// Routing places keyed publishes on shards (felix.RoutingModulo, the
	// zero value, or felix.RoutingJumpHash).
	Routing felix.Routing
	// Ephemeral streams keep only a replay ring of recent records and
	// deliver live records without offsets; durable ones (the default)
	// keep a log with offsets. Records are held in memory either way.
	Ephemeral bool
	// RetainRecords and RetainBytes bound each shard's log (0 = no bound;
	// the newest record is always kept).
	RetainRecords int
	RetainBytes   int64
}

func (s Stream) engine() engine.StreamConfig {
	return engine.StreamConfig{Durable: !s.Ephemeral, Shards: s.Shards, Routing: s.Routing,
		RetainRecords: s.RetainRecords, RetainBytes: s.RetainBytes}
}

// Limits are the broker limits a test may lower to exercise an
// application's handling of them. A zero field keeps the broker's default.
type Limits struct {
	// MaxFrameBytes bounds every frame after authentication.
	MaxFrameBytes uint32
	// MaxStreamsPerTenant and MaxCachesPerTenant bound the streams and
	// caches created on first use (declared ones do not count); beyond
	// them requests are refused limit_exceeded.
	MaxStreamsPerTenant, MaxCachesPerTenant int
	// MaxCacheBytes bounds one cache's live keys and values.
	MaxCacheBytes int64
	// SubscriberQueueBytes bounds the bytes queued for one subscription: a
	// consumer that falls further behind is lagged.
	SubscriberQueueBytes int64
}

// Option configures NewBroker and NewCluster.
type Option struct{ apply func(*settings) }

type settings struct {
	tenant       string
	streams      []declStream
	caches       []engine.CacheRef
	defStream    Stream
	noAutoCreate bool
	limits       Limits
	logger       *slog.Logger
}

type declStream struct {
	ns, name string
	cfg      Stream
}

// WithTenant names the tenant the broker's token acts for (default
// DefaultTenant).
func WithTenant(tenant string) Option { return Option{func(s *settings) { s.tenant = tenant }} }

// WithStream declares stream name in namespace ns (before NewCluster
// returns).
func WithStream(ns, name string, cfg Stream) Option {
	return Option{func(s *settings) { s.streams = append(s.streams, declStream{ns, name, cfg}) }}
}

// WithCache declares cache name in namespace ns (before NewCluster
// returns).
func WithCache(ns, name string) Option {
	return Option{func(s *settings) { s.caches = append(s.caches, engine.CacheRef{Namespace: ns, Cache: name}) }}
}

// WithDefaultStream configures the streams created on first use.
func WithDefaultStream(cfg Stream) Option { return Option{func(s *settings) { s.defStream = cfg }} }

// WithoutAutoCreate makes a stream or cache that was not declared (with
// WithStream or WithCache) unknown: requests for it are refused not_found.
func WithoutAutoCreate() Option { return Option{func(s *settings) { s.noAutoCreate = true }} }

// WithLimits lowers the broker's limits.
func WithLimits(l Limits) Option { return Option{func(s *settings) { s.limits = l }} }

// WithLogger sends the nodes' logs to l (by default they are discarded).
func WithLogger(l *slog.Logger) Option { return Option{func(s *settings) { s.logger = l }} }

// Cluster is a running broker or cluster of broker nodes, started by
// NewBroker or NewCluster and stopped when the test ends. Nodes are
// numbered from 0; a method given a node out of range panics, except the
// fault methods, which return an error matching ErrFault, and Running.
// Its methods are safe for concurrent use.
type Cluster struct {
	cl     *cluster.Cluster
	tenant string
	token  string

	mu    sync.Mutex              // serialises Intercept's changes
	hooks atomic.Pointer[[]*hook] // read by every request
}

// NewBroker starts a single broker node: NewCluster(t, 1, opts...).
func NewBroker(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	return NewCluster(t, 1, opts...)
}

// NewCluster starts a cluster of n broker nodes on loopback sharing one
// log: every shard and cache has one owner node; the other nodes forward
// publishes to it and redirect subscribes and reads to it (not_leader).
// It fails the test if the nodes cannot start, and registers their stop
// with t.Cleanup.
func NewCluster(t testing.TB, n int, opts ...Option) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("felixtest: a cluster needs at least one node, not %d", n)
	}
	s := settings{tenant: DefaultTenant}
	for _, o := range opts {
		if o.apply != nil {
			o.apply(&s)
		}
	}
	c := &Cluster{tenant: s.tenant, token: rand.Text()}
	cfg := cluster.Config{
		Nodes: n, Tenant: s.tenant, Namespace: "felixtest", Token: c.token,
		Tokens:    map[string]server.Identity{c.token: {Tenant: s.tenant, Principal: s.tenant}},
		NoFixture: true, Interpose: true, Logger: s.logger, Intercept: c.intercept,
		QuorumTimeout: cluster.DefaultQuorumTimeout,
	}
	cfg.Engine = engine.Config{
		DefaultStream:        s.defStream.engine(),
		NoAutoCreateStreams:  s.noAutoCreate,
		NoAutoCreateCaches:   s.noAutoCreate,
		MaxFrameBytes:        s.limits.MaxFrameBytes,
		MaxStreamsPerTenant:  s.limits.MaxStreamsPerTenant,
		MaxCachesPerTenant:   s.limits.MaxCachesPerTenant,
		MaxCacheBytes:        s.limits.MaxCacheBytes,
		SubscriberQueueBytes: s.limits.SubscriberQueueBytes,
	}
	cl, err := cluster.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("felixtest: start %d nodes: %v", n, err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Errorf("felixtest: stop: %v", err)
		}
	})
	c.cl = cl
	for _, d := range s.streams {
		if err := cl.CreateStream(engine.Topic{Tenant: s.tenant, Namespace: d.ns, Stream: d.name}, d.cfg.engine()); err != nil {
			t.Fatalf("felixtest: declare stream %s/%s: %v", d.ns, d.name, err)
		}
	}
	for _, r := range s.caches {
		r.Tenant = s.tenant
		cl.CreateCache(r)
	}
	return c
}

// TenantID returns the tenant the token acts for.
func (c *Cluster) TenantID() string { return c.tenant }

// Token returns the token that authenticates for TenantID with every
// permission (random for each broker).
func (c *Cluster) Token() string { return c.token }

// Topic names stream in namespace ns of the tenant.
func (c *Cluster) Topic(ns, stream string) felix.Topic {
	return felix.Topic{TenantID: c.tenant, Namespace: ns, Stream: stream}
}

// CacheRef names cache in namespace ns of the tenant.
func (c *Cluster) CacheRef(ns, cache string) felix.CacheRef {
	return felix.CacheRef{TenantID: c.tenant, Namespace: ns, Cache: cache}
}

// Nodes returns the number of nodes.
func (c *Cluster) Nodes() int { return c.cl.Nodes() }

// Addr returns the client address (host:port) of a node. It does not
// change when the node is restarted.
func (c *Cluster) Addr(node int) string { return c.cl.Addr(node) }

// Addrs returns every node's client address, node 0 first.
func (c *Cluster) Addrs() []string { return c.cl.Addrs() }

// NodeID returns a node's id, as topology, not_leader and the client's
// notices name it.
func (c *Cluster) NodeID(node int) string { return c.cl.NodeID(node) }

// CertificatePEM returns the certificate every node presents, PEM-encoded
// (client.Config.CAPEM).
func (c *Cluster) CertificatePEM() []byte { return c.cl.CertificatePEM() }

// TLSConfig returns a client TLS configuration that trusts the nodes
// (conn.Config.TLS).
func (c *Cluster) TLSConfig() *tls.Config { return c.cl.TLS() }

// The timings of ClientConfig.
const (
	clientIdleTimeout = 1500 * time.Millisecond
	clientKeepAlive   = 300 * time.Millisecond
	clientBackoffBase = 10 * time.Millisecond
	clientBackoffMax  = 200 * time.Millisecond
	clientDialTimeout = time.Second
)

// ClientConfig returns a client configuration for the cluster: every node
// as a seed, the tenant and token, the certificate as the only trusted
// root (CAPEM), and timings shortened for tests: a lost link is noticed
// after 1.5 s without a packet (Conn.IdleTimeout, with a 300 ms
// Conn.KeepAlive), a dial to a node that does not answer (a killed one
// the client has not seen die) is given up after 1 s (DialTimeout), and
// retries back off from 10 ms to at most 200 ms (BackoffBase,
// BackoffMax). Change any field before client.New or client.Dial.
func (c *Cluster) ClientConfig() client.Config {
	return client.Config{
		Seeds:       c.Addrs(),
		TenantID:    c.tenant,
		Token:       c.token,
		CAPEM:       c.CertificatePEM(),
		Conn:        conn.Config{IdleTimeout: clientIdleTimeout, KeepAlive: clientKeepAlive},
		BackoffBase: clientBackoffBase, BackoffMax: clientBackoffMax, DialTimeout: clientDialTimeout,
	}
}

// Stats are counters over the running nodes. Connections and Requests
// are counted by each node since it last started (a restarted node's
// count from zero).
type Stats struct {
	// Connections counts the client connections accepted, OpenConnections
	// those open now.
	Connections     uint64
	OpenConnections int64
	// Requests counts the requests read.
	Requests uint64
	// Subscriptions counts the subscriptions open now,
	// TotalSubscriptions those ever opened.
	Subscriptions, TotalSubscriptions uint64
	// PublishedRecords counts the records appended to any stream.
	PublishedRecords uint64
}

// Stats returns the cluster's counters now.
func (c *Cluster) Stats() Stats {
	var st Stats
	es := c.cl.Engine().Stats()
	st.Subscriptions, st.TotalSubscriptions, st.PublishedRecords = es.ActiveSubscriptions, es.TotalSubscriptions, es.PublishedRecords
	for i := range c.cl.Nodes() {
		if srv := c.cl.Server(i); srv != nil {
			ss := srv.Stats()
			st.Connections += ss.Connections
			st.Requests += ss.Requests
			st.OpenConnections += srv.ConnStats().Connections
		}
	}
	return st
}

// Appended returns how many records were ever appended to shard of stream
// t (its next offset; 0 for a stream or shard that does not exist).
func (c *Cluster) Appended(t felix.Topic, shard uint32) uint64 {
	_, tail, err := c.cl.Engine().Tail(engine.Topic{Tenant: t.TenantID, Namespace: t.Namespace, Stream: t.Stream}, shard)
	if err != nil {
		return 0
	}
	return tail
}

// ErrFault is wrapped by the error of a fault method that cannot act: a
// node out of range, a node already down (Kill, Drain) or running
// (Restart), a stream shard that does not exist.
var ErrFault = errors.New("felixtest: fault refused")

func faultErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrFault, err)
}

func (c *Cluster) checkNode(node int) error {
	if node < 0 || node >= c.cl.Nodes() {
		return fmt.Errorf("%w: no node %d (the cluster has %d)", ErrFault, node, c.cl.Nodes())
	}
	return nil
}
