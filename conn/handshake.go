package conn

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"
)

// This file holds the per-stream auth handshake of both sides.

// authenticate writes the auth frame and reads the broker's answer.
func (c *Client) authenticate(ctx context.Context, s *quic.Stream, r *felix.Reader, w *frameWriter) (felix.Capabilities, error) {
	offer := c.offer
	if c.cfg.TokenFunc != nil {
		tok, err := c.cfg.TokenFunc(ctx)
		if err != nil {
			return felix.Capabilities{}, err
		}
		offer.Token = tok
	}
	if err := writeCtx(ctx, func(ctx context.Context) error { return w.writeMessage(ctx, offer.Auth()) }); err != nil {
		return felix.Capabilities{}, err
	}
	f, _, err := readFrameCtx(ctx, r, s)
	if err != nil {
		if err == io.EOF {
			return felix.Capabilities{}, protocolErr("stream ended before the auth answer")
		}
		return felix.Capabilities{}, clientErr("read auth answer", err)
	}
	if c.cfg.Hooks != nil {
		c.cfg.Hooks.frameRead(SideClient, int64(s.StreamID()), c.qc.RemoteAddr(), f)
	}
	if f.Flags != 0 {
		return felix.Capabilities{}, protocolErr("binary frame %s in answer to auth", f.Flags)
	}
	m, err := felix.DecodeMessage(f.Payload)
	if err != nil {
		return felix.Capabilities{}, err
	}
	if em, ok := m.(*felix.ErrorMessage); ok {
		be := brokerErrorFrom(em)
		be.Auth = true
		return felix.Capabilities{}, be
	}
	caps, err := felix.CapabilitiesFromAnswer(m)
	if err != nil {
		return felix.Capabilities{}, protocolErr("answer to auth: %v", err)
	}
	return caps, nil
}

// holdAuthBytes reserves the payload of st's auth frame (its header is in
// st.peek) from the connection's pre-auth byte budget, waiting at most
// until st's auth deadline; it returns false when the deadline passed.
func (c *ServerConn) holdAuthBytes(st *Stream) (int64, bool) {
	h, err := felix.ParseHeaderLenient(st.peek[:])
	if err != nil || h.Length > c.l.cfg.PreAuthMaxFrameBytes {
		return 0, true // refused from the header by readAuthFrame
	}
	ctx := context.Background()
	if !st.authDeadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, st.authDeadline)
		defer cancel()
	}
	n, err := c.preBudget.acquire(ctx, int64(h.Length))
	return n, err == nil
}

// handshake reads and answers the auth frame of st within its deadline.
// It returns hsOK when st authenticated; hsYield when the auth frame's
// header has not arrived within preAuthSlice and another stream waits for
// the read slot (nothing was consumed); hsFailed when st was answered and
// ended, reset, or found ended.
func (c *ServerConn) handshake(st *Stream) handshakeResult {
	cfg := &c.l.cfg
	// Wait for a whole header without consuming it.
	for {
		c.armHeaderWait(st)
		n, err := st.recv.Peek(st.peek[:])
		c.endHeaderWait(st)
		if err == nil {
			break
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if !st.authDeadline.IsZero() && !time.Now().Before(st.authDeadline) {
				c.l.st.expiredStreams.Add(1)
				c.log.Debug("stream refused", "reason", "authentication timeout")
				resetStream(st.recv, st.send, ResetAuthTimeout)
				return hsFailed
			}
			if c.othersWaiting() {
				st.recv.SetReadDeadline(time.Time{})
				return hsYield
			}
			continue
		}
		if errors.Is(err, io.EOF) && n < felix.HeaderLen {
			// Ended before a whole header: a clean end of stream (spec
			// docs/frame.md §6), not an error.
			st.eof = true
			st.Close()
			return hsFailed
		}
		c.log.Debug("auth frame unreadable", "err", err)
		st.Abort()
		return hsFailed
	}
	if !st.authDeadline.IsZero() {
		st.recv.SetReadDeadline(st.authDeadline)
	} else {
		st.recv.SetReadDeadline(time.Time{})
	}
	// The auth frames being read on the connection hold at most
	// DefaultPreAuthConnWindow between them: a frame that does not fit
	// waits (within its deadline) for the others to be read.
	held, ok := c.holdAuthBytes(st)
	if !ok {
		c.l.st.expiredStreams.Add(1)
		c.log.Debug("stream refused", "reason", "authentication timeout")
		resetStream(st.recv, st.send, ResetAuthTimeout)
		return hsFailed
	}
	defer c.preBudget.release(held)
	st.r = authReader(st.recv, cfg.PreAuthMaxFrameBytes)
	f, err := st.r.ReadFrame()
	st.recv.SetReadDeadline(time.Time{})
	// Answers are bounded by the stream's deadline too: a client that does
	// not read them (a zero flow-control window) cannot hold the slot.
	wctx, cancel := c.authWriteCtx(st)
	defer cancel()
	if err != nil {
		switch {
		case errors.Is(err, felix.ErrFrameTooLarge):
			c.l.st.oversize.Add(1)
			c.log.Debug("auth frame too large", "err", err)
			st.refuse(wctx, &felix.BrokerError{Type: "error", Message: "auth frame too large", Code: felix.CodeLimitExceeded})
		case errors.Is(err, os.ErrDeadlineExceeded):
			c.l.st.expiredStreams.Add(1)
			c.log.Debug("stream refused", "reason", "authentication timeout")
			resetStream(st.recv, st.send, ResetAuthTimeout)
		default:
			c.log.Debug("auth frame unreadable", "err", err)
			st.Abort()
		}
		return hsFailed
	}
	if cfg.Hooks != nil {
		cfg.Hooks.frameRead(SideServer, streamID(st.recv), c.qc.RemoteAddr(), f)
	}
	var a *felix.Auth
	if f.Flags == 0 {
		m, derr := felix.DecodeMessage(f.Payload)
		if derr != nil {
			c.log.Debug("auth frame undecodable", "err", derr)
			st.Abort()
			return hsFailed
		}
		a, _ = m.(*felix.Auth)
	}
	if a == nil {
		// Until a stream authenticates the client is assumed to be an
		// original v1 client: no codes.
		st.refuse(wctx, &felix.BrokerError{Type: "error", Message: "auth required", Code: felix.CodeUnauthenticated})
		return hsFailed
	}
	answer, peer := cfg.Offer.Answer(a)
	if cfg.LegacyAuth {
		answer, peer = &felix.OK{}, felix.UnauthenticatedPeer()
		peer.Legacy = true
	}
	st.peer = peer
	var ident any
	if cfg.Authenticate != nil {
		ident, err = cfg.Authenticate(context.WithValue(c.qc.Context(), connCtxKey{}, c), a)
	}
	if err != nil {
		var be *felix.BrokerError
		if !errors.As(err, &be) {
			be = &felix.BrokerError{Type: "error", Message: "auth failed", Code: felix.CodeUnauthenticated}
		}
		c.log.Debug("auth rejected", "tenant", a.TenantID, "err", err)
		if be.Code == felix.CodeDraining && !st.peer.ErrorCodes() {
			// A draining broker answers only clients that can read the
			// code; older clients get no answer until the connection
			// closes.
			<-c.qc.Context().Done()
			st.Abort()
			return hsFailed
		}
		st.refuse(wctx, be)
		return hsFailed
	}
	// The connection is authenticated (and charged to its tenant) before
	// the answer is written: a client that read its auth_ok must not find
	// its connection evicted as unauthenticated meanwhile.
	first, refusal := c.setAuthed(a.TenantID)
	if refusal != nil {
		c.log.Debug("auth refused", "tenant", a.TenantID, "reason", refusal.Reason)
		st.refuse(wctx, refusal)
		return hsFailed
	}
	if first && c.timer != nil {
		// The connection's timer stops; every other unauthenticated
		// stream keeps its own deadline.
		c.timer.Stop()
	}
	if st.w != nil {
		if err := st.w.writeMessage(wctx, answer); err != nil {
			st.Abort()
			return hsFailed
		}
		// From now on its answers count against the connection's answer
		// budget and bound (the auth answers above are bounded by the
		// stream's deadline and never wait for room).
		st.w.ab = c.answers.forTenant(a.TenantID)
	}
	st.auth = a
	st.identity = ident
	// The same reader reads the requests, their buffer reused and grown
	// as a request reader's.
	st.r.SetMaxPayload(cfg.MaxFrameBytes)
	st.r.SetFreshPayloads(false)
	st.r.SetGrowChunk(0)
	return hsOK
}

// authWriteCtx bounds the answer to an auth frame by the stream's deadline
// (the connection's lifetime when there is none).
func (c *ServerConn) authWriteCtx(st *Stream) (context.Context, context.CancelFunc) {
	if st.authDeadline.IsZero() {
		return context.WithCancel(c.qc.Context())
	}
	return context.WithDeadline(c.qc.Context(), st.authDeadline)
}

// authFrameChunk bounds how far an auth frame's payload buffer is
// allocated ahead of the bytes received (felix.Reader.SetGrowChunk).
const authFrameChunk = 1 << 10

// authReader returns the reader of a stream's auth frame: at most max
// payload bytes, flags checked by the handshake (any frame but a JSON auth
// is answered "auth required"), a payload of its own (the Auth decoded
// from it is kept), and a buffer that grows with the bytes received, not
// the announced length, so a stalled auth frame costs the server about
// what the client sent.
func authReader(src io.Reader, max uint32) *felix.Reader {
	r := felix.NewReader(src)
	r.SetMaxPayload(max)
	r.SetLenientFlags(true)
	r.SetFreshPayloads(true)
	r.SetGrowChunk(authFrameChunk)
	return r
}
