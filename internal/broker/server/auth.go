package server

import (
	"context"
	"crypto/sha256"
	"net"
	"sync"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// Auth throttling defaults (AuthLimits).
const (
	DefaultAuthAddrBurst   = 32
	DefaultAuthAddrRate    = 4.0 // failed auths per second per source address
	DefaultAuthConnBurst   = 8
	DefaultAuthConnRate    = 1.0 // failed auths per second per connection
	DefaultAuthGlobalBurst = 256
	DefaultAuthGlobalRate  = 64.0 // failed auths per second, broker-wide
	DefaultAuthMaxWait     = 5 * time.Second
	// DefaultAuthMaxAddrs bounds the source addresses the throttle
	// remembers; beyond it a random one is forgotten.
	DefaultAuthMaxAddrs    = 1 << 16
	authRefusalLogInterval = time.Second
)

// AuthLimits throttles failed authentications. A credential is checked
// first (in time independent of the token's value): a valid one is
// accepted at once and costs nothing, whatever others did from the same
// address, so one client's failures never refuse or delay another's valid
// token. Only a failure is charged, to three token buckets: its source
// address's, its connection's and the broker-wide one (Global*). The
// failure's answer is then held back until every bucket is out of debt,
// and while it is held the connection gets no other auth checked (a
// connection's auths are checked one at a time). A failure whose wait
// would exceed MaxWait is answered auth throttled (overloaded,
// retry_after, with detail.retry_after_ms) at once and bars its
// connection: every later auth on it is refused unchecked. So beyond the
// budgets a guesser pays a new connection (a QUIC handshake) for each
// guess, and within them at most Burst + Rate×seconds failures per address
// and per connection, and GlobalBurst + GlobalRate×seconds broker-wide, are
// answered without waiting. Zero fields take the defaults.
type AuthLimits struct {
	AddrBurst   int
	AddrRate    float64
	ConnBurst   int
	ConnRate    float64
	GlobalBurst int
	GlobalRate  float64
	MaxWait     time.Duration
	// MaxAddrs bounds the address buckets held (0 = DefaultAuthMaxAddrs):
	// full buckets are forgotten once a second, and at the bound a random
	// bucket is forgotten to make room.
	MaxAddrs int
}

func (l AuthLimits) withDefaults() AuthLimits {
	if l.AddrBurst <= 0 {
		l.AddrBurst = DefaultAuthAddrBurst
	}
	if l.AddrRate <= 0 {
		l.AddrRate = DefaultAuthAddrRate
	}
	if l.ConnBurst <= 0 {
		l.ConnBurst = DefaultAuthConnBurst
	}
	if l.ConnRate <= 0 {
		l.ConnRate = DefaultAuthConnRate
	}
	if l.GlobalBurst <= 0 {
		l.GlobalBurst = DefaultAuthGlobalBurst
	}
	if l.GlobalRate <= 0 {
		l.GlobalRate = DefaultAuthGlobalRate
	}
	if l.MaxWait <= 0 {
		l.MaxWait = DefaultAuthMaxWait
	}
	if l.MaxAddrs <= 0 {
		l.MaxAddrs = DefaultAuthMaxAddrs
	}
	return l
}

// bucket is a token bucket whose balance may go negative: failures
// charged while empty are debt that time repays.
type bucket struct {
	tokens float64
	at     time.Time
}

func (b *bucket) refill(now time.Time, burst int, rate float64) {
	b.tokens = min(float64(burst), b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
}

// connAuth is a connection's throttle state.
type connAuth struct {
	bucket
	gate   chan struct{} // held while one of the connection's auths is checked and answered
	barred bool          // (throttle.mu) went over a budget: auths refused unchecked
}

// throttle holds the buckets. Full address buckets are forgotten, so its
// memory follows the addresses that failed recently, at most MaxAddrs of
// them; a connection's state goes with the connection.
type throttle struct {
	lim    AuthLimits
	now    func() time.Time
	mu     sync.Mutex
	global bucket
	addrs  map[string]*bucket
	conns  map[*conn.ServerConn]*connAuth
	swept  time.Time
}

func newThrottle(lim AuthLimits) *throttle {
	lim = lim.withDefaults()
	return &throttle{lim: lim, now: time.Now, global: bucket{tokens: float64(lim.GlobalBurst), at: time.Now()},
		addrs: make(map[string]*bucket), conns: make(map[*conn.ServerConn]*connAuth)}
}

// conn returns sc's state, made on first use and dropped when sc ends.
func (t *throttle) conn(sc *conn.ServerConn) *connAuth {
	t.mu.Lock()
	defer t.mu.Unlock()
	ca := t.conns[sc]
	if ca == nil {
		ca = &connAuth{bucket: bucket{tokens: float64(t.lim.ConnBurst), at: t.now()}, gate: make(chan struct{}, 1)}
		t.conns[sc] = ca
		context.AfterFunc(sc.Context(), func() {
			t.mu.Lock()
			delete(t.conns, sc)
			t.mu.Unlock()
		})
	}
	return ca
}

// barred reports whether ca's auths are refused unchecked, and the wait
// its address and the broker-wide budget would impose now.
func (t *throttle) barred(addr string, ca *connAuth) (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !ca.barred {
		return false, 0
	}
	now := t.now()
	t.global.refill(now, t.lim.GlobalBurst, t.lim.GlobalRate)
	wait := debtWait(t.global.tokens, t.lim.GlobalRate)
	if ab := t.addrs[addr]; ab != nil {
		ab.refill(now, t.lim.AddrBurst, t.lim.AddrRate)
		wait = max(wait, debtWait(ab.tokens, t.lim.AddrRate))
	}
	return true, wait
}

// fail charges one failed auth to its address, its connection (ca may be
// nil) and the broker-wide bucket, and returns how long to hold its
// answer. ok is false, nothing is charged and the connection is barred
// when that wait would exceed MaxWait (wait is then the wait refused).
func (t *throttle) fail(addr string, ca *connAuth) (wait time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.sweep(now)
	ab := t.addrs[addr]
	if ab == nil {
		if len(t.addrs) >= t.lim.MaxAddrs {
			for k := range t.addrs { // a random victim: map order is
				delete(t.addrs, k)
				break
			}
		}
		ab = &bucket{tokens: float64(t.lim.AddrBurst), at: now}
		t.addrs[addr] = ab
	}
	ab.refill(now, t.lim.AddrBurst, t.lim.AddrRate)
	t.global.refill(now, t.lim.GlobalBurst, t.lim.GlobalRate)
	wait = max(debtWait(ab.tokens-1, t.lim.AddrRate), debtWait(t.global.tokens-1, t.lim.GlobalRate))
	if ca != nil {
		ca.refill(now, t.lim.ConnBurst, t.lim.ConnRate)
		wait = max(wait, debtWait(ca.tokens-1, t.lim.ConnRate))
	}
	if wait > t.lim.MaxWait {
		if ca != nil {
			ca.barred = true
		}
		return wait, false
	}
	ab.tokens--
	t.global.tokens--
	if ca != nil {
		ca.tokens--
	}
	return wait, true
}

func debtWait(balance, rate float64) time.Duration {
	if balance >= 0 {
		return 0
	}
	return time.Duration(-balance / rate * float64(time.Second))
}

// sweep forgets full address buckets, at most once a second.
func (t *throttle) sweep(now time.Time) {
	if now.Sub(t.swept) < time.Second {
		return
	}
	t.swept = now
	for k, b := range t.addrs {
		b.refill(now, t.lim.AddrBurst, t.lim.AddrRate)
		if b.tokens >= float64(t.lim.AddrBurst) {
			delete(t.addrs, k)
		}
	}
}

// tracked returns how many address and connection buckets are held.
func (t *throttle) tracked() (addrs, conns int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.addrs), len(t.conns)
}

// logLimiter lets one line through per interval and counts the rest.
type logLimiter struct {
	mu         sync.Mutex
	last       time.Time
	suppressed uint64
}

func (l *logLimiter) allow(now time.Time) (ok bool, suppressed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.last) < authRefusalLogInterval {
		l.suppressed++
		return false, 0
	}
	l.last = now
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// tokenIndex finds a token's identity by the token's SHA-256: the lookup
// hashes the whole token and compares digests, so its time does not
// depend on how much of a guess matches a configured token.
type tokenIndex map[[sha256.Size]byte]Identity

func indexTokens(toks map[string]Identity) tokenIndex {
	ix := make(tokenIndex, len(toks))
	for tok, id := range toks {
		ix[sha256.Sum256([]byte(tok))] = id
	}
	return ix
}

func (ix tokenIndex) lookup(tok string) (Identity, bool) {
	id, ok := ix[sha256.Sum256([]byte(tok))]
	return id, ok
}

// errAuthFailed is the one answer to every refused credential: an unknown
// token and a token of another tenant look the same, so that an answer
// never tells a guesser that a token exists.
func errAuthFailed() *felix.BrokerError {
	return &felix.BrokerError{Type: "error", Message: "auth failed", Code: felix.CodeUnauthenticated}
}

// errAuthThrottled answers a failure over a budget, and every later auth
// of its connection: the client should come back after wait on a new
// connection.
func errAuthThrottled(wait time.Duration) *felix.BrokerError {
	return &felix.BrokerError{Type: "error", Message: "auth throttled", Code: felix.CodeOverloaded,
		Retry: felix.RetryAfter, RetryAfter: max(wait.Round(time.Millisecond), time.Millisecond)}
}

// authenticate is the conn.Authenticator of the broker (see AuthLimits).
func (s *Server) authenticate(ctx context.Context, a *felix.Auth) (any, error) {
	if s.draining.Load() {
		return nil, &felix.BrokerError{Type: "error", Message: "broker draining", Code: felix.CodeDraining}
	}
	sc, _ := conn.ConnFromContext(ctx)
	addr := ""
	var ca *connAuth
	if sc != nil {
		addr = sc.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = host
		}
		ca = s.auth.conn(sc)
		select {
		case ca.gate <- struct{}{}:
		case <-ctx.Done():
			return nil, errAuthFailed()
		}
		defer func() { <-ca.gate }()
		if barred, wait := s.auth.barred(addr, ca); barred {
			s.st.authThrottled.Add(1)
			return nil, errAuthThrottled(wait)
		}
	}
	if id, ok := s.tokens.lookup(a.Token); ok && id.Tenant == a.TenantID {
		return id, nil
	}
	s.st.authFailures.Add(1)
	wait, ok := s.auth.fail(addr, ca)
	if !ok {
		s.st.authThrottled.Add(1)
		s.logRefusal(addr, a.TenantID, "throttled")
		return nil, errAuthThrottled(wait)
	}
	s.logRefusal(addr, a.TenantID, "bad credential")
	if wait > 0 {
		s.st.authDelayed.Add(1)
		tm := time.NewTimer(wait)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
		}
	}
	return nil, errAuthFailed()
}

// logRefusal logs a refused auth at warn level, at most once per second
// (the line says how many were not logged). The token is never logged.
func (s *Server) logRefusal(addr, tenant, why string) {
	if ok, n := s.authLog.allow(time.Now()); ok {
		if len(tenant) > 64 {
			tenant = tenant[:64] + "…"
		}
		s.log.Warn("auth refused", "addr", addr, "tenant", tenant, "why", why, "suppressed", n)
	}
}
