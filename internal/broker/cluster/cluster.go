// Package cluster runs a reference Felix cluster in one process: N broker
// nodes, each with its own QUIC listener on loopback, serving one shared
// engine (the shared log), with a cluster map that gives every stream
// shard and cache exactly one owner.
//
// A node that does not own a shard redirects subscribes, stream reads and
// cache watches (not_leader naming the owner), forwards publishes (acked
// with the owner section, flag 0x0080, to clients that offered it) and
// refuses idempotent publishes with publish_refused not_leader. Killing a
// node moves its shards to survivors; a planned move (Fence) refuses the
// shard with shard_unavailable (reason "moving", retryable) until it cuts
// over, and then ends the subscriptions served by the old owner with
// shard_moved. A quorum stream's writes need a majority of its replicas
// (every node); while its leader is partitioned they fail with
// quorum_timeout (retry class outcome_unknown) after Config.QuorumTimeout.
// A link interposer (package interposer) sits in front of one node, and a
// control endpoint (ServeControl) drives every fault over HTTP.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/interposer"
	"github.com/flxproto/felix/internal/broker/server"
)

// Defaults used when a Config field is zero.
const (
	DefaultNodes  = 3
	DefaultTenant = server.DemoTenant
	DefaultToken  = server.DemoToken
	// DefaultUnauthorizedToken is the fixture's unauthorized_token: it
	// authenticates for DefaultTenant and may do nothing else.
	DefaultUnauthorizedToken = "no-permission-token"
	// InspectToken authenticates for the cluster's tenant (Config.Tenant) with
	// exactly node.view:cluster:* (server.PermNodeView) and no data
	// permission: the operator token of shard_inspect and
	// subscriptions_list. Config.Tokens may override its entry.
	InspectToken         = "node-view-token"
	DefaultNamespace     = "conformance"
	DefaultQuorumTimeout = 500 * time.Millisecond
	DefaultFenceHold     = time.Second
	// DefaultDurableShards is the shard count of the fixture's durable
	// stream.
	DefaultDurableShards = 4
	// TrimmedHead is the earliest retained offset of shard 0 of the
	// fixture's durable stream: offsets below it were trimmed at start.
	TrimmedHead = 2
)

// Stream and cache names of the fixture (in Config.Namespace).
const (
	DurableStream    = "durable"
	MovableStream    = "movable"
	QuorumStream     = "quorum"
	LinkStream       = "link"
	MissingStream    = "missing"
	Cache            = "cache"
	SingleShardCache = "cache-single"
)

// Config configures a cluster. The zero value is usable.
type Config struct {
	// Nodes is the number of broker nodes (0 = DefaultNodes).
	Nodes int
	// Host is the loopback host the nodes listen on (default 127.0.0.1).
	Host string
	// Tenant, Namespace and Token are the fixture's credentials and
	// namespace (defaults DefaultTenant, DefaultNamespace, and the token
	// chosen as Tokens says).
	Tenant, Namespace, Token string
	// Tokens, when non-nil, are the operator's tokens: every node accepts
	// them and, besides them, only the fixture's Token and
	// UnauthorizedToken, which are then never built in. Each of the two,
	// when empty, is taken from Tokens (the first in byte order of the
	// entries for Tenant with every data permission and no grant, resp.
	// with none) or else generated at random for this run; the fixture
	// description is then the only place that names it. InspectToken is
	// not accepted: grant node.view in Tokens instead.
	//
	// With Tokens nil, the built-in tokens authenticate: DefaultToken,
	// DefaultUnauthorizedToken and InspectToken (for in-process tests).
	Tokens map[string]server.Identity
	// UnauthorizedToken authenticates for Tenant but holds no permission
	// (publish, subscribe and cache requests are refused with forbidden);
	// it is the fixture's unauthorized_token (default: as Tokens says).
	// When Tokens holds it, that entry is used as given.
	UnauthorizedToken string
	// Engine configures the shared engine. Streams and caches are created
	// on first use as DefaultStream unless NoAutoCreateStreams and
	// NoAutoCreateCaches say otherwise, as a standalone broker's; the
	// fixture's missing stream is never created (it is added to
	// MissingStreams). Declare streams and caches with
	// Cluster.CreateStream and Cluster.CreateCache.
	Engine engine.Config
	// QuorumTimeout is how long a quorum write waits for a majority
	// (0 = DefaultQuorumTimeout).
	QuorumTimeout time.Duration
	// FenceHold is how long Fence holds a shard when given no hold
	// (0 = DefaultFenceHold).
	FenceHold time.Duration
	// LinkNode is the node behind the link interposer (default the last).
	LinkNode *int
	// Dir receives the CA file (default a fresh temporary directory,
	// removed by Close).
	Dir string
	// Logger receives the cluster's logs (nil discards them).
	Logger *slog.Logger
	// KeyLogWriter receives the TLS secrets of every client connection of
	// every node (server.Config.KeyLogWriter): for debugging only.
	KeyLogWriter io.Writer
	// Hooks, when set, returns the conn hooks of node i, whose node id is
	// id (server.Config.Hooks): for example a metrics collector labelled
	// by node. It is called once per node by Start; a restarted node keeps
	// its hooks, so its counters run on.
	Hooks func(i int, id string) *conn.Hooks
	// NoFixture leaves out the fixture's streams and caches (durable,
	// movable, quorum, link, the missing stream and the two caches): a
	// cluster for an application's tests (package felixtest) declares its
	// own.
	NoFixture bool
	// Interpose puts every node behind an interposer of its own and makes
	// the node advertise the interposer's address (Addr, topology, owner
	// hints), so that every client packet crosses it: CutClient,
	// StallClient and ResetClient then act on any node.
	Interpose bool
	// Intercept, when set, is node i's server.Config.Intercept: it sees
	// every request the node reads and may answer it instead.
	Intercept func(i int, in server.Intercepted) *server.Interception
}

// Cluster is a running cluster. Create it with Start, stop it with Close.
type Cluster struct {
	cfg      Config
	eng      *engine.Engine
	tls      *tls.Config
	certPEM  []byte
	caFile   string
	tmpDir   string
	log      *slog.Logger
	link     *interposer.Relay
	linkN    int
	tokens   map[string]server.Identity // what every node accepts
	ctlToken string                     // the control endpoint's bearer token

	mu       sync.Mutex
	nodes    []*node
	shards   map[shardKey]*assignment
	homes    map[shardKey]int // pinned placements
	decls    []shardKey       // declared shards (CreateStream, CreateCache), listed by State
	healed   chan struct{}    // closed by Heal; replaced by Partition
	parted   map[int]bool     // nodes cut off from their replicas
	cuts     map[[2]int]bool  // links cut between two nodes (lower index first)
	timers   map[*time.Timer]struct{}
	closed   bool
	ctrl     *control
	ctrlURL  string
	closeErr error
}

type node struct {
	id    string
	addr  string            // where the server listens
	relay *interposer.Relay // Config.Interpose: in front of the node
	hooks *conn.Hooks
	srv   *server.Server
	done  chan error
	alive bool
}

// Start starts a cluster and returns once every node listens.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = DefaultNodes
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Tenant == "" {
		cfg.Tenant = DefaultTenant
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if err := cfg.chooseTokens(); err != nil {
		return nil, err
	}
	if cfg.QuorumTimeout <= 0 {
		cfg.QuorumTimeout = DefaultQuorumTimeout
	}
	if cfg.FenceHold <= 0 {
		cfg.FenceHold = DefaultFenceHold
	}
	linkN := cfg.Nodes - 1
	if cfg.LinkNode != nil {
		linkN = *cfg.LinkNode
	}
	if linkN < 0 || linkN >= cfg.Nodes {
		return nil, fmt.Errorf("cluster: link node %d out of range", linkN)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ecfg := cfg.Engine
	if !cfg.NoFixture {
		ecfg.MissingStreams = append(slices.Clip(ecfg.MissingStreams),
			engine.Topic{Tenant: cfg.Tenant, Namespace: cfg.Namespace, Stream: MissingStream})
	}
	c := &Cluster{cfg: cfg, eng: engine.New(ecfg), log: log, linkN: linkN, tokens: cfg.nodeTokens(), ctlToken: rand.Text(),
		shards: make(map[shardKey]*assignment), homes: make(map[shardKey]int),
		healed: make(chan struct{}), parted: make(map[int]bool), timers: make(map[*time.Timer]struct{}),
		cuts: make(map[[2]int]bool)}
	close(c.healed)
	var err error
	if c.tls, _, err = conn.SelfSigned("localhost", cfg.Host); err != nil {
		return nil, err
	}
	c.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.tls.Certificates[0].Certificate[0]})
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "felix-cluster-"); err != nil {
			return nil, err
		}
		c.tmpDir = dir
	}
	c.caFile = filepath.Join(dir, "ca.pem")
	if err := server.WriteFileAtomic(c.caFile, c.certPEM); err != nil {
		c.Close()
		return nil, err
	}
	if !cfg.NoFixture {
		if err := c.declare(); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i := range cfg.Nodes {
		n := &node{id: "broker-" + strconv.Itoa(i), addr: net.JoinHostPort(cfg.Host, "0")}
		if cfg.Hooks != nil {
			n.hooks = cfg.Hooks(i, n.id)
		}
		c.nodes = append(c.nodes, n)
		if err := c.startNode(i); err != nil {
			c.Close()
			return nil, err
		}
		if cfg.Interpose {
			r, err := interposer.Listen(net.JoinHostPort(cfg.Host, "0"), n.addr, log.With("node", n.id))
			if err != nil {
				c.Close()
				return nil, err
			}
			c.mu.Lock()
			n.relay = r
			c.mu.Unlock()
		}
		if err := ctx.Err(); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.link, err = interposer.Listen(net.JoinHostPort(cfg.Host, "0"), c.nodes[linkN].addr, log)
	if err != nil {
		c.Close()
		return nil, err
	}
	log.Info("cluster started", "nodes", cfg.Nodes, "link", c.link.Addr().String())
	return c, nil
}

// declare creates the fixture's streams and caches, trims the durable
// stream's head and pins the single-shard streams to their nodes.
func (c *Cluster) declare() error {
	ns, tn := c.cfg.Namespace, c.cfg.Tenant
	durable := engine.Topic{Tenant: tn, Namespace: ns, Stream: DurableStream}
	for _, s := range []struct {
		name   string
		shards uint32
	}{{DurableStream, DefaultDurableShards}, {MovableStream, 1}, {QuorumStream, 1}, {LinkStream, 1}} {
		if err := c.CreateStream(engine.Topic{Tenant: tn, Namespace: ns, Stream: s.name},
			engine.StreamConfig{Durable: true, Shards: s.shards}); err != nil {
			return err
		}
	}
	for i := range TrimmedHead + 1 {
		if _, err := c.eng.Publish(engine.PublishRequest{Topic: durable, Publisher: tn,
			Payloads: [][]byte{[]byte("seed-" + strconv.Itoa(i))}}); err != nil {
			return err
		}
	}
	if err := c.eng.TrimHead(durable, 0, TrimmedHead); err != nil {
		return err
	}
	c.CreateCache(engine.CacheRef{Tenant: tn, Namespace: ns, Cache: Cache})
	c.CreateCache(engine.CacheRef{Tenant: tn, Namespace: ns, Cache: SingleShardCache})
	c.homes[streamKey(tn, ns, MovableStream, 0)] = 0
	c.homes[streamKey(tn, ns, QuorumStream, 0)] = 1 % c.cfg.Nodes
	c.homes[streamKey(tn, ns, LinkStream, 0)] = c.linkN
	return nil
}

// startNode starts node i's server (on its previous address when it had
// one) and marks it alive. Called without c.mu.
func (c *Cluster) startNode(i int) error {
	n := c.nodes[i]
	var intercept func(server.Intercepted) *server.Interception
	if f := c.cfg.Intercept; f != nil {
		intercept = func(in server.Intercepted) *server.Interception { return f(i, in) }
	}
	srv, err := server.Listen(server.Config{
		Intercept:    intercept,
		Addr:         n.addr,
		TLS:          c.tls,
		Tokens:       c.tokens,
		SharedEngine: c.eng,
		// The nodes read frames up to the shared engine's limit, as a
		// standalone broker's server and engine share one.
		MaxFrameBytes: c.cfg.Engine.MaxFrameBytes,
		Router:        &router{c: c, i: i},
		DrainTimeout:  100 * time.Millisecond,
		Logger:        c.log.With("node", n.id),
		KeyLogWriter:  c.cfg.KeyLogWriter,
		Hooks:         n.hooks,
	})
	if err != nil {
		return fmt.Errorf("cluster: node %d: %w", i, err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	c.mu.Lock()
	n.addr, n.srv, n.done, n.alive = srv.Addr().String(), srv, done, true
	c.mu.Unlock()
	return nil
}

// Nodes returns the number of nodes.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// Addr returns node i's client address (its interposer's with
// Config.Interpose).
func (c *Cluster) Addr(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].public()
}

// public is the address a node advertises.
func (n *node) public() string {
	if n.relay != nil {
		return n.relay.Addr().String()
	}
	return n.addr
}

// Relay returns the interposer in front of node i (nil without
// Config.Interpose).
func (c *Cluster) Relay(i int) *interposer.Relay {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].relay
}

// NodeID returns node i's node id.
func (c *Cluster) NodeID(i int) string { return c.nodes[i].id }

// Addrs returns every node's client address.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.public()
	}
	return out
}

// Alive reports whether node i is running.
func (c *Cluster) Alive(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].alive
}

// Engine returns the shared engine.
func (c *Cluster) Engine() *engine.Engine { return c.eng }

// Server returns node i's server (nil while it is down).
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.nodes[i].alive {
		return nil
	}
	return c.nodes[i].srv
}

// CertificatePEM returns the certificate every node presents.
func (c *Cluster) CertificatePEM() []byte { return c.certPEM }

// CAFile returns the path of the PEM file holding CertificatePEM.
func (c *Cluster) CAFile() string { return c.caFile }

// TLS returns a client TLS configuration trusting the nodes.
func (c *Cluster) TLS() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(c.tls.Certificates[0].Leaf)
	return &tls.Config{RootCAs: pool, ServerName: "localhost"}
}

// Link returns the interposer in front of the link node.
func (c *Cluster) Link() *interposer.Relay { return c.link }

// LinkNode returns the index of the node behind the interposer.
func (c *Cluster) LinkNode() int { return c.linkN }

// ErrNodeState is returned by Kill and Restart for a node already in the
// wanted state, and for an index out of range.
var ErrNodeState = errors.New("cluster: bad node state")

// Kill stops node i abruptly, as a crash would (server.Abort: its
// connections are closed, no event stream ends cleanly), and moves every
// shard it owned to a surviving node. While it goes down the shards are
// refused with shard_unavailable (owner_unavailable).
func (c *Cluster) Kill(i int) error {
	c.mu.Lock()
	if i < 0 || i >= len(c.nodes) || c.closed {
		c.mu.Unlock()
		return fmt.Errorf("%w: no node %d", ErrNodeState, i)
	}
	n := c.nodes[i]
	if !n.alive {
		c.mu.Unlock()
		return fmt.Errorf("%w: node %d is down", ErrNodeState, i)
	}
	n.alive = false
	srv, done := n.srv, n.done
	c.mu.Unlock()
	srv.Abort()
	err := <-done
	c.mu.Lock()
	for k, a := range c.shards {
		if a.owner == i {
			c.cutoverLocked(k, a, c.survivorLocked(k))
		}
	}
	c.mu.Unlock()
	c.log.Info("node killed", "node", n.id)
	return err
}

// Drain stops node i gracefully, as an operator's shutdown does: its
// shards move to surviving nodes first (the subscriptions it serves end
// with shard_moved and resume on the new owners), then the node drains
// (server.Shutdown: new requests are refused with draining, event streams
// end cleanly) and stops. It returns once the node is down. Restart
// starts it again.
func (c *Cluster) Drain(i int) error {
	c.mu.Lock()
	if i < 0 || i >= len(c.nodes) || c.closed {
		c.mu.Unlock()
		return fmt.Errorf("%w: no node %d", ErrNodeState, i)
	}
	n := c.nodes[i]
	if !n.alive {
		c.mu.Unlock()
		return fmt.Errorf("%w: node %d is down", ErrNodeState, i)
	}
	n.alive = false
	for k, a := range c.shards {
		if a.owner == i {
			c.cutoverLocked(k, a, c.survivorLocked(k))
		}
	}
	srv, done := n.srv, n.done
	c.mu.Unlock()
	err := errors.Join(srv.Close(), <-done)
	c.log.Info("node drained", "node", n.id)
	return err
}

// Restart starts a killed node again on its address. Shards pinned to it
// (the link stream behind the interposer, ...) move back to it.
func (c *Cluster) Restart(i int) error {
	c.mu.Lock()
	if i < 0 || i >= len(c.nodes) || c.closed {
		c.mu.Unlock()
		return fmt.Errorf("%w: no node %d", ErrNodeState, i)
	}
	if c.nodes[i].alive {
		c.mu.Unlock()
		return fmt.Errorf("%w: node %d is running", ErrNodeState, i)
	}
	c.mu.Unlock()
	if err := c.startNode(i); err != nil {
		return err
	}
	c.mu.Lock()
	for k, a := range c.shards {
		if h, ok := c.homes[k]; ok && h == i && a.owner != i && a.fence == nil {
			c.cutoverLocked(k, a, i)
		}
	}
	c.mu.Unlock()
	c.log.Info("node restarted", "node", c.nodes[i].id)
	return nil
}

// Close stops the control endpoint, the interposer and every node, and
// removes the temporary directory. It is idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.closeErr
	}
	c.closed = true
	for t := range c.timers {
		t.Stop()
	}
	ctrl := c.ctrl
	var live []*node
	for _, n := range c.nodes {
		if n.alive {
			n.alive = false
			live = append(live, n)
		}
	}
	select {
	case <-c.healed:
	default:
		close(c.healed)
	}
	c.mu.Unlock()
	var errs []error
	if ctrl != nil {
		errs = append(errs, ctrl.close())
	}
	if c.link != nil {
		errs = append(errs, c.link.Close())
	}
	for _, n := range c.nodes {
		if n.relay != nil {
			errs = append(errs, n.relay.Close())
		}
	}
	var wg sync.WaitGroup
	nodeErrs := make([]error, 2*len(live))
	for j, n := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nodeErrs[2*j] = n.srv.Close()
			nodeErrs[2*j+1] = <-n.done
		}()
	}
	wg.Wait()
	errs = append(errs, nodeErrs...)
	c.eng.Close()
	if c.tmpDir != "" {
		errs = append(errs, os.RemoveAll(c.tmpDir))
	}
	c.closeErr = errors.Join(errs...)
	return c.closeErr
}

// endpoint is node i's broker endpoint.
func (c *Cluster) endpointLocked(i int) felix.BrokerEndpoint {
	return felix.BrokerEndpoint{NodeID: c.nodes[i].id, Addr: c.nodes[i].public()}
}
