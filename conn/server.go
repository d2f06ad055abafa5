package conn

import (
	"container/list"
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn/internal/udpgro"
)

// Authenticator decides whether an auth frame is accepted. It returns an
// identity (anything; available as Stream.Identity) or an error. A returned
// *felix.BrokerError is answered as it is (its Code/Retry only to clients that
// offered FeatureErrorCodes), and the stream is then finished; any other
// error is answered as "auth failed" with code unauthenticated. A
// *felix.BrokerError with code draining is answered only to clients that offered
// FeatureErrorCodes; older clients get no answer until the connection
// closes (docs/negotiation.md §1). The context is the connection's;
// AuthPeerFromContext returns the client's address and TLS state (its
// certificate under mTLS), ConnFromContext the connection itself. Read the
// identity back with IdentityOf (typed) or Stream.Identity.
type Authenticator func(ctx context.Context, a *felix.Auth) (identity any, err error)

// Listener accepts Felix client connections (see Listen).
type Listener struct {
	ql     *quic.Listener
	tr     *quic.Transport
	udp    *net.UDPConn
	cfg    ServerConfig
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[*ServerConn]struct{}
	unauth list.List // unauthenticated conns, oldest first (server_unauth.go)
	// pending holds the connections started and not yet taken by Accept,
	// oldest first; ready signals a new one, pumpDone the pump's end
	// (acceptErr says why).
	pending   list.List
	ready     chan struct{}
	pumpDone  chan struct{}
	acceptErr error
	closed    bool
	wg        sync.WaitGroup

	byQUIC sync.Map // *quic.Conn → *ServerConn, for the window gate
	st     listenerCounters
	adm    admission // handshakes in progress (server_handshake.go)
	// answers is the answer bytes being written on every connection
	// (MaxAnswerBytes; nil: no listener-wide bound).
	answers *byteBudget
	// tenantAnswers is the answer bytes being written per tenant
	// (MaxTenantAnswerBytes; nil: no per-tenant bound).
	tenantAnswers *tenantBudgets
	// tenantConns and tenantGrowth are the authenticated connections and
	// window growth per tenant (server_tenant.go; nil: no bound).
	tenantConns, tenantGrowth *tenantBudgets
}

// Listen listens for Felix clients on the UDP address addr (for example
// "127.0.0.1:0"). Connections are handed out by Accept.
func Listen(addr string, cfg *ServerConfig) (*Listener, error) {
	if cfg == nil {
		return nil, errNoTLS
	}
	c := *cfg
	tc, err := serverTLS(withKeyLog(c.TLS, c.KeyLogWriter), c.RequireALPN)
	if err != nil {
		return nil, err
	}
	if c.AuthTimeout == 0 {
		c.AuthTimeout = DefaultAuthTimeout
	}
	if c.PreAuthMaxFrameBytes == 0 {
		c.PreAuthMaxFrameBytes = felix.PreAuthMaxFrameBytes
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = felix.DefaultMaxFrameBytes
	}
	if c.PreAuthStreams <= 0 {
		c.PreAuthStreams = DefaultPreAuthStreams
	}
	c.applyLimits()
	l := &Listener{cfg: c, log: logger(c.Logger), conns: make(map[*ServerConn]struct{})}
	if c.MaxAnswerBytes > 0 {
		l.answers = newByteBudget(c.MaxAnswerBytes)
	}
	if c.MaxTenantAnswerBytes > 0 {
		l.tenantAnswers = &tenantBudgets{size: c.MaxTenantAnswerBytes}
	}
	if c.MaxTenantConns > 0 {
		l.tenantConns = &tenantBudgets{size: int64(c.MaxTenantConns)}
	}
	if c.MaxTenantWindowGrowth > 0 {
		l.tenantGrowth = &tenantBudgets{size: c.MaxTenantWindowGrowth}
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, &TransportError{Op: "listen", Err: err}
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, &TransportError{Op: "listen", Err: err}
	}
	// The listener owns its transport so that Close can stop every
	// goroutine at once (a quic.ListenAddr transport lingers while closed
	// connections drain).
	tr := &quic.Transport{Conn: udpgro.Wrap(udp, !c.NoGRO), ConnContext: l.connContext}
	if c.RetryHandshakes > 0 {
		tr.VerifySourceAddress = l.verifySourceAddress
	}
	ql, err := tr.Listen(tc, l.serverQUIC(&c))
	if err != nil {
		tr.Close()
		udp.Close()
		return nil, &TransportError{Op: "listen", Err: err}
	}
	l.ql, l.tr, l.udp = ql, tr, udp
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.ready, l.pumpDone = make(chan struct{}, 1), make(chan struct{})
	l.wg.Add(1)
	go l.pump()
	return l, nil
}

// Addr returns the listener's UDP address.
func (l *Listener) Addr() net.Addr { return l.ql.Addr() }

// Accept waits for the next client connection. Its streams are
// authenticated in the background; take them with ServerConn.AcceptStream.
//
// Connections are taken from QUIC as soon as their handshake completes, by
// the listener's own goroutine (pump), and wait here for Accept: quic-go
// refuses a completed connection (CONNECTION_REFUSED) while 32 wait in its
// own queue, so its queue is never left to fill while the caller is busy
// or an unauthenticated connection is being evicted (issue 35).
func (l *Listener) Accept(ctx context.Context) (*ServerConn, error) {
	for {
		l.mu.Lock()
		if e := l.pending.Front(); e != nil {
			sc := e.Value.(*ServerConn)
			l.pending.Remove(e)
			sc.pendingEl = nil
			more := l.pending.Len() > 0
			l.mu.Unlock()
			if more {
				l.signalPending() // another Accept may be waiting
			}
			return sc, nil
		}
		closed, aerr := l.closed, l.acceptErr
		l.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if aerr != nil {
			return nil, transportErr("accept", aerr)
		}
		select {
		case <-l.ready:
		case <-l.pumpDone:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (l *Listener) signalPending() {
	select {
	case l.ready <- struct{}{}:
	default:
	}
}

// pump takes the connections whose handshake completed from QUIC at once,
// registers and starts them, and queues them for Accept (l.pending; a
// connection that ends before it is accepted leaves the queue). Nothing in
// it waits for a peer: closing a refused or evicted connection, which
// waits for quic-go to close it, runs on a goroutine of its own.
func (l *Listener) pump() {
	defer l.wg.Done()
	defer close(l.pumpDone)
	for {
		qc, err := l.ql.Accept(l.ctx)
		if err != nil {
			l.mu.Lock()
			l.acceptErr = err
			l.mu.Unlock()
			return
		}
		if !l.established(qc) {
			// Completed while MaxConnections were established meanwhile.
			l.log.Debug("connection refused", "reason", "max_client_connections", "limit", l.cfg.MaxConnections)
			l.closeAsync(func() { qc.CloseWithError(CloseShuttingDown, "max_client_connections reached") })
			continue
		}
		sc := newServerConn(l, qc)
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			l.byQUIC.Delete(qc)
			l.closeAsync(func() { qc.CloseWithError(CloseShuttingDown, "broker shutting down") })
			continue
		}
		l.conns[sc] = struct{}{}
		victim := l.admitUnauthLocked(sc)
		sc.pendingEl = l.pending.PushBack(sc)
		l.mu.Unlock()
		if victim != nil {
			l.closeAsync(victim.evictUnauth)
		}
		l.cfg.Hooks.connOpened(sc.hookInfo())
		sc.start()
		l.signalPending()
	}
}

// closeAsync runs close (a CloseWithError, which waits for quic-go's
// connection loop) on a goroutine of the listener's, so the pump never
// waits for a peer. Called by the pump only (its own place in l.wg keeps
// the group's count above zero).
func (l *Listener) closeAsync(close func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		close()
	}()
}

// Close stops accepting, closes every accepted connection with
// CloseShuttingDown ("broker shutting down") and waits for the goroutines
// of the listener and its connections. It is idempotent.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.wg.Wait()
		return nil
	}
	l.closed = true
	conns := make([]*ServerConn, 0, len(l.conns))
	for sc := range l.conns {
		conns = append(conns, sc)
	}
	l.mu.Unlock()
	l.cancel()
	err := l.ql.Close()
	for _, sc := range conns {
		sc.CloseWithError(CloseShuttingDown, "broker shutting down")
	}
	l.wg.Wait()
	l.tr.Close()
	l.udp.Close()
	return err
}

func (l *Listener) forget(sc *ServerConn) {
	l.mu.Lock()
	delete(l.conns, sc)
	if sc.pendingEl != nil { // ended before it was accepted
		l.pending.Remove(sc.pendingEl)
		sc.pendingEl = nil
	}
	l.mu.Unlock()
	l.byQUIC.Delete(sc.qc)
}

// ServerConn is one accepted client connection.
type ServerConn struct {
	l       *Listener
	qc      *quic.Conn
	log     *slog.Logger
	streams chan *Stream
	authed  atomic.Bool // set under l.mu (setAuthed)
	timer   *time.Timer
	wg      sync.WaitGroup
	done    chan struct{} // closed once the connection ended and wg is done

	mu        sync.Mutex
	pre       preAuth     // unauthenticated streams (server_preauth.go)
	budget    *byteBudget // request bytes held (server_budget.go)
	preBudget *byteBudget // auth frame bytes being read (handshake.go)
	answers   answerBound // answer bytes being written (framing.go)

	unauthEl  *list.Element                // in l.unauth while unauthenticated; guarded by l.mu
	ended     bool                         // the connection ended (dropUnauth); guarded by l.mu
	tenant    atomic.Pointer[tenantCharge] // set once, under l.mu, at the first auth
	pendingEl *list.Element                // in l.pending until accepted; guarded by l.mu
}

func newServerConn(l *Listener, qc *quic.Conn) *ServerConn {
	sc := &ServerConn{l: l, qc: qc, log: l.log.With("remote", qc.RemoteAddr().String()),
		streams: make(chan *Stream), done: make(chan struct{}), budget: newByteBudget(int64(l.cfg.MaxConnInFlightBytes)),
		preBudget: newByteBudget(int64(preAuthWindow(&l.cfg)))}
	sc.answers = answerBound{budget: newByteBudget(int64(l.cfg.MaxConnInFlightBytes)), shared: l.answers, tenants: l.tenantAnswers, timeout: l.cfg.AnswerWriteTimeout,
		timeouts: &l.st.answerTimeouts, waiting: &l.st.answersWaiting}
	l.byQUIC.Store(qc, sc)
	return sc
}

func (c *ServerConn) start() {
	d := c.l.cfg.ConnAuthTimeout
	if d == 0 {
		d = c.l.cfg.AuthTimeout
	}
	if d > 0 {
		c.timer = time.AfterFunc(d, func() {
			if !c.authed.Load() {
				c.log.Debug("auth timeout")
				c.qc.CloseWithError(CloseAuthTimeout, "authentication timeout")
			}
		})
	}
	c.l.wg.Add(1)
	go func() {
		defer c.l.wg.Done()
		c.wg.Add(2)
		go c.acceptLoop(false)
		go c.acceptLoop(true)
		<-c.qc.Context().Done()
		c.l.dropUnauth(c)
		if h := c.l.cfg.Hooks; h != nil && h.ConnClosed != nil {
			ev := c.hookInfo()
			ev.Err = context.Cause(c.qc.Context())
			h.ConnClosed(ev)
		}
		if c.timer != nil {
			c.timer.Stop()
		}
		c.closePreAuth()
		c.wg.Wait()
		c.l.forget(c)
		close(c.done)
	}()
}

// acceptLoop accepts client streams of one kind as soon as QUIC has them
// and gives each to the pre-auth scheduler (server_preauth.go), which reads
// it, queues it or resets it; it never waits for a read slot, so streams
// do not pile up unread in QUIC's accept queue.
func (c *ServerConn) acceptLoop(uni bool) {
	defer c.wg.Done()
	ctx := c.qc.Context()
	for {
		var st *Stream
		if uni {
			rs, err := c.qc.AcceptUniStream(ctx)
			if err != nil {
				return
			}
			st = c.newStream(rs, nil)
		} else {
			bs, err := c.qc.AcceptStream(ctx)
			if err != nil {
				return
			}
			st = c.newStream(bs, bs)
		}
		c.admit(st)
	}
}

// AcceptStream returns the next authenticated client stream: a
// bidirectional control stream or a unidirectional publish stream
// (Stream.Unidirectional). Streams whose auth failed are answered and ended
// by the connection and never returned.
func (c *ServerConn) AcceptStream(ctx context.Context) (*Stream, error) {
	select {
	case st := <-c.streams:
		return st, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.qc.Context().Done():
		return nil, transportErr("accept stream", context.Cause(c.qc.Context()))
	}
}

// Context is cancelled when the connection closes; its cause is the
// connection's close error.
func (c *ServerConn) Context() context.Context { return c.qc.Context() }

// RemoteAddr returns the client's address.
func (c *ServerConn) RemoteAddr() net.Addr { return c.qc.RemoteAddr() }

// NegotiatedALPN returns the ALPN id the client got ("felix/1"), or "" when
// it offered none.
func (c *ServerConn) NegotiatedALPN() string { return c.qc.ConnectionState().TLS.NegotiatedProtocol }

// Authenticated reports whether a stream of the connection authenticated.
func (c *ServerConn) Authenticated() bool { return c.authed.Load() }

// CloseWithError closes the connection with an application code
// (CloseShuttingDown or CloseAuthTimeout) and reason.
func (c *ServerConn) CloseWithError(code quic.ApplicationErrorCode, reason string) error {
	return c.qc.CloseWithError(code, reason)
}

// Wait blocks until the connection has closed and every goroutine this
// package runs for it has returned, and then returns nil; it returns ctx's
// error when ctx ends first (the connection is left as it is).
func (c *ServerConn) Wait(ctx context.Context) error {
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
