// Package conntest runs scripted Felix brokers on loopback for tests, as
// net/http/httptest runs HTTP servers: a Cluster of Nodes, each answering
// exactly what the test scripts for each request and recording every
// request it receives, so that a test can both provoke the hard cases a
// real broker rarely produces (a shard_moved with any resume_from, a
// subscription_lagged, a not_leader chain, a retry_after, an
// outcome_unknown, a reset at any point) and assert on what the client
// sent.
//
// A Node answers a request with the next Handler scripted for its type
// (On), else the type's standing Handler (Always), else its default: the
// cluster's view for topology, stream_shards and shard_owners (SetShards,
// SetOwner), not_leader naming the owner for a subscribe or publish sent to
// a node that does not own the shard, an acknowledgement with the next
// offset for a publish sent to the owner, and an error for anything else.
// The negotiation is conn's server half (conn.ServerConfig: Offer,
// LegacyAuth, Authenticate), set per node with Options.Configure.
package conntest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// Tenant and Token are the credentials ClientConfig carries; a node
// accepts every token unless Options.Configure sets an Authenticate.
const (
	Tenant = "t1"
	Token  = "conntest-token"
)

// Flags is the flag set a node offers by default: every flag.
const Flags = felix.FlagBinaryPublishBatch | felix.FlagBinaryEventBatch | felix.FlagBinaryEventBatchShared |
	felix.FlagBinaryPublishAcked | felix.FlagBinaryPublishAck | felix.FlagEventBatchOffsets |
	felix.FlagBinaryPublishKeyed | felix.FlagBinaryPublishAckOwner | felix.FlagBinaryPublishIdempotent |
	felix.FlagBinaryPublishAckCode | felix.FlagBinaryPublishAckDetail | felix.FlagEventBatchSkipped |
	felix.FlagBinaryPublishAckOffset | felix.FlagEventBatchPublisher | felix.FlagEventBatchTimestamps

// Features is the feature set a node offers by default: what a cluster
// node of the reference broker serves for streams.
const Features = felix.FeatureTopology | felix.FeatureRedirect | felix.FeatureStreamShards | felix.FeatureErrorCodes |
	felix.FeatureShardMoved | felix.FeatureShardOwners | felix.FeatureIdempotentProducer | felix.FeatureSubscriptionLagged |
	felix.FeatureStreamDeleted | felix.FeatureSequenceReused | felix.FeatureCacheWatch

// TB is the part of testing.TB a Cluster uses (*testing.T and *testing.B
// satisfy it): Start fails through Fatalf and stops the cluster with
// Cleanup.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Options configures a Cluster.
type Options struct {
	// Nodes is the number of nodes (0: 1). Node i has id "n<i>".
	Nodes int
	// Configure adjusts node i's server configuration before it listens
	// (its Offer defaults to Flags and Features).
	Configure func(i int, c *conn.ServerConfig)
	// TLS is the nodes' server configuration (certificate); nil generates
	// a self-signed certificate for localhost that ClientConfig trusts.
	TLS *tls.Config
}

// Cluster is a set of scripted nodes sharing one self-signed certificate.
type Cluster struct {
	// Nodes are the nodes, in id order.
	Nodes []*Node

	tb   TB
	pool *x509.CertPool

	mu        sync.Mutex
	received  []Received
	changed   chan struct{} // closed and replaced on every new record
	shards    map[string]felix.StreamShardsView
	owners    map[shardKey]int
	logs      map[shardKey][][]byte
	seqs      map[seqKey][]uint64 // offset of each idempotent sequence held
	producers atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type shardKey struct {
	stream string
	shard  uint32
}

// Start starts a cluster that stops when the test ends.
func Start(tb TB, o Options) *Cluster {
	tb.Helper()
	tc, pool := o.TLS, (*x509.CertPool)(nil)
	if tc == nil {
		var err error
		if tc, pool, err = conn.SelfSigned("localhost", "127.0.0.1"); err != nil {
			tb.Fatalf("conntest: certificate: %v", err)
		}
	}
	c := &Cluster{tb: tb, pool: pool, changed: make(chan struct{}), shards: make(map[string]felix.StreamShardsView),
		owners: make(map[shardKey]int), logs: make(map[shardKey][][]byte), seqs: make(map[seqKey][]uint64)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	n := max(o.Nodes, 1)
	for i := range n {
		sc := &conn.ServerConfig{TLS: tc, Offer: felix.BrokerOffer{Flags: Flags, Features: Features}}
		if o.Configure != nil {
			o.Configure(i, sc)
		}
		ln, err := conn.Listen("127.0.0.1:0", sc)
		if err != nil {
			c.Close()
			tb.Fatalf("conntest: listen: %v", err)
		}
		nd := &Node{ID: "n" + strconv.Itoa(i), Index: i, c: c, ln: ln, script: make(map[string][]Handler), always: make(map[string]Handler)}
		nd.Addr = ln.Addr().String()
		c.Nodes = append(c.Nodes, nd)
	}
	for _, nd := range c.Nodes {
		c.wg.Add(1)
		go nd.serve()
	}
	tb.Cleanup(c.Close)
	return c
}

// Close stops every node and waits for their goroutines.
func (c *Cluster) Close() {
	c.cancel()
	for _, nd := range c.Nodes {
		nd.ln.Close()
	}
	c.wg.Wait()
}

// Addrs returns the nodes' addresses, in node order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, nd := range c.Nodes {
		out[i] = nd.Addr
	}
	return out
}

// ClientConfig returns a connection configuration that trusts the
// cluster's generated certificate (none with Options.TLS: set the roots)
// and carries Tenant and Token.
func (c *Cluster) ClientConfig() conn.Config {
	return conn.Config{TLS: &tls.Config{RootCAs: c.pool, ServerName: "localhost"}, TenantID: Tenant, Token: Token}
}

// Topic returns the topic of stream name under Tenant, namespace "app".
func Topic(stream string) felix.Topic {
	return felix.Topic{TenantID: Tenant, Namespace: "app", Stream: stream}
}

// SetShards sets what stream_shards answers for stream: its shard count
// and routing.
func (c *Cluster) SetShards(stream string, shards uint32, routing felix.Routing) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := felix.StreamShardsView{Shards: shards}
	if routing != felix.RoutingModulo {
		v.Routing = felix.Some(routing)
	}
	c.shards[stream] = v
}

// PublishResult answers a publish as the default handler does (appended
// to the log of its shard, an idempotent batch once per sequence), for
// handlers that do something before or after: what it returns is what
// the answer would carry.
func (x *Exchange) PublishResult() (felix.PublishResult, error) {
	p := x.Received.Publish
	if p == nil {
		return felix.PublishResult{}, fmt.Errorf("conntest: %s is not a publish", x.Received.Type)
	}
	off, err := x.Node.c.appendOnce(p, x.ShardOf(p))
	return felix.PublishResult{Offset: off, HasOffset: err == nil}, err
}

// SetOwner makes node the owner of shard of stream: shard_owners names it,
// and the other nodes answer its subscribes and publishes with not_leader
// naming it.
func (c *Cluster) SetOwner(stream string, shard uint32, node int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owners[shardKey{stream, shard}] = node
}

// owner returns the owner of (stream, shard), -1 when none was set.
func (c *Cluster) owner(stream string, shard uint32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.owners[shardKey{stream, shard}]; ok {
		return i
	}
	return -1
}

// Log returns the payloads the default publish handler (and
// Exchange.PublishResult) appended to
// (stream, shard), in order: what a test counts duplicates in.
func (c *Cluster) Log(stream string, shard uint32) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.logs[shardKey{stream, shard}]...)
}

// Append appends payloads to the log of (stream, shard) and returns the
// offset of the first, as the default publish handler does.
func (c *Cluster) Append(stream string, shard uint32, payloads [][]byte) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := shardKey{stream, shard}
	off := uint64(len(c.logs[k]))
	for _, p := range payloads {
		c.logs[k] = append(c.logs[k], append([]byte(nil), p...))
	}
	return off
}

// appendOnce appends p to the log of its shard, an idempotent batch once
// per (producer, sequence): a batch already held is answered with the
// offset of its first write, a sequence beyond the next one is refused as
// a gap.
func (c *Cluster) appendOnce(p *Publish, shard uint32) (uint64, error) {
	if !p.Idempotent {
		return c.Append(p.Stream, shard, p.Payloads), nil
	}
	c.mu.Lock()
	k := seqKey{p.ProducerID, p.Stream, shard}
	held := c.seqs[k]
	if p.Sequence < uint64(len(held)) {
		off := held[p.Sequence]
		c.mu.Unlock()
		return off, nil
	}
	if p.Sequence > uint64(len(held)) {
		c.mu.Unlock()
		return 0, &felix.PublishRefusedError{Reason: "sequence_gap", Message: fmt.Sprintf("conntest: sequence %d, expected %d", p.Sequence, len(held))}
	}
	sk := shardKey{p.Stream, shard}
	off := uint64(len(c.logs[sk]))
	for _, pl := range p.Payloads {
		c.logs[sk] = append(c.logs[sk], append([]byte(nil), pl...))
	}
	c.seqs[k] = append(held, off)
	c.mu.Unlock()
	return off, nil
}

type seqKey struct {
	producer uint64
	stream   string
	shard    uint32
}

// Received returns every request received so far, in arrival order.
func (c *Cluster) Received() []Received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Received(nil), c.received...)
}

// ReceivedOf returns the requests of type typ received so far.
func (c *Cluster) ReceivedOf(typ string) []Received {
	var out []Received
	for _, r := range c.Received() {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

// Await blocks until n requests match (all received so far counted) and
// returns them; it fails the test when ctx ends first.
func (c *Cluster) Await(ctx context.Context, n int, match func(Received) bool) []Received {
	for {
		c.mu.Lock()
		var got []Received
		for _, r := range c.received {
			if match(r) {
				got = append(got, r)
			}
		}
		ch := c.changed
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-ch:
		case <-ctx.Done():
			c.tb.Fatalf("conntest: %d matching requests seen, %d awaited: %v", len(got), n, ctx.Err())
			return got
		}
	}
}

func (c *Cluster) record(r Received) {
	c.mu.Lock()
	c.received = append(c.received, r)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// Received is one request a node received.
type Received struct {
	// Node is the index of the node that received it; Conn numbers the
	// node's connections from 1 in accept order.
	Node, Conn int
	// Type is the JSON message type, or "publish_binary" for a binary
	// publish batch.
	Type string
	// Message is the decoded JSON request (nil for a binary publish).
	Message felix.Message
	// Publish is set for every publish request, JSON or binary.
	Publish *Publish
	// At is when the request was read.
	At time.Time
}

// Publish is the normalised content of a publish request.
type Publish struct {
	Stream     string
	Binary     bool
	Idempotent bool
	ProducerID uint64
	Sequence   uint64
	// Key is the routing key, nil when none.
	Key      []byte
	Payloads [][]byte
}

// publishOf returns the normalised publish of req, nil when it is none.
func publishOf(req conn.Request) *Publish {
	if req.Flags != 0 {
		b, err := felix.DecodePublishBatch(req.Flags, req.Payload)
		if err != nil {
			return nil
		}
		p := &Publish{Stream: b.Stream, Binary: true, Idempotent: b.Idempotent, ProducerID: b.ProducerID, Sequence: b.Sequence, Payloads: b.Payloads}
		if b.HasKey {
			p.Key = append([]byte{}, b.Key...)
		}
		return p
	}
	switch m := req.Message.(type) {
	case *felix.Publish:
		return &Publish{Stream: m.Stream, Key: optKey(m.Key), Payloads: [][]byte{m.Payload}}
	case *felix.PublishBatchMessage:
		return &Publish{Stream: m.Stream, Key: optKey(m.Key), Payloads: m.Payloads}
	case *felix.PublishIdempotent:
		return &Publish{Stream: m.Stream, Key: optKey(m.Key), Payloads: m.Payloads, Idempotent: true, ProducerID: m.ProducerID, Sequence: m.Sequence}
	}
	return nil
}

func optKey(k felix.Opt[[]byte]) []byte {
	if !k.Set {
		return nil
	}
	return append([]byte{}, k.V...)
}

// Handler answers one request. Returning an error ends the request's
// stream with a reset (the error is not sent).
type Handler func(x *Exchange) error

// Node is one scripted broker.
type Node struct {
	// ID is the node id ("n0", "n1", ...), Index its position, Addr its
	// UDP address.
	ID    string
	Index int
	Addr  string

	c  *Cluster
	ln *conn.Listener

	mu     sync.Mutex
	script map[string][]Handler
	always map[string]Handler
	conns  []*conn.ServerConn
}

// On queues handlers for the next requests of type typ (one each, in
// order); "publish" matches every publish, JSON or binary.
func (n *Node) On(typ string, h ...Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.script[typ] = append(n.script[typ], h...)
}

// Always makes h answer every request of type typ the queue of On leaves
// unanswered.
func (n *Node) Always(typ string, h Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.always[typ] = h
}

// CloseConns closes every connection of the node with CloseShuttingDown
// (a broker going away).
func (n *Node) CloseConns() {
	n.mu.Lock()
	cs := append([]*conn.ServerConn(nil), n.conns...)
	n.mu.Unlock()
	for _, sc := range cs {
		sc.CloseWithError(conn.CloseShuttingDown, "conntest: closed by the test")
	}
}

func (n *Node) handler(typ string) Handler {
	n.mu.Lock()
	defer n.mu.Unlock()
	if q := n.script[typ]; len(q) > 0 {
		n.script[typ] = q[1:]
		return q[0]
	}
	return n.always[typ]
}

func (n *Node) serve() {
	defer n.c.wg.Done()
	for {
		sc, err := n.ln.Accept(n.c.ctx)
		if err != nil {
			return
		}
		n.mu.Lock()
		n.conns = append(n.conns, sc)
		id := len(n.conns)
		n.mu.Unlock()
		n.c.wg.Add(1)
		go func() {
			defer n.c.wg.Done()
			defer sc.CloseWithError(conn.CloseShuttingDown, "conntest: node stopped")
			for {
				st, err := sc.AcceptStream(n.c.ctx)
				if err != nil {
					return
				}
				n.c.wg.Add(1)
				go func() { defer n.c.wg.Done(); n.stream(sc, id, st) }()
			}
		}()
	}
}

func (n *Node) stream(sc *conn.ServerConn, id int, st *conn.Stream) {
	defer st.Close()
	for {
		req, err := st.ReadRequest(n.c.ctx)
		if err != nil {
			return
		}
		r := Received{Node: n.Index, Conn: id, Message: req.Message, Publish: publishOf(req), At: time.Now()}
		switch {
		case req.Flags != 0:
			r.Type = "publish_binary"
		case req.Message != nil:
			r.Type = req.Message.MessageType()
		}
		n.c.record(r)
		x := &Exchange{Node: n, Stream: st, Conn: sc, Request: req, Received: r, ctx: n.c.ctx}
		h := n.handler(r.Type)
		if h == nil && r.Publish != nil {
			h = n.handler("publish")
		}
		if h == nil {
			h = defaultHandler
		}
		if err := h(x); err != nil {
			st.Abort()
			return
		}
		if x.done {
			return
		}
	}
}

// Exchange is one request and the means to answer it.
type Exchange struct {
	Node     *Node
	Stream   *conn.Stream
	Conn     *conn.ServerConn
	Request  conn.Request
	Received Received

	ctx  context.Context
	done bool // the stream is finished
}

// Context is the cluster's context (ends when it stops).
func (x *Exchange) Context() context.Context { return x.ctx }

// Reply writes m on the request's stream.
func (x *Exchange) Reply(m felix.Message) error { return x.Stream.WriteMessage(x.ctx, m) }

// Fail answers err as conn's server half does (conn.Stream.WriteErr): a
// *felix.BrokerError with its code, retry class and detail; a
// *felix.NotLeaderError as not_leader; a *felix.CursorError; a
// *felix.PublishRefusedError.
func (x *Exchange) Fail(err error) error { return x.Stream.WriteErr(x.ctx, err) }

// AnswerPublish answers a publish with res or err, in the form the
// request calls for (binary ack or JSON publish_ok / publish_error /
// publish_refused), as conn.Stream.AnswerPublish.
func (x *Exchange) AnswerPublish(res felix.PublishResult, err error) error {
	return x.Stream.AnswerPublish(x.ctx, x.Request, res, err)
}

// ResetStream resets the request's stream without an answer (a lost
// answer).
func (x *Exchange) ResetStream() error {
	x.Stream.Abort()
	x.done = true
	return nil
}

// ResetConn closes the connection with an application error other than
// CloseShuttingDown (a crash as the client sees it), without an answer.
func (x *Exchange) ResetConn() error {
	x.Conn.CloseWithError(0x7e57, "conntest: connection reset by the test")
	x.done = true
	return nil
}

// Subscribe answers a subscribe with ans (subscribed) and returns the
// event stream. The request's stream is finished.
func (x *Exchange) Subscribe(ans *felix.Subscribed) (*Events, error) {
	es, err := x.Stream.StartSubscription(x.ctx, ans)
	if err != nil {
		return nil, err
	}
	x.done = true
	return &Events{es: es, ctx: x.ctx}, nil
}

// Watch answers a cache_watch with ans (cache_watch_started) and returns
// the event stream, on which Message writes cache_event frames. The
// request's stream is finished.
func (x *Exchange) Watch(ans *felix.CacheWatchStarted) (*Events, error) {
	es, err := x.Stream.OpenEventStream(x.ctx, ans.SubscriptionID)
	if err != nil {
		return nil, err
	}
	if err := x.Stream.WriteMessage(x.ctx, ans); err != nil {
		es.Abort()
		return nil, err
	}
	x.Stream.Close()
	x.done = true
	return &Events{es: es, ctx: x.ctx}, nil
}

// Events is the event stream of a scripted subscription.
type Events struct {
	es  *conn.EventStream
	ctx context.Context
}

// Batch writes a binary event batch with payloads at offsets base,
// base+1, ... and skippedBefore undeliverable offsets below base (0:
// none). A batch without offsets: see BatchOf.
func (e *Events) Batch(base, skippedBefore uint64, payloads ...[]byte) error {
	return e.BatchOf(&felix.EventBatch{HasBaseOffset: true, BaseOffset: base, SkippedBefore: skippedBefore, Payloads: payloads})
}

// BatchOf writes b as a binary event batch, with the sections the client
// accepts.
func (e *Events) BatchOf(b *felix.EventBatch) error {
	frame, err := felix.AppendEventBatch(nil, b, e.es.Peer().Flags)
	if err != nil {
		return err
	}
	return e.es.WriteEncoded(e.ctx, frame)
}

// Encoded writes frame, a whole encoded frame (header included), on the
// event stream as it is: for a sender that encodes a batch once and
// writes it many times (a benchmark's).
func (e *Events) Encoded(frame []byte) error { return e.es.WriteEncoded(e.ctx, frame) }

// Message writes a JSON frame on the event stream (a cache_event, or a
// terminal frame written by hand).
func (e *Events) Message(m felix.Message) error { return e.es.WriteMessage(e.ctx, m) }

// End ends the event stream with the terminal frame of err
// (conn.EventStream.End): *felix.ShardMovedError, *felix.LaggedError,
// *felix.StreamDeletedError, *felix.BrokerError, nil for a clean end.
func (e *Events) End(err error) error { return e.es.End(e.ctx, err) }

// Reset resets the event stream (no terminal frame).
func (e *Events) Reset() { e.es.Abort() }

// Wait blocks until the client stops reading the event stream or the
// cluster stops.
func (e *Events) Wait() { <-e.es.Context().Done() }

// defaultHandler answers what the cluster's view says (see the package
// documentation); producer_init gets a fresh producer id.
func defaultHandler(x *Exchange) error {
	c := x.Node.c
	switch m := x.Request.Message.(type) {
	case *felix.Topology:
		v := &felix.TopologyView{}
		for _, nd := range c.Nodes {
			v.Brokers = append(v.Brokers, felix.BrokerEndpoint{NodeID: nd.ID, Addr: nd.Addr})
		}
		return x.Reply(v)
	case *felix.StreamShards:
		c.mu.Lock()
		v, ok := c.shards[m.Stream]
		c.mu.Unlock()
		if !ok {
			v.Shards = 1
		}
		v.RequestID = m.RequestID
		return x.Reply(&v)
	case *felix.ShardOwners:
		v := &felix.ShardOwnersView{RequestID: m.RequestID}
		c.mu.Lock()
		for k, i := range c.owners {
			if k.stream == m.Name {
				nd := c.Nodes[i]
				v.Owners = append(v.Owners, felix.ShardOwner{Shard: k.shard, NodeID: felix.Some(nd.ID), Addr: felix.Some(nd.Addr), Generation: 1})
			}
		}
		c.mu.Unlock()
		return x.Reply(v)
	case *felix.Subscribe:
		if nl := x.notLeader(m.Stream, m.Shard.V); nl != nil {
			return x.Fail(nl)
		}
	case *felix.ProducerInit:
		return x.Reply(&felix.ProducerInitOK{RequestID: m.RequestID, ProducerID: c.producers.Add(1)})
	}
	if p := x.Received.Publish; p != nil {
		shard := x.ShardOf(p)
		if nl := x.notLeader(p.Stream, shard); nl != nil {
			return x.AnswerPublish(felix.PublishResult{}, nl)
		}
		off, err := c.appendOnce(p, shard)
		return x.AnswerPublish(felix.PublishResult{Offset: off, HasOffset: err == nil}, err)
	}
	err := &felix.BrokerError{Message: fmt.Sprintf("conntest: %s not scripted on node %s", x.Received.Type, x.Node.ID),
		Code: felix.CodeInternal, Retry: felix.RetryFatal}
	return x.Fail(err)
}

// ShardOf returns the shard a publish lands on under the cluster's view
// of its stream (SetShards; shard 0 for an unkeyed publish).
func (x *Exchange) ShardOf(p *Publish) uint32 {
	c := x.Node.c
	c.mu.Lock()
	v, ok := c.shards[p.Stream]
	c.mu.Unlock()
	if !ok || p.Key == nil || v.Shards <= 1 {
		return 0
	}
	return v.Routing.V.ShardOf(p.Key, true, v.Shards)
}

// notLeader returns the redirect to the owner of (stream, shard) when it
// is another node, nil otherwise.
func (x *Exchange) notLeader(stream string, shard uint32) *felix.NotLeaderError {
	i := x.Node.c.owner(stream, shard)
	if i < 0 || i == x.Node.Index {
		return nil
	}
	nd := x.Node.c.Nodes[i]
	return &felix.NotLeaderError{NodeID: nd.ID, Addr: nd.Addr, Generation: 1}
}
