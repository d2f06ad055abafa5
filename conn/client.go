package conn

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"

	"github.com/flxproto/felix/conn/internal/tlsconf"
	"github.com/flxproto/felix/conn/internal/udpgro"
)

// closeGrace bounds how long Close waits for the broker to finish the
// publish and cache streams after the client finished them, so that frames
// already written are delivered before the connection closes.
const closeGrace = 2 * time.Second

// Client is a connection to a Felix broker. It is safe for concurrent use.
type Client struct {
	qc    *quic.Conn
	tr    *quic.Transport
	udp   *net.UDPConn
	cfg   Config
	offer felix.ClientOffer
	log   *slog.Logger
	caps  felix.Capabilities

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	closed atomic.Bool

	reqID atomic.Uint64

	pubMu   sync.Mutex
	pubs    []*pubStream
	pubNext atomic.Uint32
	window  chan struct{} // connection-wide publish window, nil when per stream

	cacheMu   sync.Mutex
	caches    []*cacheStream
	cacheNext atomic.Uint32

	router *eventRouter

	subMu sync.Mutex
	subs  map[*eventSub]struct{}
}

// Dial connects to the broker at addr (host:port), authenticates a first
// stream and returns the client. Its Capabilities are what the broker
// advertised on that stream.
func Dial(ctx context.Context, addr string, cfg *Config) (*Client, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	c := &Client{cfg: *cfg, log: logger(cfg.Logger), subs: make(map[*eventSub]struct{})}
	c.offer = c.cfg.clientOffer()
	if c.cfg.MaxFrameBytes == 0 {
		c.cfg.MaxFrameBytes = felix.DefaultMaxFrameBytes
	}
	if c.cfg.PublishStreams <= 0 {
		c.cfg.PublishStreams = 1
	}
	if c.cfg.CacheStreams <= 0 {
		c.cfg.CacheStreams = 2
	}
	started := time.Now()
	ua, err := resolveDialAddr(addr)
	if err != nil {
		return nil, err
	}
	// Bind the family of the broker's address (as quic.DialAddr does): a
	// dual-stack socket would hand every IPv4 packet over as a mapped IPv6
	// address.
	laddr := &net.UDPAddr{IP: net.IPv4zero}
	if ua.IP.To4() == nil {
		laddr = &net.UDPAddr{IP: net.IPv6unspecified}
	}
	udp, err := net.ListenUDP("udp", laddr)
	if err != nil {
		return nil, &TransportError{Op: "dial", Err: err}
	}
	// The client owns its transport so that Close stops every goroutine.
	c.tr, c.udp = &quic.Transport{Conn: udpgro.Wrap(udp, !cfg.NoGRO)}, udp
	qconf := dialQUICConfig(ctx, cfg.QUIC)
	if cfg.IdleTimeout > 0 {
		qconf.MaxIdleTimeout = cfg.IdleTimeout
	}
	if cfg.KeepAlive > 0 {
		qconf.KeepAlivePeriod = cfg.KeepAlive
	}
	tc := clientTLS(cfg.TLS, serverName(cfg, addr), cfg.OfferALPN)
	if cfg.KeyLogWriter != nil {
		tc.KeyLogWriter = cfg.KeyLogWriter
	}
	qc, err := c.tr.Dial(ctx, ua, tc, qconf)
	if err != nil {
		c.tr.Close()
		udp.Close()
		return nil, dialErr(ctx, addr, started, err)
	}
	c.qc = qc
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.router = newEventRouter(c)
	c.watchConn()
	ps, err := c.openPubStream(ctx)
	if err != nil {
		c.cancel()
		qc.CloseWithError(CloseShuttingDown, "client closing")
		c.wg.Wait()
		c.tr.Close()
		udp.Close()
		if errors.Is(err, felix.ErrAuthRefused) {
			return nil, &DialError{Addr: addr, Kind: felix.ErrAuthRefused, Tenant: c.offer.TenantID, Err: err}
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(err, ctx.Err()) {
			return nil, &DialError{Addr: addr, Kind: ErrNoAnswer, Waited: waited(ctx, started), Err: err}
		}
		return nil, err
	}
	c.caps = ps.caps
	if !ps.caps.PerStreamWindow() && ps.caps.PublishWindow > 0 {
		c.window = make(chan struct{}, ps.caps.PublishWindow)
		ps.window = c.window
	}
	c.pubs = append(c.pubs, ps)
	c.wg.Add(1)
	go c.router.run()
	c.log.Debug("connected", "addr", addr, "flags", c.caps.Flags.SetString(), "features", c.caps.Features, "window", c.caps.PublishWindow)
	return c, nil
}

// serverName picks the TLS server name: Config.ServerName, else
// TLS.ServerName, else the host of addr when it is a name, else
// "localhost" (a development broker's certificate name) for an IP address.
func serverName(cfg *Config, addr string) string {
	var tlsName string
	if cfg.TLS != nil {
		tlsName = cfg.TLS.ServerName
	}
	return tlsconf.ServerName(cfg.ServerName, tlsName, addr)
}

// Capabilities returns what the broker advertised on the client's first
// stream (every stream decides its encodings from its own answer).
func (c *Client) Capabilities() felix.Capabilities { return c.caps }

// NegotiatedALPN returns the ALPN id of the connection ("" when none).
func (c *Client) NegotiatedALPN() string { return c.qc.ConnectionState().TLS.NegotiatedProtocol }

// LocalAddr returns the client's UDP address.
func (c *Client) LocalAddr() net.Addr { return c.qc.LocalAddr() }

// RemoteAddr returns the broker's UDP address.
func (c *Client) RemoteAddr() net.Addr { return c.qc.RemoteAddr() }

// Probe opens and authenticates a fresh stream, then finishes it: nil when
// the broker still takes new streams. A draining broker answers the auth
// with a *felix.BrokerError (code draining); a lost connection gives a
// *TransportError.
func (c *Client) Probe(ctx context.Context) error {
	cs, err := c.openStream(ctx)
	if err != nil {
		return err
	}
	cs.s.Close()
	cs.s.CancelRead(0)
	return nil
}

// Context is cancelled when the client is closed or its connection is lost.
func (c *Client) Context() context.Context { return c.qc.Context() }

// Close ends every subscription and watch, finishes the publish and cache
// streams (waiting briefly for the broker to finish its side, so written
// frames are delivered), closes the connection with CloseShuttingDown and
// waits for every goroutine the client started. It is idempotent.
func (c *Client) Close() error {
	c.once.Do(func() {
		c.closed.Store(true)
		c.subMu.Lock()
		subs := make([]*eventSub, 0, len(c.subs))
		for s := range c.subs {
			subs = append(subs, s)
		}
		c.subMu.Unlock()
		for _, s := range subs {
			s.close()
		}
		c.pubMu.Lock()
		pubs := append([]*pubStream(nil), c.pubs...)
		c.pubMu.Unlock()
		c.cacheMu.Lock()
		caches := append([]*cacheStream(nil), c.caches...)
		c.cacheMu.Unlock()
		for _, p := range pubs {
			p.cs.s.Close()
		}
		for _, cs := range caches {
			cs.cs.s.Close()
		}
		timer := time.NewTimer(closeGrace)
		for _, p := range pubs {
			select {
			case <-p.done:
			case <-timer.C:
			}
		}
		for _, cs := range caches {
			select {
			case <-cs.done:
			case <-timer.C:
			}
		}
		timer.Stop()
		c.cancel()
		c.qc.CloseWithError(CloseShuttingDown, "client closing")
		c.wg.Wait()
		c.tr.Close()
		c.udp.Close()
	})
	return nil
}

// TransportStats counts what a connection's QUIC transport carried.
type TransportStats struct {
	// BytesSent and BytesReceived count QUIC payload bytes (retransmissions
	// and duplicates included; UDP and IP headers excluded).
	BytesSent, BytesReceived uint64
	// PacketsSent, PacketsReceived and PacketsLost count QUIC packets.
	PacketsSent, PacketsReceived, PacketsLost uint64
	// SmoothedRTT is the transport's round-trip time estimate.
	SmoothedRTT time.Duration
}

// TransportStats returns the connection's transport counters (read from
// QUIC's own, so they cost nothing per frame). It may be called at any
// time, concurrently, also after Close (the final counts).
func (c *Client) TransportStats() TransportStats {
	s := c.qc.ConnectionStats()
	return TransportStats{BytesSent: s.BytesSent, BytesReceived: s.BytesReceived, PacketsSent: s.PacketsSent,
		PacketsReceived: s.PacketsReceived, PacketsLost: s.PacketsLost, SmoothedRTT: s.SmoothedRTT}
}

// checkOpen returns ErrClosed after Close.
func (c *Client) checkOpen() error {
	if c.closed.Load() {
		return ErrClosed
	}
	return nil
}

// clientStream is an authenticated client-opened bidirectional stream.
type clientStream struct {
	s    *quic.Stream
	r    *felix.Reader
	w    *frameWriter
	caps felix.Capabilities
	hk   *Hooks // Config.Hooks
	// remote is the broker's address, set only with hooks.
	remote net.Addr
}

// openStream opens a bidirectional stream, writes auth at once (quic-go does
// not tell the peer about a stream until data is sent) and reads the answer.
//
// With Config.TokenFunc, a refused auth is retried once on a fresh stream
// with a fresh token (covering a token that expired early).
func (c *Client) openStream(ctx context.Context) (*clientStream, error) {
	cs, err := c.openStreamOnce(ctx)
	if err != nil && c.cfg.TokenFunc != nil && errors.Is(err, felix.ErrAuthRefused) {
		c.log.Debug("auth refused; retrying with a fresh token", "err", err)
		cs, err = c.openStreamOnce(ctx)
	}
	return cs, err
}

func (c *Client) openStreamOnce(ctx context.Context) (*clientStream, error) {
	if err := c.checkOpen(); err != nil {
		return nil, err
	}
	s, err := c.qc.OpenStreamSync(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, clientErr("open stream", err)
	}
	cs := &clientStream{s: s, r: felix.NewReader(s), w: newFrameWriter(s), hk: c.cfg.Hooks}
	if cs.hk != nil {
		cs.remote = c.qc.RemoteAddr()
		cs.w.observe(cs.hk, SideClient, int64(s.StreamID()), cs.remote)
	}
	// Writes honour their context under the writer's lock: a deadline set
	// for one caller's cancellation never interrupts another caller's frame.
	cs.w.interruptible(s, func() { s.CancelWrite(0) })
	cs.r.SetMaxPayload(c.cfg.MaxFrameBytes)
	cs.w.limit = c.cfg.MaxFrameBytes
	caps, err := c.authenticate(ctx, cs.s, cs.r, cs.w)
	if err != nil {
		s.CancelWrite(0)
		s.CancelRead(0)
		c.cfg.Hooks.streamRefused(StreamInfo{Side: SideClient, Remote: c.qc.RemoteAddr(), StreamID: int64(s.StreamID()), TenantID: c.offer.TenantID, Err: err})
		return nil, err
	}
	c.cfg.Hooks.streamAuthenticated(StreamInfo{Side: SideClient, Remote: c.qc.RemoteAddr(), StreamID: int64(s.StreamID()), TenantID: c.offer.TenantID})
	cs.caps = caps
	return cs, nil
}

// errWriteInterrupted marks a write that ctx interrupted after it started:
// the stream's send side was reset and the stream must be abandoned.
var errWriteInterrupted = errors.New("write interrupted; stream reset")

// writeCtx runs write, one whole frame through an interruptible
// frameWriter, with ctx and maps its error. When ctx ends before the frame
// starts (including while waiting for another writer) nothing is written
// and ctx's error is returned. If ctx interrupts the frame after it started,
// the writer resets the stream's send side and the error matches both ctx's
// error and errWriteInterrupted: the stream must be abandoned. Transport
// errors are wrapped as client errors.
func writeCtx(ctx context.Context, write func(context.Context) error) error {
	err := write(ctx)
	if err == nil || errors.Is(err, errWriteInterrupted) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return err
	}
	var fe *felix.Error
	if errors.As(err, &fe) {
		return err
	}
	return clientErr("write", err)
}
