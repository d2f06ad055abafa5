package conn

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/flxproto/felix"
	"github.com/quic-go/quic-go"
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

// handshake reads and answers the auth frame of st. It returns true when st
// authenticated; otherwise it has answered (bidi) and ended st.
func (c *ServerConn) handshake(st *Stream) bool {
	cfg := &c.l.cfg
	st.r.SetMaxPayload(cfg.PreAuthMaxFrameBytes)
	st.r.SetLenientFlags(true)
	if cfg.AuthTimeout > 0 {
		st.recv.SetReadDeadline(time.Now().Add(cfg.AuthTimeout))
	}
	f, err := st.r.ReadFrame()
	if cfg.AuthTimeout > 0 {
		st.recv.SetReadDeadline(time.Time{})
	}
	if err != nil {
		if errors.Is(err, io.EOF) || isHeaderEOF(err) {
			st.eof = true // a clean end before any request (frame.md)
			st.Close()
			return false
		}
		c.log.Debug("auth frame unreadable", "err", err)
		st.Abort()
		return false
	}
	var a *felix.Auth
	if f.Flags == 0 {
		m, derr := felix.DecodeMessage(f.Payload)
		if derr != nil {
			c.log.Debug("auth frame undecodable", "err", derr)
			st.Abort()
			return false
		}
		a, _ = m.(*felix.Auth)
	}
	if a == nil {
		// Until a stream authenticates the client is assumed to be an
		// original v1 client: no codes.
		st.refuse(c.qc.Context(), &BrokerError{Type: "error", Message: "auth required", Code: felix.CodeUnauthenticated})
		return false
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
		var be *BrokerError
		if !errors.As(err, &be) {
			be = &BrokerError{Type: "error", Message: "auth failed", Code: felix.CodeUnauthenticated}
		}
		c.log.Debug("auth rejected", "tenant", a.TenantID, "err", err)
		if be.Code == felix.CodeDraining && !st.peer.ErrorCodes() {
			// A draining broker answers only clients that can read the
			// code; older clients get no answer until the connection
			// closes.
			<-c.qc.Context().Done()
			st.Abort()
			return false
		}
		st.refuse(c.qc.Context(), be)
		return false
	}
	if st.w != nil {
		if err := st.w.writeMessage(c.qc.Context(), answer); err != nil {
			st.Abort()
			return false
		}
	}
	st.auth = a
	st.identity = ident
	st.r.SetMaxPayload(cfg.MaxFrameBytes)
	if !c.authed.Swap(true) && c.timer != nil {
		c.timer.Stop()
	}
	return true
}
