package conn

import (
	"context"
	"errors"
	"net"
	"slices"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/fanout"
)

// Hooks observes a client (Config.Hooks) or a listener (ServerConfig.Hooks)
// for metrics and tracing. Every field is optional; a nil *Hooks, or a nil
// field, costs one pointer comparison at the place the event happens
// (BenchmarkPublishHooks measures it). Hooks are called synchronously,
// possibly concurrently, from the goroutine that saw the event (a reader,
// a writer, an accept loop); they must be quick and must not block or call
// back into the connection. The info values are passed by value and never
// retained by this package.
//
// Several observers attach to one client or listener through JoinHooks,
// which returns one Hooks calling each of them in order. The events of the
// cluster-aware client's own decisions (redirects, retries, resumes, lag
// handling) are declared by package client (client.Notice), not here.
//
// This package depends on no metrics library: examples/metrics adapts Hooks
// to the Prometheus client.
type Hooks struct {
	// ConnOpened: a connection finished its QUIC handshake (client: Dial,
	// before the first stream authenticated; server: Accept).
	ConnOpened func(ConnInfo)
	// ConnClosed: the connection ended; Err is the reason (the QUIC close
	// error, or the context cause of a local close).
	ConnClosed func(ConnInfo)
	// StreamAuthenticated: a stream's auth was answered positively (the
	// client side: the broker's answer to its auth; the server side: the
	// Authenticator accepted it).
	StreamAuthenticated func(StreamInfo)
	// StreamRefused: a stream's auth was refused, or the stream was reset
	// or ended before authenticating; Err says why (a *felix.BrokerError for an
	// answered refusal).
	StreamRefused func(StreamInfo)
	// FrameRead and FrameWritten: one whole frame crossed a stream. On the
	// server side only frames of streams taken by the listener's own code
	// are seen (auth frames, requests read with Stream.ReadRequest, every
	// frame written), not bytes an application reads itself.
	FrameRead, FrameWritten func(FrameInfo)
	// PublishSent: a publish batch was written (client only).
	PublishSent func(PublishInfo)
	// PublishAcked: the answer to an acknowledged publish arrived, or the
	// publish failed before its answer (client only). Latency runs from
	// just before the batch was written to the answer's arrival.
	PublishAcked func(PublishInfo)
	// SubscriptionLagged: a subscription or cache watch ended with
	// subscription_lagged / cache_watch_lagged (client only).
	SubscriptionLagged func(LagInfo)
}

// Side says which end of a connection reports an event.
type Side uint8

// Sides.
const (
	SideClient Side = iota + 1
	SideServer
)

// String returns "client" or "server".
func (s Side) String() string {
	switch s {
	case SideClient:
		return "client"
	case SideServer:
		return "server"
	}
	return "unknown"
}

// ConnInfo describes a connection.
type ConnInfo struct {
	Side          Side
	Local, Remote net.Addr
	// ALPN is the negotiated ALPN id ("" when none).
	ALPN string
	// Err is why the connection closed (ConnClosed only).
	Err error
}

// StreamInfo describes a stream's authentication.
type StreamInfo struct {
	Side   Side
	Remote net.Addr
	// StreamID is the QUIC stream id.
	StreamID int64
	// TenantID is the tenant the auth named ("" when no auth was read).
	TenantID string
	// Err is why the stream was refused (StreamRefused only).
	Err error
}

// FrameInfo describes one frame read or written.
type FrameInfo struct {
	Side Side
	// Remote is the peer's address: it tells the connection apart.
	Remote   net.Addr
	StreamID int64
	// Flags is the frame's flag word; Layout the payload layout it selects.
	Flags  felix.Flags
	Layout felix.Layout
	// Bytes is the whole frame's size, header included.
	Bytes int
}

// PublishInfo describes a publish batch.
type PublishInfo struct {
	// StreamID is the QUIC id of the publish stream.
	StreamID int64
	// RequestID is the batch's request id (0 when not acknowledged).
	RequestID uint64
	// Records is the number of records in the batch.
	Records int
	// Acked reports an acknowledged publish.
	Acked bool
	// Latency is the time from the write to the answer (PublishAcked).
	Latency time.Duration
	// Outcome is "ok", the broker's error code when it sent one, "error"
	// for an error answer without a code, or "failed" when no answer came
	// (the stream or connection ended); PublishAcked only.
	Outcome string
	// Err is the publish's error (PublishAcked; nil when Outcome is "ok").
	Err error
}

// LagInfo describes a subscription or cache watch that lagged.
type LagInfo struct {
	// SubscriptionID is the subscription's id (0 for a cache watch).
	SubscriptionID uint64
	// ResumeFrom is the offset to resubscribe from.
	ResumeFrom uint64
	// Watch reports a cache watch.
	Watch bool
}

// JoinHooks returns one Hooks that calls, for every event, the hooks of
// each non-nil element of hs in order. A field is set in the result only
// when at least one element sets it, and a field set by exactly one
// element is that element's function itself, so joining costs nothing on
// the events no one observes and nothing extra on those only one observes.
// JoinHooks returns nil when every element is nil, and the element itself
// when only one is non-nil. The elements are read once: changing them
// afterwards does not change the result.
func JoinHooks(hs ...*Hooks) *Hooks {
	set := slices.DeleteFunc(slices.Clone(hs), func(h *Hooks) bool { return h == nil })
	switch len(set) {
	case 0:
		return nil
	case 1:
		return set[0]
	}
	return &Hooks{
		ConnOpened:          join(set, func(h *Hooks) func(ConnInfo) { return h.ConnOpened }),
		ConnClosed:          join(set, func(h *Hooks) func(ConnInfo) { return h.ConnClosed }),
		StreamAuthenticated: join(set, func(h *Hooks) func(StreamInfo) { return h.StreamAuthenticated }),
		StreamRefused:       join(set, func(h *Hooks) func(StreamInfo) { return h.StreamRefused }),
		FrameRead:           join(set, func(h *Hooks) func(FrameInfo) { return h.FrameRead }),
		FrameWritten:        join(set, func(h *Hooks) func(FrameInfo) { return h.FrameWritten }),
		PublishSent:         join(set, func(h *Hooks) func(PublishInfo) { return h.PublishSent }),
		PublishAcked:        join(set, func(h *Hooks) func(PublishInfo) { return h.PublishAcked }),
		SubscriptionLagged:  join(set, func(h *Hooks) func(LagInfo) { return h.SubscriptionLagged }),
	}
}

// join combines the field get of each of hs: nil when none sets it, the
// one function when one does, else a function calling each in order.
func join[T any](hs []*Hooks, get func(*Hooks) func(T)) func(T) {
	fns := make([]func(T), len(hs))
	for i, h := range hs {
		fns[i] = get(h)
	}
	return fanout.Join(fns...)
}

// The helpers below are called at the event sites; each checks for a nil
// receiver and field first, so an unset hook costs a comparison.

func (h *Hooks) frame(read bool, side Side, sid int64, remote net.Addr, b []byte) {
	if h == nil {
		return
	}
	fn := h.FrameWritten
	if read {
		fn = h.FrameRead
	}
	if fn == nil || len(b) < felix.HeaderLen {
		return
	}
	hd, err := felix.ParseHeaderLenient(b)
	if err != nil {
		return
	}
	fn(FrameInfo{Side: side, Remote: remote, StreamID: sid, Flags: hd.Flags, Layout: hd.Flags.Layout(), Bytes: len(b)})
}

// frameRead reports a frame read as a felix.Frame (header and payload).
func (h *Hooks) frameRead(side Side, sid int64, remote net.Addr, f felix.Frame) {
	if h == nil || h.FrameRead == nil {
		return
	}
	h.FrameRead(FrameInfo{Side: side, Remote: remote, StreamID: sid, Flags: f.Flags, Layout: f.Flags.Layout(), Bytes: felix.HeaderLen + len(f.Payload)})
}

func (h *Hooks) connOpened(ev ConnInfo) {
	if h != nil && h.ConnOpened != nil {
		h.ConnOpened(ev)
	}
}

func (h *Hooks) streamAuthenticated(ev StreamInfo) {
	if h != nil && h.StreamAuthenticated != nil {
		h.StreamAuthenticated(ev)
	}
}

func (h *Hooks) streamRefused(ev StreamInfo) {
	if h != nil && h.StreamRefused != nil {
		h.StreamRefused(ev)
	}
}

func (h *Hooks) lagged(err error) {
	if h == nil || h.SubscriptionLagged == nil {
		return
	}
	var le *felix.LaggedError
	if errors.As(err, &le) {
		h.SubscriptionLagged(LagInfo{SubscriptionID: le.SubscriptionID, ResumeFrom: le.ResumeFrom, Watch: le.Watch})
	}
}

// wantsAckTime reports whether acknowledged publishes must be timed.
func (h *Hooks) wantsAckTime() bool { return h != nil && h.PublishAcked != nil }

// ackOutcome names the outcome of an acknowledged publish.
func ackOutcome(err error) string {
	if err == nil {
		return "ok"
	}
	var be *felix.BrokerError
	if errors.As(err, &be) {
		if be.Code != "" {
			return string(be.Code)
		}
		return "error"
	}
	return "failed"
}

// streamID returns the QUIC id of a stream, -1 when s has none.
func streamID(s any) int64 {
	if x, ok := s.(interface{ StreamID() quic.StreamID }); ok {
		return int64(x.StreamID())
	}
	return -1
}

// ErrStreamEnded is the StreamInfo.Err of a stream that ended or was reset
// before it authenticated, without an answered refusal.
var ErrStreamEnded = errors.New("conn: stream ended before authenticating")

// observe makes fw report the frames it writes to h as stream sid of side.
func (fw *frameWriter) observe(h *Hooks, side Side, sid int64, remote net.Addr) {
	fw.hk, fw.side, fw.sid, fw.remote = h, side, sid, remote
}

// seen reports a frame read on cs (when err is nil) to the client's hooks.
func (cs *clientStream) seen(f felix.Frame, err error) {
	if err == nil && cs.hk != nil {
		cs.hk.frameRead(SideClient, int64(cs.s.StreamID()), cs.remote, f)
	}
}

// watchConn reports the client's connection to its hooks: opened now, and
// closed when it ends (a goroutine the client waits for on Close, started
// only when ConnClosed is set).
func (c *Client) watchConn() {
	h := c.cfg.Hooks
	if h == nil {
		return
	}
	ev := ConnInfo{Side: SideClient, Local: c.qc.LocalAddr(), Remote: c.qc.RemoteAddr(), ALPN: c.qc.ConnectionState().TLS.NegotiatedProtocol}
	h.connOpened(ev)
	if h.ConnClosed == nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		<-c.qc.Context().Done()
		ev.Err = context.Cause(c.qc.Context())
		h.ConnClosed(ev)
	}()
}

// sent reports a publish batch written on ps (rid 0: not acknowledged).
func (ps *pubStream) sent(rid uint64, records int, acked bool) {
	if h := ps.cs.hk; h.PublishSent != nil {
		h.PublishSent(PublishInfo{StreamID: int64(ps.cs.s.StreamID()), RequestID: rid, Records: records, Acked: acked})
	}
}

// acked reports the answer (or failure) of the acknowledged publish pa.
func (ps *pubStream) acked(pa *pendingAnswer, a answer) {
	h := ps.cs.hk
	if !h.wantsAckTime() || pa.sent.IsZero() {
		return
	}
	_, err := publishResult(pa.rid, a)
	h.PublishAcked(PublishInfo{StreamID: int64(ps.cs.s.StreamID()), RequestID: pa.rid, Records: pa.records, Acked: true,
		Latency: time.Since(pa.sent), Outcome: ackOutcome(err), Err: err})
}

// hookInfo describes c for the hooks.
func (c *ServerConn) hookInfo() ConnInfo {
	return ConnInfo{Side: SideServer, Local: c.qc.LocalAddr(), Remote: c.qc.RemoteAddr(), ALPN: c.qc.ConnectionState().TLS.NegotiatedProtocol}
}

// Reasons of StreamRefused for streams reset without an answer.
var (
	errPreAuthBudget = errors.New("conn: stream refused: unauthenticated stream budget exhausted")
	errAuthTimeout   = errors.New("conn: stream refused: authentication timeout")
)

// hookHandshake reports the result of a stream's handshake.
func (c *ServerConn) hookHandshake(st *Stream, res handshakeResult) {
	h := c.l.cfg.Hooks
	if h == nil || res == hsYield {
		return
	}
	if res == hsOK {
		h.streamAuthenticated(StreamInfo{Side: SideServer, Remote: c.qc.RemoteAddr(), StreamID: streamID(st.recv), TenantID: st.auth.TenantID})
		return
	}
	err := st.refusal
	if err == nil {
		err = ErrStreamEnded
	}
	c.hookRefused(st, err)
}

// hookRefused reports a stream refused before it authenticated.
func (c *ServerConn) hookRefused(st *Stream, err error) {
	h := c.l.cfg.Hooks
	if h == nil || h.StreamRefused == nil {
		return
	}
	ev := StreamInfo{Side: SideServer, Remote: c.qc.RemoteAddr(), StreamID: streamID(st.recv), Err: err}
	if st.auth != nil {
		ev.TenantID = st.auth.TenantID
	}
	h.StreamRefused(ev)
}

// records counts the records of a publish (for the hooks only: a sequence
// is iterated once more).
func records(payloads [][]byte, src *payloadSource) int {
	switch {
	case src == nil || payloads != nil:
		return len(payloads)
	case src.view != nil:
		return src.view.Len()
	}
	n := 0
	for range src.seq {
		n++
	}
	return n
}
