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
	closed bool
	wg     sync.WaitGroup

	byQUIC sync.Map // *quic.Conn → *ServerConn, for the window gate
	st     listenerCounters
	adm    admission // handshakes in progress (server_handshake.go)
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
	tr := &quic.Transport{Conn: udp, ConnContext: l.connContext}
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
	return l, nil
}

// Addr returns the listener's UDP address.
func (l *Listener) Addr() net.Addr { return l.ql.Addr() }

// Accept waits for the next client connection. Its streams are
// authenticated in the background; take them with ServerConn.AcceptStream.
func (l *Listener) Accept(ctx context.Context) (*ServerConn, error) {
	var qc *quic.Conn
	for qc == nil {
		var err error
		qc, err = l.ql.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			l.mu.Lock()
			closed := l.closed
			l.mu.Unlock()
			if closed {
				return nil, ErrClosed
			}
			return nil, transportErr("accept", err)
		}
		if !l.established(qc) {
			// Completed while MaxConnections were established meanwhile.
			l.log.Debug("connection refused", "reason", "max_client_connections", "limit", l.cfg.MaxConnections)
			qc.CloseWithError(CloseShuttingDown, "max_client_connections reached")
			qc = nil
		}
	}
	sc := newServerConn(l, qc)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		l.byQUIC.Delete(qc)
		qc.CloseWithError(CloseShuttingDown, "broker shutting down")
		return nil, ErrClosed
	}
	l.conns[sc] = struct{}{}
	victim := l.admitUnauthLocked(sc)
	l.mu.Unlock()
	if victim != nil {
		victim.evictUnauth()
	}
	l.cfg.Hooks.connOpened(sc.hookInfo())
	sc.start()
	return sc, nil
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

	unauthEl *list.Element // in l.unauth while unauthenticated; guarded by l.mu
}

func newServerConn(l *Listener, qc *quic.Conn) *ServerConn {
	sc := &ServerConn{l: l, qc: qc, log: l.log.With("remote", qc.RemoteAddr().String()),
		streams: make(chan *Stream), done: make(chan struct{}), budget: newByteBudget(int64(l.cfg.MaxConnInFlightBytes)),
		preBudget: newByteBudget(int64(preAuthWindow(&l.cfg)))}
	sc.answers = answerBound{budget: newByteBudget(int64(l.cfg.MaxConnInFlightBytes)), timeout: l.cfg.AnswerWriteTimeout,
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
