// Package tap is a QUIC relay for protocol debugging, the machinery of
// felix tap (docs/debugging.md). It terminates each client's QUIC
// connection with its own certificate, opens one to the broker (verifying
// the broker's), pairs their streams one to one and copies the bytes
// unchanged, reporting every whole frame it sees in either direction.
//
// It is a debugging tool, not part of the supported client API (conn and
// client): reported frames carry auth tokens unredacted, and the relay
// decrypts every connection it carries.
package tap

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/internal/tlsconf"
	"github.com/quic-go/quic-go"
)

// Direction says which way a relayed frame went.
type Direction uint8

// Directions.
const (
	// ClientToBroker: the client wrote the frame.
	ClientToBroker Direction = iota + 1
	// BrokerToClient: the broker wrote the frame.
	BrokerToClient
)

// String returns "c2b" or "b2c".
func (d Direction) String() string {
	switch d {
	case ClientToBroker:
		return "c2b"
	case BrokerToClient:
		return "b2c"
	}
	return "unknown"
}

// Frame is one whole frame seen by a Relay.
type Frame struct {
	// Conn numbers the relayed connection (1, 2, ... in accept order).
	Conn uint64
	// StreamID is the QUIC id of the stream on the client's connection
	// (the broker's side of the pair normally has the same id: streams are
	// opened in the order they are accepted).
	StreamID int64
	// Uni reports a unidirectional stream (a uni publish stream, or an
	// event stream the broker opened).
	Uni bool
	Dir Direction
	// Time is when the frame's last byte arrived at the relay.
	Time time.Time
	// Frame is the whole frame, header included, exactly as relayed. It is
	// valid only during the call. It carries auth tokens unredacted.
	Frame []byte
	// Err is set instead of Frame when the stream's bytes stop being
	// frames (a bad header, or a frame above Config.MaxFrameBytes):
	// the rest of that direction is relayed but not reported.
	Err error
}

// Config configures a Relay.
type Config struct {
	// TLS is the relay's own certificate toward clients (required), e.g.
	// from conn.SelfSigned. Clients must trust it instead of the broker's.
	TLS *tls.Config
	// Upstream is the broker's UDP address (host:port).
	Upstream string
	// UpstreamTLS is the trust used toward the broker (RootCAs; nil: the
	// system roots). The broker's certificate is always verified.
	UpstreamTLS *tls.Config
	// ServerName is the name the broker's certificate must carry (default:
	// as conn.Config.ServerName).
	ServerName string
	// OnFrame receives every whole frame in both directions. It is called
	// from the relay's copying goroutines (one per stream direction, so
	// concurrently for different streams and in order within one) when
	// the frame's last byte arrived, before those bytes are forwarded (so
	// an answer is never reported before its request); a slow OnFrame
	// slows that stream down.
	OnFrame func(Frame)
	// MaxFrameBytes bounds the frames reported (0: felix.DefaultMaxFrameBytes);
	// a larger frame is relayed, and ends the reporting of its direction.
	MaxFrameBytes uint32
	// KeyLogWriter receives the TLS secrets of both legs (see
	// conn.Config.KeyLogWriter).
	KeyLogWriter io.Writer
	// Logger receives the relay's logs (a failed broker connection at
	// Warn, the rest at Debug); nil discards them.
	Logger *slog.Logger
}

// Relay is a running relay (see Listen).
type Relay struct {
	cfg    Config
	log    *slog.Logger
	tr     *quic.Transport
	udp    *net.UDPConn
	ql     *quic.Listener
	up     *net.UDPAddr
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	n      atomic.Uint64
	once   sync.Once
}

var errConfig = errors.New("tap: Config needs TLS (a certificate) and Upstream")

// ListenRelay listens for clients on the UDP address addr and relays each
// of their connections to cfg.Upstream until Close. The ALPN a client
// negotiated with the relay ("felix/1" or none) is offered to the broker.
// When the broker refuses the connection, or either side closes it, the
// other side is closed with the same application code and reason.
func Listen(addr string, cfg *Config) (*Relay, error) {
	if cfg == nil || cfg.Upstream == "" {
		return nil, errConfig
	}
	tc, err := tlsconf.Server(tlsconf.WithKeyLog(cfg.TLS, cfg.KeyLogWriter), false)
	if err != nil {
		return nil, err
	}
	up, err := net.ResolveUDPAddr("udp", cfg.Upstream)
	if err != nil {
		return nil, &conn.TransportError{Op: "relay", Err: err}
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, &conn.TransportError{Op: "relay", Err: err}
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, &conn.TransportError{Op: "relay", Err: err}
	}
	r := &Relay{cfg: *cfg, log: logger(cfg.Logger), udp: udp, up: up, tr: &quic.Transport{Conn: udp}}
	if r.cfg.MaxFrameBytes == 0 {
		r.cfg.MaxFrameBytes = felix.DefaultMaxFrameBytes
	}
	ql, err := r.tr.Listen(tc, relayQUIC(conn.DefaultMaxStreams, conn.DefaultMaxStreams))
	if err != nil {
		r.tr.Close()
		udp.Close()
		return nil, &conn.TransportError{Op: "relay", Err: err}
	}
	r.ql = ql
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(1)
	go r.acceptLoop()
	return r, nil
}

// relayQUIC is the QUIC configuration of both legs: windows as large as a
// client's, keep-alives on, the given incoming stream limits.
func relayQUIC(bidi, uni int64) *quic.Config {
	q := conn.DefaultQUICConfig()
	q.MaxIncomingStreams, q.MaxIncomingUniStreams = bidi, uni
	return q
}

// Addr returns the relay's UDP address (clients dial it).
func (r *Relay) Addr() net.Addr { return r.ql.Addr() }

// Close stops accepting, closes every relayed connection on both sides
// (code 0, "relay closing") and waits until every frame seen was reported.
func (r *Relay) Close() error {
	var err error
	r.once.Do(func() {
		r.cancel()
		err = r.ql.Close()
		r.wg.Wait()
		r.tr.Close()
		r.udp.Close()
	})
	return err
}

func (r *Relay) acceptLoop() {
	defer r.wg.Done()
	for {
		down, err := r.ql.Accept(r.ctx)
		if err != nil {
			return
		}
		r.wg.Add(1)
		go r.relayConn(r.n.Add(1), down)
	}
}

// relayConn dials the broker for down and pairs their streams until either
// connection ends.
func (r *Relay) relayConn(id uint64, down *quic.Conn) {
	defer r.wg.Done()
	log := r.log.With("conn", id, "client", down.RemoteAddr().String())
	alpn := down.ConnectionState().TLS.NegotiatedProtocol
	var tlsName string
	if r.cfg.UpstreamTLS != nil {
		tlsName = r.cfg.UpstreamTLS.ServerName
	}
	tc := tlsconf.Client(r.cfg.UpstreamTLS, tlsconf.ServerName(r.cfg.ServerName, tlsName, r.cfg.Upstream), alpn != "")
	if r.cfg.KeyLogWriter != nil {
		tc.KeyLogWriter = r.cfg.KeyLogWriter
	}
	dctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	up, err := r.tr.Dial(dctx, r.up, tc, relayQUIC(-1, conn.DefaultMaxEventStreams))
	cancel()
	if err != nil {
		log.Warn("relay: cannot connect to the broker", "broker", r.cfg.Upstream, "err", err)
		reason := "relay: cannot connect to the broker: " + err.Error()
		if len(reason) > 256 {
			reason = reason[:256]
		}
		closeLike(down, err, reason)
		return
	}
	log.Debug("relay: connected", "alpn", alpn)
	// Either side ending ends the other, with the same code and reason.
	stopA := context.AfterFunc(down.Context(), func() { closeLike(up, context.Cause(down.Context()), "client closed") })
	stopB := context.AfterFunc(up.Context(), func() { closeLike(down, context.Cause(up.Context()), "broker closed") })
	stopC := context.AfterFunc(r.ctx, func() {
		down.CloseWithError(conn.CloseShuttingDown, "relay closing")
		up.CloseWithError(conn.CloseShuttingDown, "relay closing")
	})
	var wg sync.WaitGroup
	wg.Go(func() { // client bidi → broker bidi
		for {
			ds, err := down.AcceptStream(r.ctx)
			if err != nil {
				return
			}
			us, err := up.OpenStreamSync(r.ctx)
			if err != nil {
				ds.CancelRead(0)
				ds.CancelWrite(0)
				return
			}
			sid := int64(ds.StreamID())
			wg.Go(func() { r.pump(id, sid, false, ClientToBroker, ds, us) })
			wg.Go(func() { r.pump(id, sid, false, BrokerToClient, us, ds) })
		}
	})
	// uni pairs each unidirectional stream from opens with one opened on
	// to; the relay names it by its id on the client's connection.
	uni := func(from, to *quic.Conn, dir Direction) {
		for {
			src, err := from.AcceptUniStream(r.ctx)
			if err != nil {
				return
			}
			dst, err := to.OpenUniStreamSync(r.ctx)
			if err != nil {
				src.CancelRead(0)
				return
			}
			sid := int64(src.StreamID())
			if from != down {
				sid = int64(dst.StreamID())
			}
			wg.Go(func() { r.pump(id, sid, true, dir, src, dst) })
		}
	}
	wg.Go(func() { uni(down, up, ClientToBroker) }) // client uni → broker uni
	wg.Go(func() { uni(up, down, BrokerToClient) }) // broker uni (event streams) → client uni
	<-down.Context().Done()
	<-up.Context().Done()
	wg.Wait()
	stopA()
	stopB()
	stopC()
	log.Debug("relay: closed", "cause", context.Cause(down.Context()))
}

// closeLike closes c with the application code and reason of cause when
// it is a QUIC application error, else with code 0 and reason.
func closeLike(c *quic.Conn, cause error, reason string) {
	var ae *quic.ApplicationError
	if errors.As(cause, &ae) {
		c.CloseWithError(ae.ErrorCode, ae.ErrorMessage)
		return
	}
	c.CloseWithError(conn.CloseShuttingDown, reason)
}

// relaySrc and relayDst are the halves of a stream pair.
type relaySrc interface {
	io.Reader
	CancelRead(quic.StreamErrorCode)
}

type relayDst interface {
	io.Writer
	Close() error
	CancelWrite(quic.StreamErrorCode)
	Context() context.Context
}

// pump copies src to dst unchanged, reporting whole frames. A FIN is
// forwarded as a FIN, a reset as a reset with the same code, and a
// STOP_SENDING from dst's peer as a STOP_SENDING to src's peer.
func (r *Relay) pump(connID uint64, sid int64, uni bool, dir Direction, src relaySrc, dst relayDst) {
	// The peer of dst stopping its reads (e.g. an unsubscribe) reaches
	// src's peer even while src is quiet.
	stop := context.AfterFunc(dst.Context(), func() {
		var se *quic.StreamError
		if errors.As(context.Cause(dst.Context()), &se) && se.Remote {
			src.CancelRead(se.ErrorCode)
		}
	})
	defer stop()
	fp := newFrameParser(r.cfg.MaxFrameBytes)
	emit := func(frame []byte, err error) {
		if r.cfg.OnFrame != nil {
			r.cfg.OnFrame(Frame{Conn: connID, StreamID: sid, Uni: uni, Dir: dir, Time: time.Now(), Frame: frame, Err: err})
		}
	}
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			// Reported before forwarded: a frame's answer is never
			// reported before the frame itself.
			fp.feed(buf[:n], emit)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				var se *quic.StreamError
				code := quic.StreamErrorCode(0)
				if errors.As(werr, &se) {
					code = se.ErrorCode
				}
				src.CancelRead(code)
				return
			}
		}
		if rerr != nil {
			var se *quic.StreamError
			switch {
			case rerr == io.EOF:
				dst.Close()
			case errors.As(rerr, &se):
				dst.CancelWrite(se.ErrorCode)
			default:
				dst.CancelWrite(0)
			}
			return
		}
	}
}

// frameParser cuts a byte stream into whole frames with a felix.Reader
// fed the bytes as the pump receives them.
type frameParser struct {
	src  feed
	r    *felix.Reader
	out  []byte // the whole frame reported, reused
	dead bool
}

func newFrameParser(max uint32) *frameParser {
	p := &frameParser{}
	p.r = felix.NewReader(&p.src)
	p.r.SetMaxPayload(max)
	p.r.SetLenientFlags(true) // report frames whatever their flags
	return p
}

// feed is the Reader's source: the bytes received and not yet read. When
// it runs dry it says errNeedMore, and the Reader keeps the frame's
// progress until the next chunk.
type feed struct{ b []byte }

var errNeedMore = errors.New("tap: waiting for more bytes")

func (f *feed) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, errNeedMore
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

// feed reads b and reports every frame it completes; the first error
// ends the reporting of the stream.
func (p *frameParser) feed(b []byte, emit func([]byte, error)) {
	if p.dead {
		return
	}
	p.src.b = b
	for {
		f, err := p.r.ReadFrame()
		if err == errNeedMore {
			return
		}
		if err != nil {
			p.dead = true
			emit(nil, err)
			return
		}
		p.out = append(felix.AppendHeader(p.out[:0], f.Header), f.Payload...)
		emit(p.out, nil)
	}
}

// logger returns l, or a logger that discards everything.
func logger(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
