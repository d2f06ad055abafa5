package conn

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"
)

// receiver is the read half of a client stream (bidi or uni).
type receiver interface {
	io.Reader
	Peek([]byte) (int, error)
	CancelRead(quic.StreamErrorCode)
	SetReadDeadline(time.Time) error
}

// sender is the write half of a stream.
type sender interface {
	io.Writer
	Close() error
	CancelWrite(quic.StreamErrorCode)
	Context() context.Context
	SetWriteDeadline(time.Time) error
}

// Stream is an authenticated client-opened stream on the server side: a
// bidirectional control stream (requests and answers) or a unidirectional
// publish stream (requests only). Reads are not safe for concurrent use;
// writes are (each frame is written whole under a lock).
//
// A write blocks while QUIC flow control holds it back (a slow or stalled
// client) and honours its context: when the context ends before the frame
// was started (including while waiting for another writer), nothing is
// written, the stream stays usable and the context's error is returned.
// When the context ends during the write, the stream may hold a partial
// frame that cannot be continued: the stream is aborted (Abort: reset and
// stop-sending) and the returned error matches the context's error; every
// later write fails.
type Stream struct {
	ans answerQueue // reserved publish answers, in request order (answer.go)

	c        *ServerConn
	recv     receiver
	send     sender // nil on a uni stream
	r        *felix.Reader
	w        *frameWriter // nil on a uni stream
	peer     felix.PeerCapabilities
	auth     *felix.Auth
	identity any
	eof      bool
	bigBuf   bool // the read buffer grew past keepReadBuf
	endOnce  sync.Once

	authDeadline time.Time // the stream is reset if not authenticated by then (zero: none)
	resMu        sync.Mutex
	reserved     int64 // bytes of the connection's budget held by the last frame read
	peek         [felix.HeaderLen]byte
	ended        bool  // Close or Abort ran: reservations are returned at once
	refusal      error // the answer that refused the stream's auth (hooks)
}

// keepReadBuf is the largest read buffer a server stream keeps between
// requests.
const keepReadBuf = 1 << 20

func (c *ServerConn) newStream(recv receiver, send sender) *Stream {
	// The frame reader is made when a read slot reads the stream's auth
	// frame (authReader): the streams refused or still queued (most of a
	// flood's) never need one.
	st := &Stream{c: c, recv: recv, peer: felix.UnauthenticatedPeer()}
	if send != nil {
		st.send = send
		st.w = newFrameWriter(send)
		st.w.interruptible(send, st.Abort, send.Context(), c.qc.Context())
		if c.l.cfg.Hooks != nil {
			st.w.observe(c.l.cfg.Hooks, SideServer, streamID(recv), c.qc.RemoteAddr())
		}
	}
	return st
}

// requestReader returns the reader of an authenticated stream's requests:
// frames of at most max payload bytes, flags checked by the caller (so that
// a frame with unknown flags is answered, not a read error).
func requestReader(recv receiver, max uint32) *felix.Reader {
	r := felix.NewReader(recv)
	r.SetMaxPayload(max)
	r.SetLenientFlags(true)
	return r
}

// Request is one frame read from a client stream. Payload aliases the
// stream's read buffer and is valid until the next ReadRequest.
type Request struct {
	// Flags is the frame's flag word (0 for JSON).
	Flags felix.Flags
	// Payload is the frame payload.
	Payload []byte
	// Message is the decoded JSON message when Flags is 0 (possibly a
	// *felix.UnknownMessage for an unknown type); nil for binary frames.
	Message felix.Message
}

// Unidirectional reports whether the stream is a uni publish stream (no
// answers can be written).
func (s *Stream) Unidirectional() bool { return s.w == nil }

// Peer returns what the client offered in its auth: the frames and fields
// it can parse. Every write on the stream is checked against it.
func (s *Stream) Peer() felix.PeerCapabilities { return s.peer }

// Auth returns the auth message the stream authenticated with.
func (s *Stream) Auth() *felix.Auth { return s.auth }

// Identity returns what the Authenticator returned for the stream; see
// IdentityOf for the typed form.
func (s *Stream) Identity() any { return s.identity }

// Conn returns the connection the stream belongs to.
func (s *Stream) Conn() *ServerConn { return s.c }

// Context is cancelled when the stream's write side ends (after Close,
// Abort, or the client stopping its reads) or the connection closes.
func (s *Stream) Context() context.Context {
	if s.send != nil {
		return s.send.Context()
	}
	return s.c.qc.Context()
}

// ReadRequest reads the next request frame. It returns io.EOF when the
// client finished its side (also inside a frame header: a clean end, spec
// docs/frame.md §6). Some frames are handled here and never returned: a frame with
// unknown flag bits is answered with an error "unsupported frame flags" and
// skipped (the stream stays usable); a second auth is answered with
// invalid_request and ends the stream. A frame above
// ServerConfig.MaxFrameBytes is refused from its header: an error with
// code limit_exceeded is answered (bidi streams), the stream ends, and an
// error matching felix.ErrFrameTooLarge is returned.
// A JSON payload that fails to decode is returned as an error; the caller
// should then end the stream (Abort). When ctx ends the wait, the stream
// may be in the middle of a frame: it is aborted and ctx's error returned.
func (s *Stream) ReadRequest(ctx context.Context) (Request, error) {
	if s.bigBuf {
		// The previous request's payload (now invalid) grew the read
		// buffer past keepReadBuf: drop it, so that a long-lived stream
		// that once carried a 16 MiB frame does not pin 16 MiB.
		s.r, s.bigBuf = requestReader(s.recv, s.r.MaxPayload()), false
	}
	for {
		if err := ctx.Err(); err != nil {
			s.Abort()
			return Request{}, err
		}
		s.releaseFrame()
		// The connection's own context needs no guard (no
		// context.AfterFunc per request): when it ends, the connection
		// is closed and a blocked read fails by itself.
		own := ctx == s.c.qc.Context()
		done := noGuard
		if !own {
			done = ctxGuard(ctx, s.recv.SetReadDeadline)
		}
		if err := s.reserveNext(ctx); err != nil {
			done()
			s.Abort()
			return Request{}, err
		}
		f, err := s.r.ReadFrame()
		if (done() || own && ctx.Err() != nil) && err != nil {
			s.Abort()
			return Request{}, ctx.Err()
		}
		if err != nil {
			if err == io.EOF || isHeaderEnd(err) {
				// A stream that ends before a whole header is a clean
				// end (docs/frame.md §6).
				s.eof = true
				return Request{}, io.EOF
			}
			if errors.Is(err, felix.ErrFrameTooLarge) {
				// Refused before any payload byte was read: an answer
				// says why, then the stream ends (reading cannot resume
				// off a frame boundary).
				s.c.l.st.oversize.Add(1)
				rctx, cancel := context.WithTimeout(ctx, refusalWriteTimeout)
				s.refuse(rctx, &felix.BrokerError{Type: "error", Message: "frame too large: " + err.Error(), Code: felix.CodeLimitExceeded})
				cancel()
				return Request{}, err
			}
			if errors.Is(err, felix.ErrBadMagic) || errors.Is(err, felix.ErrBadVersion) {
				s.Abort()
				return Request{}, err
			}
			return Request{}, transportErr("read request", err)
		}
		if f.Flags.Unknown() != 0 {
			if s.w == nil {
				s.Abort()
				return Request{}, f.Flags.CheckKnown()
			}
			be := &felix.BrokerError{Type: "error", Message: "unsupported frame flags", Code: felix.CodeInvalidRequest}
			if err := s.WriteError(ctx, be); err != nil {
				return Request{}, err
			}
			continue
		}
		if h := s.c.l.cfg.Hooks; h != nil {
			h.frameRead(SideServer, streamID(s.recv), s.c.qc.RemoteAddr(), f)
		}
		req := Request{Flags: f.Flags, Payload: f.Payload}
		s.bigBuf = len(f.Payload) > keepReadBuf
		if f.Flags != 0 {
			return req, nil
		}
		m, err := felix.DecodeMessage(f.Payload)
		if err != nil {
			return req, err
		}
		if _, again := m.(*felix.Auth); again {
			s.refuse(ctx, &felix.BrokerError{Type: "error", Message: "auth already established", Code: felix.CodeInvalidRequest})
			return Request{}, protocolErr("second auth on an authenticated stream")
		}
		req.Message = m
		return req, nil
	}
}

// WriteMessage writes a JSON answer. The message is shaped to the client's
// offer first (code/retry/detail dropped from error and publish_error
// without FeatureErrorCodes; offset dropped from publish_ok without flag
// 0x1000; version dropped from cache_value without
// FeatureCacheConditional), and a message the client cannot parse at all
// (shard_moved, subscription_lagged, stream_deleted, unsupported,
// not_leader without the matching offer) is refused with felix.ErrNotAdvertised.
// ctx bounds the write (see Stream).
func (s *Stream) WriteMessage(ctx context.Context, m felix.Message) error {
	if s.w == nil {
		return errUniWrite
	}
	m, err := shapeMessage(m, s.peer)
	if err != nil {
		return err
	}
	return writeErr("write", s.w.writeMessage(ctx, m))
}

// WriteFrame writes a binary answer frame. Flag bits the client did not
// offer are refused with felix.ErrNotAdvertised. ctx bounds the write (see
// Stream).
func (s *Stream) WriteFrame(ctx context.Context, flags felix.Flags, payload []byte) error {
	if s.w == nil {
		return errUniWrite
	}
	if err := checkFlags(flags, s.peer); err != nil {
		return err
	}
	return writeErr("write", s.w.writeFrame(ctx, flags, payload))
}

// WriteEncoded writes an already encoded whole frame (header and payload)
// with one Write; its flag bits are checked like WriteFrame's. ctx bounds
// the write (see Stream).
func (s *Stream) WriteEncoded(ctx context.Context, frame []byte) error {
	if s.w == nil {
		return errUniWrite
	}
	if err := checkEncoded(frame, s.peer); err != nil {
		return err
	}
	return writeErr("write", s.w.writeEncoded(ctx, frame))
}

// WriteError writes an error message built from e, shaped to the client's
// offer (code, retry and detail only with FeatureErrorCodes). ctx bounds
// the write (see Stream).
func (s *Stream) WriteError(ctx context.Context, e *felix.BrokerError) error {
	return s.WriteMessage(ctx, errorMessage(e))
}

// Close ends the stream gracefully: it finishes the write side (FIN) and,
// if the client's side was not read to its end, stops reading it, so QUIC
// returns the stream credit. Call it after the last answer.
func (s *Stream) Close() error {
	var err error
	s.endOnce.Do(func() {
		defer s.dropReservation(true)
		if s.send != nil {
			err = s.send.Close()
		}
		if !s.eof {
			s.recv.CancelRead(0)
		}
	})
	return err
}

// Abort tears the stream down in both directions (RESET_STREAM and
// STOP_SENDING with code 0), as after a fatal framing error.
func (s *Stream) Abort() {
	s.endOnce.Do(func() {
		defer s.dropReservation(true)
		if s.send != nil {
			s.send.CancelWrite(0)
		}
		s.recv.CancelRead(0)
	})
}

// refuse answers an error (bidi streams) and ends the stream. An answer
// that ctx interrupts aborts the stream.
func (s *Stream) refuse(ctx context.Context, e *felix.BrokerError) {
	if s.auth == nil {
		s.refusal = e
	}
	if s.w != nil {
		m, err := shapeMessage(errorMessage(e), s.peer)
		if err == nil {
			_ = s.w.writeMessage(ctx, m)
		}
	}
	s.Close()
}

var errUniWrite = errors.New("conn: cannot write on a unidirectional client stream")

// refusalWriteTimeout bounds the write of a refusal after which a stream
// ends anyway (a client that does not read cannot hold the stream).
const refusalWriteTimeout = 5 * time.Second

// isHeaderEnd reports whether err is a stream that ended inside a frame
// header (after 1 to 11 bytes).
func isHeaderEnd(err error) bool {
	var fe *felix.Error
	return errors.As(err, &fe) && errors.Is(err, felix.ErrTruncated) && fe.Field == "header"
}

// writeErr is transportErr for server writes: a context error (the write
// was abandoned or interrupted) is returned as it is.
func writeErr(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return transportErr(op, err)
}

// checkFlags refuses flag bits outside the client's offer: the client must
// be able to decode every frame it is sent. The base bits of binary acks
// and events the client offered are in its flag set too.
func checkFlags(flags felix.Flags, peer felix.PeerCapabilities) error {
	if extra := flags &^ peer.Flags; extra != 0 {
		return notAdvertised("frame flags " + extra.String() + " not offered by the client")
	}
	return nil
}

func checkEncoded(frame []byte, peer felix.PeerCapabilities) error {
	h, err := felix.ParseHeaderLenient(frame)
	if err != nil {
		return err
	}
	return checkFlags(h.Flags, peer)
}

// OpenEventStream opens the unidirectional event stream of a subscription
// or cache watch requested on s, and writes its event_stream_hello first.
// The frames written on it are checked against s's peer offer. Open it
// before answering subscribed / cache_watch_started on s (the client
// accepts either order) and write history only after that answer. ctx
// bounds opening the stream and writing the hello.
//
// The event stream, not s, governs the subscription from then on: write
// its events under the EventStream's Context and never under s.Context(),
// which ends as soon as the client stops reading s, typically right after
// it read subscribed (see the package doc, and StartSubscription, which
// also answers and closes s).
func (s *Stream) OpenEventStream(ctx context.Context, subscriptionID uint64) (*EventStream, error) {
	ss, err := s.c.qc.OpenUniStreamSync(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, transportErr("open event stream", err)
	}
	es := &EventStream{s: ss, w: newFrameWriter(ss), peer: s.peer, id: subscriptionID}
	es.w.interruptible(ss, es.Abort, ss.Context(), s.c.qc.Context())
	if h := s.c.l.cfg.Hooks; h != nil {
		es.w.observe(h, SideServer, int64(ss.StreamID()), s.c.qc.RemoteAddr())
	}
	if err := es.w.writeMessage(ctx, &felix.EventStreamHello{SubscriptionID: subscriptionID}); err != nil {
		ss.CancelWrite(0)
		return nil, writeErr("write event_stream_hello", err)
	}
	return es, nil
}

// EventStream is a broker-opened event stream (one subscription or cache
// watch). Writes are safe for concurrent use. They block while QUIC flow
// control holds them back (a client that reads slowly or not at all) and
// honour their context as Stream's writes do: a context that ends before
// the frame was started leaves the stream usable; one that interrupts the
// write resets the stream (Abort), since a partial frame cannot be
// continued, and the error matches the context's error.
type EventStream struct {
	s    *quic.SendStream
	w    *frameWriter
	peer felix.PeerCapabilities
	id   uint64
}

// SubscriptionID returns the id written in the stream's hello.
func (e *EventStream) SubscriptionID() uint64 { return e.id }

// Peer returns the offer of the client the stream goes to.
func (e *EventStream) Peer() felix.PeerCapabilities { return e.peer }

// Context governs the subscription or watch: it is cancelled when the
// stream's write side ends (after Close, End or Abort), when the client
// stops reading it (it unsubscribed), or when the connection closes. Write
// the events under it (or a context derived from it), not under the
// control stream's context, which a client may end right after subscribed.
func (e *EventStream) Context() context.Context { return e.s.Context() }

// WriteFrame writes an event batch frame; flag bits the client did not
// offer are refused with felix.ErrNotAdvertised. ctx bounds the write (see
// EventStream).
func (e *EventStream) WriteFrame(ctx context.Context, flags felix.Flags, payload []byte) error {
	if err := checkFlags(flags, e.peer); err != nil {
		return err
	}
	return writeErr("write event", e.w.writeFrame(ctx, flags, payload))
}

// WriteEncoded writes an already encoded whole frame, checked like
// WriteFrame.
func (e *EventStream) WriteEncoded(ctx context.Context, frame []byte) error {
	if err := checkEncoded(frame, e.peer); err != nil {
		return err
	}
	return writeErr("write event", e.w.writeEncoded(ctx, frame))
}

// WriteMessage writes a JSON frame (cache_event, or a terminal frame:
// shard_moved, subscription_lagged, stream_deleted, cache_watch_lagged,
// error), shaped and checked as Stream.WriteMessage does. After a terminal
// frame, Close the stream. ctx bounds the write (see EventStream).
func (e *EventStream) WriteMessage(ctx context.Context, m felix.Message) error {
	m, err := shapeMessage(m, e.peer)
	if err != nil {
		return err
	}
	return writeErr("write event", e.w.writeMessage(ctx, m))
}

// Close finishes the stream (FIN); the client sees a clean end.
func (e *EventStream) Close() error { return e.s.Close() }

// Abort resets the stream.
func (e *EventStream) Abort() { e.s.CancelWrite(0) }
