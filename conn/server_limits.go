package conn

import (
	"errors"
	"sync/atomic"

	"github.com/quic-go/quic-go"

	"github.com/flxproto/felix"
)

// Server limits: what one client (authenticated or not) can make a
// Listener hold, and how each excess is refused. All are ServerConfig
// fields with these defaults.
//
//	limit                            default       refusal
//	established connections          8192          QUIC CONNECTION_REFUSED during the handshake
//	unauthenticated connections      256           the oldest closed, CloseAuthTimeout (server_unauth.go)
//	handshakes in progress           1024          QUIC CONNECTION_REFUSED (server_handshake.go)
//	  from one verified address      8             QUIC CONNECTION_REFUSED (MaxHandshakesPerAddr)
//	  before a Retry is asked for    64            QUIC Retry (source address validation)
//	streams per connection           1024 + 1024   QUIC STREAM_LIMIT_ERROR (the client cannot open more)
//	unauthenticated streams          32            stream reset at once, code ResetPreAuthBudget;
//	  (until a stream authenticated; then MaxStreams bounds them)
//	  as many again refused          -             connection closed, CloseAuthTimeout
//	auth frame bytes being read      96 KiB        the next auth frame waits
//	unauthenticated streams read     8 at a time   others wait in a bounded queue
//	time to authenticate a stream    10 s          stream reset, code ResetAuthTimeout
//	time to authenticate a conn      10 s          connection closed, CloseAuthTimeout
//	frame before auth                64 KiB        error "auth frame too large", stream ended
//	frame after auth                 16 MiB        error limit_exceeded, stream ended
//	request bytes held per conn      16 MiB        the stream waits before reading the payload
//	answer bytes being written       16 MiB        the answer waits (holding no copy), within:
//	  per tenant, all connections    64 MiB        the answer waits (holding no copy), within:
//	  on all connections together    512 MiB       the answer waits (holding no copy), within:
//	one answer write                 30 s          ErrAnswerTimeout, stream reset
//	unread bytes per connection      1 MiB         QUIC flow control (the client waits):
//	  (the receive window after auth; MaxConnReceiveWindow, at most MaxConnInFlightBytes)
//	  per tenant, growth above 96 KiB 4 MiB        the window stays as it is (server_tenant.go)
//	authenticated conns per tenant   32            error limit_exceeded, reason max_tenant_conns
//	unread bytes before auth         96 KiB        QUIC flow control (the window does not grow)
//
// Memory of a connection that never authenticates: at most
// DefaultPreAuthConnWindow of unread data in QUIC, auth frames being read
// of at most DefaultPreAuthConnWindow together, at most 32
// unauthenticated streams (8 read, the rest queued), QUIC's state for at
// most 2 × 32 + 1 streams (one more refused stream closes the connection),
// and about 15 goroutines: about 0.4 MiB derived (≈ 100 MiB at the
// DefaultMaxUnauthConns connections that may be unauthenticated at once), when the unread data arrives in STREAM frames of
// a packet's size, as a client's writes send it. quic-go keeps every STREAM frame it received
// and the server has not read as an allocation of its own (a packet
// buffer of 1.5 KiB for 128 bytes or more, about 125 bytes in all for a
// 1-byte frame), so a client that splits the window into tiny frames
// makes the server hold up to about 125 times the window, about 12 MiB
// per connection (TestServerLimitsMemoryUnderTinyFrames): the window
// bounds it, nothing here bounds it lower, so MaxUnauthConns bounds how
// many connections are unauthenticated at once (256: ≈ 3 GiB in that
// worst case instead of ≈ 94 GiB at DefaultMaxConnections; docs/limits.md
// §2.1, server_unauth.go). Measured by TestServerLimitsMemoryUnderStreamFlood
// (8 connections from another process opening as many streams of both
// kinds as they may without being closed, slowloris headers, 200 unread
// bytes per stream): 210 to 240 KiB of heap and stacks per connection
// (≈ 60 MiB at DefaultMaxUnauthConns), which the test asserts to stay
// under 320 KiB. A handshake that never completes costs 50 to 63 KiB
// (TestServerLimitsMemoryHalfOpenHandshakes; ≈ 64 MiB at
// DefaultMaxHandshakes).
//
// An authenticated connection has a receive window of its own
// (MaxConnReceiveWindow, 1 MiB), which bounds its unread bytes in quic-go:
// about 160 MiB per connection when a client sends them as 1-byte frames
// to streams waiting for the request budget
// (TestServerLimitsMemoryUnderTinyFramesAfterAuth; docs/limits.md §2.1),
// and a tenant's connections together at most MaxTenantConns initial
// windows and MaxTenantWindowGrowth (server_tenant.go).
// An authenticated connection may also hold, per stream, a read buffer of
// up to 16 KiB between frames (larger ones are dropped after their frame),
// and the request, answer and unread bytes above. Idle authenticated streams
// cost what the embedding spends on them: with one goroutine per stream
// blocked in ReadRequest, TestServerLimitsMemoryAuthenticatedIdleStreams
// measures about 7.7 MiB for 1024 idle bidi streams (asserted ≤ 12 MiB).
const (
	// DefaultMaxConnections is ServerConfig.MaxConnections
	// (max_client_connections, docs/transport.md §6).
	DefaultMaxConnections = 8192
	// DefaultMaxUnauthStreams is ServerConfig.MaxUnauthStreams, the
	// unauthenticated streams of a connection none of whose streams
	// authenticated yet: four times DefaultPreAuthStreams. conn.Client
	// authenticates its publish stream in Dial, before any other, so its
	// bursts (a stream per subscription or watch being set up) come once
	// the connection is authenticated, when MaxStreams bounds them.
	DefaultMaxUnauthStreams = 32
	// DefaultMaxConnInFlightBytes is ServerConfig.MaxConnInFlightBytes
	// (docs/transport.md §6: per-connection in-flight publish bytes).
	DefaultMaxConnInFlightBytes = 16 << 20
	// DefaultMaxConnReceiveWindow is ServerConfig.MaxConnReceiveWindow:
	// the most a connection's QUIC receive window (and each of its
	// streams') grows to once one of its streams authenticated, so the
	// most a client can have sent that the server has not read. Sent as
	// 1-byte STREAM frames to streams the server is not reading (one
	// stream holding the whole request budget), unread bytes cost quic-go
	// about 160 bytes each: measured 160 MiB per connection at 1 MiB
	// (TestServerLimitsMemoryUnderTinyFramesAfterAuth), where the former
	// window of DefaultMaxConnInFlightBytes allowed about 2.5 GiB. The
	// window also caps one connection's upload at window ÷ RTT: 1 MiB
	// carries about 20 MiB/s at a 50 ms RTT, 1 GiB/s at 1 ms.
	DefaultMaxConnReceiveWindow = 1 << 20
	// DefaultMaxAnswerBytes is ServerConfig.MaxAnswerBytes: the answer
	// bytes being written on all of a listener's connections together (32
	// connections' worth of DefaultMaxConnInFlightBytes, 8 tenants' worth
	// of DefaultMaxTenantAnswerBytes).
	DefaultMaxAnswerBytes = 512 << 20
	// DefaultMaxTenantAnswerBytes is ServerConfig.MaxTenantAnswerBytes:
	// the answer bytes being written for one tenant on all connections
	// together.
	DefaultMaxTenantAnswerBytes = 64 << 20
	// DefaultPreAuthConnWindow is the initial QUIC receive window of a
	// server connection and of each of its streams: all a client can send
	// before one of its streams authenticated. It is also the size of the
	// connection's budget for the auth frames being read. It holds one
	// auth frame of felix.PreAuthMaxFrameBytes with its header and about
	// 32 KiB to spare for the small auth frames of the client's other
	// streams (a larger ServerConfig.PreAuthMaxFrameBytes raises both by
	// as much: preAuthWindow).
	DefaultPreAuthConnWindow = 96 << 10
)

// Stream reset codes of a server refusing an unauthenticated stream. A
// stream refused this way was never read: nothing it carried was applied.
const (
	// ResetPreAuthBudget resets a stream opened while the connection
	// already had ServerConfig.MaxUnauthStreams unauthenticated streams.
	ResetPreAuthBudget quic.StreamErrorCode = 0x101
	// ResetAuthTimeout resets a stream that did not authenticate within
	// ServerConfig.AuthTimeout of its arrival.
	ResetAuthTimeout quic.StreamErrorCode = 0x102
)

// preAuthSpare is the part of DefaultPreAuthConnWindow left beside one
// auth frame of felix.PreAuthMaxFrameBytes and its header, for the small
// auth frames of the client's other new streams. The window must hold a
// whole frame of the default limit, or a client sending one would depend
// on the server reading it while it arrives: the array length below is
// negative, and the package does not compile, otherwise.
const preAuthSpare = DefaultPreAuthConnWindow - felix.PreAuthMaxFrameBytes - felix.HeaderLen

var _ [preAuthSpare]struct{}

// preAuthWindow is the pre-auth receive window and auth frame budget of a
// connection for c: DefaultPreAuthConnWindow, or, when c raises
// PreAuthMaxFrameBytes, one such frame with its header and preAuthSpare.
func preAuthWindow(c *ServerConfig) uint64 {
	return max(uint64(DefaultPreAuthConnWindow), uint64(c.PreAuthMaxFrameBytes)+felix.HeaderLen+preAuthSpare)
}

// errTooManyConnections is the cause quic-go logs for a refused connection.
var errTooManyConnections = errors.New("conn: max_client_connections reached")

// ListenerStats counts what a Listener refused, for an operator.
type ListenerStats struct {
	// Connections is the number of established connections (their
	// handshake completed), the figure MaxConnections caps.
	Connections int64
	// Handshakes is the number of handshakes in progress, the figure
	// MaxHandshakes caps.
	Handshakes int64
	// UnauthConnections is the number of accepted connections none of
	// whose streams authenticated yet, the figure MaxUnauthConns caps.
	UnauthConnections int64
	// UnauthEvicted counts unauthenticated connections closed to make room
	// for a new one at MaxUnauthConns (server_unauth.go).
	UnauthEvicted uint64
	// RefusedConnections counts connections refused at MaxConnections.
	RefusedConnections uint64
	// RefusedHandshakes counts handshakes refused at MaxHandshakes or
	// MaxHandshakesPerAddr.
	RefusedHandshakes uint64
	// Retries counts Initial packets answered with a Retry (source
	// address validation) instead of a handshake.
	Retries uint64
	// RefusedStreams counts streams reset beyond MaxUnauthStreams.
	RefusedStreams uint64
	// ExpiredStreams counts streams reset for not authenticating in time.
	ExpiredStreams uint64
	// OversizeFrames counts frames refused for exceeding a frame limit.
	OversizeFrames uint64
	// AnswerTimeouts counts answers not taken within AnswerWriteTimeout.
	AnswerTimeouts uint64
	// RefusedTenantConns counts first auths of a connection refused at
	// MaxTenantConns.
	RefusedTenantConns uint64
	// RefusedWindowGrowth counts receive window increases refused at
	// MaxTenantWindowGrowth (the connection kept its window).
	RefusedWindowGrowth uint64
	// AnswersWaiting is the number of answers waiting now for room in
	// their connection's answer budget (their clients read slowly or not
	// at all).
	AnswersWaiting int64
}

type listenerCounters struct {
	live                                         atomic.Int64 // established connections
	unauthLive                                   atomic.Int64 // len(Listener.unauth)
	unauthEvicted                                atomic.Uint64
	answersWaiting                               atomic.Int64
	refusedConns, refusedStreams, expiredStreams atomic.Uint64
	refusedHandshakes, retries, answerTimeouts   atomic.Uint64
	oversize                                     atomic.Uint64
	refusedTenantConns, refusedGrowth            atomic.Uint64
}

// Stats returns the listener's counters.
func (l *Listener) Stats() ListenerStats {
	return ListenerStats{
		Connections:         l.st.live.Load(),
		Handshakes:          l.adm.handshaking.Load(),
		UnauthConnections:   l.st.unauthLive.Load(),
		UnauthEvicted:       l.st.unauthEvicted.Load(),
		RefusedConnections:  l.st.refusedConns.Load(),
		RefusedHandshakes:   l.st.refusedHandshakes.Load(),
		Retries:             l.st.retries.Load(),
		RefusedStreams:      l.st.refusedStreams.Load(),
		ExpiredStreams:      l.st.expiredStreams.Load(),
		OversizeFrames:      l.st.oversize.Load(),
		AnswerTimeouts:      l.st.answerTimeouts.Load(),
		AnswersWaiting:      l.st.answersWaiting.Load(),
		RefusedTenantConns:  l.st.refusedTenantConns.Load(),
		RefusedWindowGrowth: l.st.refusedGrowth.Load(),
	}
}

// applyLimits fills the zero limits of c with their defaults.
func (c *ServerConfig) applyLimits() {
	if c.MaxUnauthStreams <= 0 {
		c.MaxUnauthStreams = DefaultMaxUnauthStreams
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = DefaultMaxConnections
	}
	if c.MaxUnauthConns == 0 {
		c.MaxUnauthConns = DefaultMaxUnauthConns
	}
	if c.MaxHandshakes == 0 {
		c.MaxHandshakes = DefaultMaxHandshakes
	}
	if c.RetryHandshakes == 0 {
		c.RetryHandshakes = DefaultRetryHandshakes
	}
	if c.AnswerWriteTimeout == 0 {
		c.AnswerWriteTimeout = DefaultAnswerWriteTimeout
	}
	if c.MaxConnInFlightBytes == 0 {
		c.MaxConnInFlightBytes = DefaultMaxConnInFlightBytes
	}
	if c.MaxConnReceiveWindow == 0 {
		c.MaxConnReceiveWindow = DefaultMaxConnReceiveWindow
	}
	if c.MaxAnswerBytes == 0 {
		c.MaxAnswerBytes = DefaultMaxAnswerBytes
	}
	if c.MaxTenantAnswerBytes == 0 {
		c.MaxTenantAnswerBytes = DefaultMaxTenantAnswerBytes
	}
	if c.MaxHandshakesPerAddr == 0 {
		c.MaxHandshakesPerAddr = DefaultMaxHandshakesPerAddr
	}
	if c.MaxTenantConns == 0 {
		c.MaxTenantConns = DefaultMaxTenantConns
	}
	if c.MaxTenantWindowGrowth == 0 {
		c.MaxTenantWindowGrowth = DefaultMaxTenantWindowGrowth
	}
}

// serverQUIC returns the listener's QUIC configuration: the stream limits
// and windows of c (where c.QUIC leaves them zero), and a window gate that
// keeps a connection's receive window at its initial size until one of its
// streams authenticated.
func (l *Listener) serverQUIC(c *ServerConfig) *quic.Config {
	userSet := func(get func(*quic.Config) uint64) bool { return c.QUIC != nil && get(c.QUIC) != 0 }
	var base *quic.Config
	if c.QUIC != nil {
		base = c.QUIC
	}
	q := quicConfig(base, true) // a clone
	if c.QUIC == nil || c.QUIC.MaxIncomingStreams == 0 {
		q.MaxIncomingStreams = c.MaxStreams
	}
	if c.QUIC == nil || c.QUIC.MaxIncomingUniStreams == 0 {
		q.MaxIncomingUniStreams = c.MaxStreams
	}
	if c.QUIC == nil || c.QUIC.HandshakeIdleTimeout == 0 {
		q.HandshakeIdleTimeout = DefaultHandshakeIdleTimeout
	}
	win := receiveWindow(c)
	pre := min(preAuthWindow(c), win)
	if !userSet(func(q *quic.Config) uint64 { return q.InitialStreamReceiveWindow }) {
		q.InitialStreamReceiveWindow = pre
	}
	if !userSet(func(q *quic.Config) uint64 { return q.InitialConnectionReceiveWindow }) {
		q.InitialConnectionReceiveWindow = pre
	}
	if !userSet(func(q *quic.Config) uint64 { return q.MaxStreamReceiveWindow }) {
		q.MaxStreamReceiveWindow = win
	}
	if !userSet(func(q *quic.Config) uint64 { return q.MaxConnectionReceiveWindow }) {
		q.MaxConnectionReceiveWindow = win
	}
	inner := q.AllowConnectionWindowIncrease
	q.AllowConnectionWindowIncrease = func(qc *quic.Conn, delta uint64) bool {
		return (inner == nil || inner(qc, delta)) && l.windowMayGrow(qc, delta)
	}
	return q
}

// receiveWindow is the most a connection's receive window grows to for c:
// MaxConnReceiveWindow, at most MaxConnInFlightBytes (a smaller request
// budget lowers the window too, as before the two were separate), and at
// least the pre-auth window (an auth frame of the pre-auth limit fits).
func receiveWindow(c *ServerConfig) uint64 {
	return min(max(c.MaxConnReceiveWindow, preAuthWindow(c)), c.MaxConnInFlightBytes)
}

// windowMayGrow reports whether qc's receive window may grow by delta:
// only once one of its streams authenticated, and within its tenant's
// MaxTenantWindowGrowth (which it charges; server_tenant.go).
func (l *Listener) windowMayGrow(qc *quic.Conn, delta uint64) bool {
	v, ok := l.byQUIC.Load(qc)
	if !ok {
		return false
	}
	ch := v.(*ServerConn).tenant.Load()
	return ch != nil && ch.allowGrowth(delta)
}

// resetStream refuses a client stream that was never read.
func resetStream(recv receiver, send sender, code quic.StreamErrorCode) {
	if send != nil {
		send.CancelWrite(code)
	}
	recv.CancelRead(code)
}
