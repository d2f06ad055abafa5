package client

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
)

// Topic names a stream.
type Topic = felix.Topic

// CacheRef names a cache.
type CacheRef = felix.CacheRef

// Client is a cluster-aware Felix client: it holds one connection per
// broker it talks to (dialled on demand, re-dialled after a loss), routes
// requests to shard owners, follows redirects, retries by retry class and
// resumes subscriptions. It is safe for concurrent use.
type Client struct {
	// calls are the typed one-answer requests (caches, counters, commits,
	// consumer groups, reads, inspection) over the client itself: the
	// generated methods of calls_gen.go hand their arguments to them, so
	// that each call is sent through Request.
	calls api.Calls

	cfg Config
	log *slog.Logger
	// notify is every observer of the client's notices joined: its own
	// counters, Config.OnNotice, Config.Logger (see emit).
	notify func(Notice)
	stats  stats

	mu      sync.Mutex
	brokers map[string]*broker
	list    []*broker         // in discovery order
	nodes   map[string]string // node id → address (topology, hints)
	home    atomic.Pointer[broker]
	owners  map[ownerKey]ownerHint
	shards  map[Topic]shardInfo

	clustered atomic.Bool // a broker advertised redirect or topology
	closed    atomic.Bool
	spawnMu   sync.Mutex      // orders spawn against Close's wait
	ctx       context.Context // cancelled by Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	subsMu    sync.Mutex
	subs      map[closer]struct{}
	// dropped maps a connection the client dropped itself to why
	// (*conn.Client → error), for its disconnect notice.
	dropped sync.Map
}

type closer interface{ Close() error }

// broker is one known broker address and its connection.
type broker struct {
	addr string

	mu   sync.Mutex
	cc   *conn.Client
	dial *dialCall // the dial in flight, nil when none
	// fails counts the failures (failed dials, lost connections) since
	// the last successful dial: a broker with fails > 0 is tried after
	// every broker without.
	fails     int
	downUntil time.Time
}

// dialCall is one dial of a broker, shared by every caller that needs
// the broker while it runs (one dial in flight per broker): each waiter
// gets its outcome, none dials again behind it.
type dialCall struct {
	done chan struct{} // closed when the dial ended
	cc   *conn.Client
	err  error
}

// ownerKey names one shard of a stream or cache.
type ownerKey struct {
	kind                    felix.ShardKind
	tenant, namespace, name string
	shard                   uint32
}

// ownerHint is what the client knows about a shard's owner.
type ownerHint struct {
	nodeID, addr string
	gen          uint64
}

type shardInfo struct {
	shards  uint32
	routing felix.Routing
	// ownersAsked: the client asked shard_owners for this view of the
	// stream (once: a shard without an owner is then found by redirect).
	ownersAsked bool
}

// New returns a client over the seeds of cfg. It dials nothing yet: the
// first call connects (use Connect to fail fast on bad seeds).
func New(cfg Config) (*Client, error) {
	if len(cfg.Seeds) == 0 {
		return nil, ErrNoBrokers
	}
	rcfg, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: rcfg, brokers: make(map[string]*broker), nodes: make(map[string]string),
		owners: make(map[ownerKey]ownerHint), shards: make(map[Topic]shardInfo), subs: make(map[closer]struct{})}
	c.calls = api.New(c)
	c.log = c.cfg.Logger
	var logged func(Notice)
	if c.log.Handler() != slog.DiscardHandler {
		logged = LogNotices(c.log)
	}
	// The counters first: an observer that reads Stats on a notice sees
	// that notice counted.
	c.notify = JoinNotices(c.stats.observe, c.cfg.OnNotice, logged)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for _, s := range cfg.Seeds {
		c.addBroker(s, "seed")
	}
	// Spread clients over the seeds.
	c.home.Store(c.list[rand.IntN(len(c.list))])
	return c, nil
}

// Dial is New followed by Connect.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.Connect(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Connect makes sure the client holds a connection to some broker,
// trying every known broker: when each one failed its dial once, it
// returns that failure (a broker that refused the connection for now,
// ErrBrokerBusy, is dialled again after a back-off within ctx and the
// retry budget) (the broker's *conn.DialError, or a *DialsError
// naming each), within about one DialTimeout per broker.
func (c *Client) Connect(ctx context.Context) error {
	return c.run(ctx, call{op: "connect", safe: true}, func(context.Context, *conn.Client, *broker) error { return nil })
}

// Brokers returns every broker address the client knows (seeds and
// discovered ones).
func (c *Client) Brokers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.list))
	for i, b := range c.list {
		out[i] = b.addr
	}
	return out
}

// Close closes every subscription, watch and connection. It drains:
// each connection's publish streams are finished and the brokers given up
// to 2 s to read what was written (fire-and-forget publishes included;
// see Flush to wait without closing). It is idempotent.
func (c *Client) Close() error {
	c.spawnMu.Lock()
	already := c.closed.Swap(true)
	c.spawnMu.Unlock()
	if already {
		return nil
	}
	c.cancel()
	c.subsMu.Lock()
	subs := make([]closer, 0, len(c.subs))
	for s := range c.subs {
		subs = append(subs, s)
	}
	c.subsMu.Unlock()
	for _, s := range subs {
		s.Close()
	}
	c.mu.Lock()
	list := append([]*broker(nil), c.list...)
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, b := range list {
		b.mu.Lock()
		cc := b.cc
		b.cc = nil
		b.mu.Unlock()
		if cc != nil {
			wg.Add(1)
			go func() { defer wg.Done(); cc.Close() }()
		}
	}
	wg.Wait()
	c.wg.Wait()
	return nil
}

func (c *Client) track(s closer) bool {
	c.subsMu.Lock()
	defer c.subsMu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.subs[s] = struct{}{}
	return true
}

func (c *Client) untrack(s closer) {
	c.subsMu.Lock()
	delete(c.subs, s)
	c.subsMu.Unlock()
}

// addBroker registers addr (idempotent) and returns its broker.
func (c *Client) addBroker(addr, how string) *broker {
	c.mu.Lock()
	b, ok := c.brokers[addr]
	if !ok {
		b = &broker{addr: addr}
		c.brokers[addr] = b
		c.list = append(c.list, b)
	}
	c.mu.Unlock()
	if !ok && how != "seed" {
		c.emit(Notice{Kind: NoticeDiscovered, Addr: addr, Detail: how})
	}
	return b
}

// connect returns a live connection to b, dialling it when needed. One
// dial per broker is in flight at a time: concurrent callers share it and
// each gets its outcome (a dead broker costs them one DialTimeout
// together, not one each in turn). The dial runs on the client's
// context, bounded by DialTimeout, so that a caller whose ctx ends first
// does not end it for the others; that caller gets an error naming the
// address and matching its ctx's error.
func (c *Client) connect(ctx context.Context, b *broker) (*conn.Client, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	started := time.Now()
	b.mu.Lock()
	if b.cc != nil {
		if b.cc.Context().Err() == nil {
			cc := b.cc
			b.mu.Unlock()
			return cc, nil
		}
		c.retire(b.cc)
		b.cc = nil
	}
	dc := b.dial
	if dc == nil {
		dc = &dialCall{done: make(chan struct{})}
		if !c.spawn(func() { c.dial(b, dc) }) {
			b.mu.Unlock()
			return nil, ErrClosed
		}
		b.dial = dc
	}
	b.mu.Unlock()
	select {
	case <-dc.done:
		return dc.cc, dc.err
	case <-ctx.Done():
		return nil, dialAbandoned(ctx, b.addr, started)
	}
}

// dial runs dc, the one dial in flight of b, and hands its outcome to
// every caller waiting for it.
func (c *Client) dial(b *broker, dc *dialCall) {
	cfg := c.cfg.Conn
	dctx, cancel := context.WithTimeout(c.ctx, c.cfg.DialTimeout)
	cc, err := conn.Dial(dctx, b.addr, &cfg)
	cancel()
	if c.closed.Load() {
		if cc != nil {
			cc.Close()
		}
		cc, err = nil, ErrClosed
	}
	var d time.Duration
	b.mu.Lock()
	b.dial = nil
	switch {
	case err == nil:
		b.cc, b.fails, b.downUntil = cc, 0, time.Time{}
	case !errors.Is(err, ErrClosed):
		b.fails++
		d = c.cfg.backoff(b.fails, 0)
		b.downUntil = time.Now().Add(d)
	}
	b.mu.Unlock()
	switch {
	case err == nil:
		c.emit(Notice{Kind: NoticeConnected, Addr: b.addr})
		c.watchConn(b, cc)
		c.afterConnect(b, cc)
	case !errors.Is(err, ErrClosed):
		c.emit(Notice{Kind: NoticeDialFailed, Addr: b.addr, Delay: d, Err: err})
	}
	dc.cc, dc.err = cc, err
	close(dc.done)
}

// dialAbandoned is the error of a caller whose ctx ended while it waited
// for a dial of addr: a cancelled ctx's own error (as everywhere), else a
// *conn.DialError naming the address and how long the caller waited, which
// also matches ctx's error (context.DeadlineExceeded).
func dialAbandoned(ctx context.Context, addr string, started time.Time) error {
	err := ctx.Err()
	if errors.Is(err, context.Canceled) {
		return err
	}
	return &conn.DialError{Addr: addr, Kind: conn.ErrNoAnswer, Waited: time.Since(started).Round(time.Millisecond), Err: err}
}

// spawn runs f on a goroutine that Close waits for; after Close it runs
// nothing and reports false.
func (c *Client) spawn(f func()) bool {
	c.spawnMu.Lock()
	defer c.spawnMu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.wg.Add(1)
	go func() { defer c.wg.Done(); f() }()
	return true
}

// retire closes a connection that is no longer used, in the background
// (at once after Close).
func (c *Client) retire(cc *conn.Client) {
	if !c.spawn(func() { cc.Close() }) {
		cc.Close()
	}
}

// watchConn reports the loss of cc and marks b as failed.
func (c *Client) watchConn(b *broker, cc *conn.Client) {
	c.spawn(func() {
		select {
		case <-cc.Context().Done():
		case <-c.ctx.Done():
			// Close ends every connection it holds (retired ones are
			// closed already): wait for cc to count its final bytes.
			<-cc.Context().Done()
			c.stats.ended(cc)
			return
		}
		c.stats.ended(cc)
		if c.closed.Load() {
			return
		}
		// A connection the client dropped itself ended because of what
		// made it drop it (a draining broker, a lost request), not
		// because of its own close.
		if why, ok := c.dropped.LoadAndDelete(cc); ok {
			c.emit(Notice{Kind: NoticeDisconnected, Addr: b.addr, Err: why.(error)})
			return
		}
		c.markFailed(b, cc)
		c.emit(Notice{Kind: NoticeDisconnected, Addr: b.addr, Err: context.Cause(cc.Context())})
	})
}

// markFailed records that b failed (its connection cc is dropped and the
// broker is avoided for a backoff) and moves the home broker elsewhere.
func (c *Client) markFailed(b *broker, cc *conn.Client) { c.markFailedBy(b, cc, nil) }

// markFailedBy is markFailed with the failure that made the client drop
// cc: the disconnect notice names it (nil: the connection's own end).
func (c *Client) markFailedBy(b *broker, cc *conn.Client, why error) {
	b.mu.Lock()
	if cc != nil && b.cc == cc {
		b.cc = nil
		if why != nil {
			c.dropped.Store(cc, why)
		}
		c.retire(cc)
	}
	b.fails++
	b.downUntil = time.Now().Add(c.cfg.backoff(b.fails, 0))
	b.mu.Unlock()
	// Its shards are moving elsewhere: an owner hint naming it would send
	// the next request to a dead broker (a dial that only fails after
	// DialTimeout).
	c.forgetOwnersAt(b.addr)
	c.moveHome(b)
}

// moveHome moves the home broker off b, when it is b and another broker
// is known.
func (c *Client) moveHome(b *broker) {
	if c.home.Load() == b {
		if nb := c.pick(map[string]bool{b.addr: true}); nb != nil {
			c.home.CompareAndSwap(b, nb)
		}
	}
}

// afterConnect learns the cluster from a new connection: listener ports
// and topology.
func (c *Client) afterConnect(b *broker, cc *conn.Client) {
	caps := cc.Capabilities()
	if caps.CanFeature(felix.FeatureRedirect) || caps.CanFeature(felix.FeatureTopology) {
		c.clustered.Store(true)
	}
	if c.cfg.NoDiscovery {
		return
	}
	if host, _, err := net.SplitHostPort(b.addr); err == nil {
		for _, p := range caps.ListenerPorts {
			c.addBroker(net.JoinHostPort(host, strconv.Itoa(int(p))), "listener_ports of "+b.addr)
		}
	}
	if !caps.CanFeature(felix.FeatureTopology) {
		return
	}
	c.spawn(func() {
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		defer cancel()
		eps, err := api.New(cc).Topology(ctx)
		if err != nil {
			c.log.Debug("felix client: topology", "addr", b.addr, "err", err)
			return
		}
		before := len(c.Brokers())
		for _, ep := range eps {
			c.learnNode(ep.NodeID, ep.Addr, "topology of "+b.addr)
		}
		// Spread load: once the cluster is known, a client that still sits
		// on its first seed moves to a random broker of the cluster.
		if before <= len(c.cfg.Seeds) && len(c.Brokers()) > before {
			c.mu.Lock()
			nb := c.list[rand.IntN(len(c.list))]
			c.mu.Unlock()
			c.home.Store(nb)
		}
	})
}

// learnNode records that node id lives at addr.
func (c *Client) learnNode(id, addr, how string) {
	if addr == "" {
		return
	}
	if id != "" {
		c.mu.Lock()
		c.nodes[id] = addr
		c.mu.Unlock()
	}
	c.addBroker(addr, how)
}

// pick chooses a broker for a request with no owner: the home broker
// unless excluded or avoided, else the next usable one; when every
// non-excluded broker is avoided, the one whose backoff ends first. Nil
// when every broker is excluded.
//
// A broker that failed since its last successful dial (a lost connection,
// a failed dial) comes after every broker that did not, even once its
// backoff ended: a dead broker costs a DialTimeout per dial, a live one a
// round trip.
func (c *Client) pick(exclude map[string]bool) *broker {
	home := c.home.Load()
	now := time.Now()
	if home != nil && !exclude[home.addr] && home.healthy(now) {
		return home
	}
	c.mu.Lock()
	list := c.list
	c.mu.Unlock()
	start := 0
	for i, b := range list {
		if b == home {
			start = i + 1
		}
	}
	var soonest, failed *broker
	var soonestAt time.Time
	for i := range list {
		b := list[(start+i)%len(list)]
		if exclude[b.addr] {
			continue
		}
		if b.healthy(now) {
			c.home.Store(b)
			return b
		}
		if failed == nil && b.usable(now) {
			failed = b
		}
		b.mu.Lock()
		at := b.downUntil
		b.mu.Unlock()
		if soonest == nil || at.Before(soonestAt) {
			soonest, soonestAt = b, at
		}
	}
	if failed != nil {
		c.home.Store(failed)
		return failed
	}
	return soonest
}

// usable reports a broker out of its backoff.
func (b *broker) usable(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.downUntil.IsZero() || !now.Before(b.downUntil)
}

// healthy reports a broker that has not failed since its last successful
// dial (or was never dialled), or one connected now.
func (b *broker) healthy(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cc != nil && b.cc.Context().Err() == nil {
		return true
	}
	return b.fails == 0 && (b.downUntil.IsZero() || !now.Before(b.downUntil))
}

// learnOwner records an owner hint unless a newer one (higher
// generation) is known. A hint with generation 0 (a standalone broker or
// an idempotent refusal, which carries none) replaces only another 0.
func (c *Client) learnOwner(k ownerKey, h ownerHint, how string) {
	if h.addr == "" && h.nodeID != "" {
		c.mu.Lock()
		h.addr = c.nodes[h.nodeID]
		c.mu.Unlock()
	}
	if h.addr == "" {
		return
	}
	c.learnNode(h.nodeID, h.addr, how)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.owners[k]; ok && old.gen > h.gen {
		return
	}
	c.owners[k] = h
}

// forgetOwner drops the owner hint of k if it still names addr.
func (c *Client) forgetOwner(k ownerKey, addr string) {
	c.mu.Lock()
	if h, ok := c.owners[k]; ok && h.addr == addr {
		delete(c.owners, k)
	}
	c.mu.Unlock()
}

// forgetOwnersAt drops every owner hint that names addr.
func (c *Client) forgetOwnersAt(addr string) {
	c.mu.Lock()
	for k, h := range c.owners {
		if h.addr == addr {
			delete(c.owners, k)
		}
	}
	c.mu.Unlock()
}

func (c *Client) ownerOf(k ownerKey) (ownerHint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.owners[k]
	return h, ok
}

// call describes one operation for the retry loop.
type call struct {
	op string
	// key routes the call to a shard owner; nil sends it to any broker.
	key *ownerKey
	// keyOf, when set, finds key once a redirect shows the call needs one
	// (a first call, before the client knew it talks to a cluster).
	keyOf func(context.Context) *ownerKey
	// safe: re-sending after an ambiguous outcome cannot apply it twice
	// (reads, idempotent producers, explicit at-least-once publishes).
	safe bool
	// pin, when set, is the only broker the call goes to (Client.At):
	// retried there, never moved to another one and never redirected (a
	// redirect is returned as it came).
	pin *broker
}

// run performs fn against the right broker: the shard owner when known,
// else the home broker. Each failure is judged by the decision table
// (decide) and acted on by one step: redirects are followed (bounded hops
// per attempt, never the same broker twice) without touching the retry
// budget; retryable failures are retried with backoff, another broker
// first when the broker failed; ambiguous outcomes of unsafe calls end as
// *AmbiguousError; everything else is returned as it came.
func (c *Client) run(ctx context.Context, cl call, fn func(context.Context, *conn.Client, *broker) error) error {
	c.stats.inFlight.Add(1)
	defer c.stats.inFlight.Add(-1)
	return c.runFrom(ctx, cl, fn, nil)
}

// outcome is one attempt's result: the broker and connection it used and
// its error (nil: success).
type outcome struct {
	b   *broker
	cc  *conn.Client
	err error
}

// runState is the retry loop's state across attempts.
type runState struct {
	cl      call
	tried   map[string]bool
	target  *broker // the next attempt's broker, when decided
	hops    int
	attempt int
	lastErr error
	// dials is the last failed dial of each broker the call tried, in
	// the order first tried.
	dials []addrErr
}

type addrErr struct {
	addr string
	err  error
}

// dialsErr is the error of a call whose every broker failed its dial:
// the broker's *conn.DialError, or a *DialsError naming each.
func (st *runState) dialsErr() error {
	if len(st.dials) == 1 {
		return st.dials[0].err
	}
	return &DialsError{Op: st.cl.op, Dials: dialErrs(st.dials)}
}

// resumes reports a call that keeps a subscription or watch going
// (Subscribe, CacheWatch and their resumes): it dials again within its
// retry budget while its brokers restart, where any other call reports
// its failed dials at once.
func (cl call) resumes() bool { return cl.op == "subscribe" || cl.op == "cache_watch" }

// everyBrokerDialled reports whether every broker the call may use (its
// pin, else every known broker) failed a dial in this call.
func (c *Client) everyBrokerDialled(st *runState) bool {
	dialled := make(map[string]bool, len(st.dials))
	for _, d := range st.dials {
		dialled[d.addr] = true
	}
	if st.cl.pin != nil {
		return dialled[st.cl.pin.addr]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.list {
		if !dialled[b.addr] {
			return false
		}
	}
	return true
}

// dialed records a failed dial of addr.
func (st *runState) dialed(addr string, err error) {
	for i := range st.dials {
		if st.dials[i].addr == addr {
			st.dials[i].err = err
			return
		}
	}
	st.dials = append(st.dials, addrErr{addr, err})
}

// runFrom is run whose first attempt already happened when first is set
// (the publish fast path hands its failure over).
func (c *Client) runFrom(ctx context.Context, cl call, fn func(context.Context, *conn.Client, *broker) error, first *outcome) error {
	if first == nil && cl.pin == nil && cl.key != nil {
		c.learnOwnersOnce(ctx, *cl.key)
	}
	st := &runState{cl: cl, tried: make(map[string]bool, 4), target: c.target(cl)}
	for {
		var o outcome
		if first != nil {
			o, first = *first, nil
		} else {
			if err := c.stopped(ctx, st); err != nil {
				return err
			}
			o = c.attempt(ctx, st, fn)
		}
		if o.err == nil {
			return nil
		}
		v := decide(o.err, cl.safe)
		st.lastErr = bare(o.err)
		if _, ok := o.err.(*notSent); ok {
			st.dialed(o.b.addr, st.lastErr)
		}
		switch v.act {
		case actReturn:
			return st.lastErr
		case actAmbiguous:
			var te *conn.TransportError
			if errors.As(o.err, &te) {
				c.markFailedBy(o.b, o.cc, o.err)
			}
			c.stats.ambiguous.Add(1)
			if cl.op == "publish" {
				c.stats.pubAmbiguous.Add(1)
			}
			return &AmbiguousError{Op: cl.op, Addr: o.b.addr, Err: st.lastErr}
		case actRedirect:
			if cl.pin != nil {
				return st.lastErr
			}
			if c.redirect(ctx, st, o, v) {
				continue
			}
		case actRetry:
			if v.hint != nil && st.cl.key != nil {
				c.learnOwner(*st.cl.key, *v.hint, "ack owner from "+o.b.addr)
			}
		case actFailover:
			c.failover(st, o)
			if _, ok := o.err.(*notSent); ok && ctx.Err() == nil && !cl.resumes() && !v.busy && c.everyBrokerDialled(st) {
				// Every broker this call may use failed a dial of its own
				// in this call: report it (within one DialTimeout of
				// the first) instead of dialling dead brokers again. A
				// broker that refused for now (busy) is there: it is
				// dialled again after the back-off.
				return st.dialsErr()
			}
		}
		if !c.pause(ctx, st, o.b, v) {
			return st.lastErr
		}
	}
}

// target is the broker a call starts on: its pin, or the shard owner when
// a hint names a usable one, else none (the loop picks the home broker).
func (c *Client) target(cl call) *broker {
	if cl.pin != nil {
		return cl.pin
	}
	if cl.key == nil {
		return nil
	}
	h, ok := c.ownerOf(*cl.key)
	if !ok {
		return nil
	}
	// A hint naming a broker that failed since its last dial is not
	// followed: the shard has likely moved (the broker reached forwards or
	// redirects).
	if b := c.addBroker(h.addr, "owner hint"); b.healthy(time.Now()) {
		return b
	}
	return nil
}

// stopped returns the error that ends the call before another attempt:
// the client closed, or ctx ended. An ended ctx's error says what the
// call was waiting out: the last failure (a dial's *conn.DialError names
// the address, and matches ctx's error when ctx ended the dial), or every
// broker whose dial failed when the call tried more than one
// (*DialsError). It always matches ctx's error.
func (c *Client) stopped(ctx context.Context, st *runState) error {
	if c.closed.Load() {
		return ErrClosed
	}
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if len(st.dials) > 1 && errors.Is(err, context.DeadlineExceeded) {
		return &DialsError{Op: st.cl.op, Ctx: err, Dials: dialErrs(st.dials)}
	}
	switch {
	case st.lastErr == nil:
		return err
	case errors.Is(st.lastErr, err):
		return st.lastErr // it says both: one wording
	}
	return errors.Join(err, st.lastErr)
}

func dialErrs(ds []addrErr) []error {
	out := make([]error, len(ds))
	for i, d := range ds {
		out[i] = d.err
	}
	return out
}

// attempt sends the call once, to the decided target or else a broker not
// yet tried in this round. A failed dial comes back as *notSent.
func (c *Client) attempt(ctx context.Context, st *runState, fn func(context.Context, *conn.Client, *broker) error) outcome {
	b := st.target
	st.target = nil
	if b == nil {
		b = st.cl.pin // a pinned call after a failure
	}
	if b == nil {
		if b = c.pick(st.tried); b == nil {
			// Every broker was tried in this round.
			clear(st.tried)
			b = c.pick(st.tried)
		}
	}
	cc, err := c.connect(ctx, b)
	if err != nil {
		return outcome{b: b, err: &notSent{err}}
	}
	return outcome{b: b, cc: cc, err: fn(ctx, cc, b)}
}

// redirect follows a redirect to the owner it names or, when it names
// none (or one already tried), to the owner the brokers report for the
// shard; true when the next attempt goes there (no retry spent).
func (c *Client) redirect(ctx context.Context, st *runState, o outcome, v verdict) bool {
	if st.cl.key == nil && st.cl.keyOf != nil {
		st.cl.key = st.cl.keyOf(ctx)
	}
	cl := st.cl
	st.tried[o.b.addr] = true
	var nb *broker
	if v.hint != nil && cl.key != nil {
		c.learnOwner(*cl.key, *v.hint, "redirect from "+o.b.addr)
	}
	if v.hint != nil {
		addr := v.hint.addr
		if addr == "" && v.hint.nodeID != "" {
			c.mu.Lock()
			addr = c.nodes[v.hint.nodeID]
			c.mu.Unlock()
		}
		if addr != "" && !st.tried[addr] {
			nb = c.addBroker(addr, "redirect from "+o.b.addr)
		}
	}
	if nb == nil && cl.key != nil {
		c.forgetOwner(*cl.key, o.b.addr)
		nb = c.ownerFromBrokers(ctx, o.cc, *cl.key, st.tried)
	}
	st.hops++
	if nb != nil && st.hops <= c.cfg.MaxRedirects {
		ev := Notice{Kind: NoticeRedirect, Op: cl.op, Addr: o.b.addr, Target: nb.addr, Attempt: st.hops, Err: o.err}
		if cl.key != nil {
			ev.Stream, ev.Shard = cl.key.name, cl.key.shard
		}
		c.emit(ev)
		st.target = nb
		return true
	}
	// No usable owner or too many hops: a stale view somewhere; wait and
	// start over.
	st.hops = 0
	clear(st.tried)
	return false
}

// failover takes the broker out of the call's way: the next attempt goes
// to another one (pick makes that one the home broker, so that the next
// call does not dial a dead broker again). After a lost connection the
// broker is marked failed; after a failed dial connect already put it in
// backoff.
func (c *Client) failover(st *runState, o outcome) {
	st.tried[o.b.addr] = true
	if st.cl.key != nil {
		c.forgetOwner(*st.cl.key, o.b.addr)
	}
	if o.cc != nil {
		c.markFailedBy(o.b, o.cc, o.err)
	}
}

// pause spends one retry of the budget and waits the backoff (at least
// the broker's retry_after); false when the budget is spent. A ctx or
// Close ending the wait is reported by the loop's next stopped check.
func (c *Client) pause(ctx context.Context, st *runState, b *broker, v verdict) bool {
	st.attempt++
	budget := c.cfg.MaxAttempts
	if v.budget > 0 {
		budget = min(budget, v.budget)
	}
	if st.attempt > budget {
		return false
	}
	d := c.cfg.backoff(st.attempt, v.retryAfter)
	c.emit(Notice{Kind: NoticeRetry, Op: st.cl.op, Addr: b.addr, Attempt: st.attempt, Delay: d, Err: st.lastErr})
	sleep(ctx, c.ctx, d)
	return true
}

// liveConns yields the open connection of each known broker (a snapshot
// of the list; a connection that has ended is skipped).
func (c *Client) liveConns() iter.Seq[*conn.Client] {
	c.mu.Lock()
	list := append([]*broker(nil), c.list...)
	c.mu.Unlock()
	return func(yield func(*conn.Client) bool) {
		for _, b := range list {
			b.mu.Lock()
			cc := b.cc
			b.mu.Unlock()
			if cc != nil && cc.Context().Err() == nil && !yield(cc) {
				return
			}
		}
	}
}

// ownerFromBrokers asks which broker owns k (shard_owners): cc first,
// then the other connected brokers that advertise it; the owner unless
// already tried, nil when none knows.
func (c *Client) ownerFromBrokers(ctx context.Context, cc *conn.Client, k ownerKey, tried map[string]bool) *broker {
	if cc != nil {
		if nb := c.ownerFromBroker(ctx, cc, k, tried); nb != nil {
			return nb
		}
	}
	for other := range c.liveConns() {
		if other == cc {
			continue
		}
		if nb := c.ownerFromBroker(ctx, other, k, tried); nb != nil {
			return nb
		}
	}
	return nil
}

// ownerFromBroker asks cc which broker owns k (shard_owners) when the
// broker advertises it, and returns that broker unless already tried.
func (c *Client) ownerFromBroker(ctx context.Context, cc *conn.Client, k ownerKey, tried map[string]bool) *broker {
	if !cc.Capabilities().CanFeature(felix.FeatureShardOwners) {
		return nil
	}
	owners, err := api.New(cc).ShardOwners(ctx, k.tenant, k.namespace, k.name, k.kind)
	if err != nil {
		return nil
	}
	c.learnOwners(k, owners, "shard_owners")
	if h, ok := c.ownerOf(k); ok && !tried[h.addr] {
		return c.addBroker(h.addr, "shard_owners")
	}
	return nil
}

// learnOwners records a shard_owners answer for every shard of k's name.
func (c *Client) learnOwners(k ownerKey, owners []felix.ShardOwner, how string) {
	for _, o := range owners {
		if !o.NodeID.Set {
			continue
		}
		kk := k
		kk.shard = o.Shard
		c.learnOwner(kk, ownerHint{nodeID: o.NodeID.V, addr: o.Addr.V, gen: o.Generation}, how)
	}
}

// sleep waits d; false when ctx or the client ended first.
func sleep(ctx, cctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-cctx.Done():
		return false
	}
}
