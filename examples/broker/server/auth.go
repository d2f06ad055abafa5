package server

import (
	"context"
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
	DefaultAuthMaxWait     = 5 * time.Second
	maxThrottledAddrs      = 1 << 16
	authRefusalLogInterval = time.Second
)

// AuthLimits throttles failed authentications. Each source address and
// each connection has a token bucket: a failed auth spends a token, a
// successful one spends none. An auth that arrives while a bucket is empty
// waits until the bucket refills before its token is even looked at, so a
// guesser gets at most Burst + Rate×seconds checks per address (and per
// connection), whatever it sends. An auth whose wait would exceed MaxWait
// is refused at once, unchecked, with overloaded (retry_after, with
// detail.retry_after_ms): that answer depends only on the throttle, never
// on the token, so it tells a guesser nothing about the credential, and a
// legitimate client behind the same address knows to come back. Zero
// fields take the defaults.
type AuthLimits struct {
	AddrBurst int
	AddrRate  float64
	ConnBurst int
	ConnRate  float64
	MaxWait   time.Duration
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
	if l.MaxWait <= 0 {
		l.MaxWait = DefaultAuthMaxWait
	}
	return l
}

// bucket is a token bucket whose balance may go negative: reservations
// taken while empty are debt that time repays.
type bucket struct {
	tokens float64
	at     time.Time
}

func (b *bucket) refill(now time.Time, burst int, rate float64) {
	b.tokens = min(float64(burst), b.tokens+now.Sub(b.at).Seconds()*rate)
	b.at = now
}

// throttle holds the buckets. Full buckets are forgotten, so its memory
// follows the addresses and connections that failed recently.
type throttle struct {
	lim   AuthLimits
	now   func() time.Time
	mu    sync.Mutex
	addrs map[string]*bucket
	conns map[*conn.ServerConn]*bucket
	swept time.Time
}

func newThrottle(lim AuthLimits) *throttle {
	return &throttle{lim: lim.withDefaults(), now: time.Now, addrs: make(map[string]*bucket),
		conns: make(map[*conn.ServerConn]*bucket)}
}

// reservation is one auth's claim on its buckets.
type reservation struct {
	addr *bucket
	conn *bucket
}

// reserve takes one token from the address's and the connection's buckets
// and returns how long to wait before checking the credential; ok is false
// (nothing reserved) when that wait would exceed MaxWait (wait is then
// the wait that was refused).
func (t *throttle) reserve(addr string, sc *conn.ServerConn) (r reservation, wait time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.sweep(now)
	ab := t.addrs[addr]
	if ab == nil {
		if len(t.addrs) >= maxThrottledAddrs {
			addr = "" // every further address shares one bucket
			ab = t.addrs[addr]
		}
		if ab == nil {
			ab = &bucket{tokens: float64(t.lim.AddrBurst), at: now}
			t.addrs[addr] = ab
		}
	}
	ab.refill(now, t.lim.AddrBurst, t.lim.AddrRate)
	var cb *bucket
	if sc != nil {
		cb = t.conns[sc]
		if cb == nil {
			cb = &bucket{tokens: float64(t.lim.ConnBurst), at: now}
			t.conns[sc] = cb
			context.AfterFunc(sc.Context(), func() {
				t.mu.Lock()
				delete(t.conns, sc)
				t.mu.Unlock()
			})
		}
		cb.refill(now, t.lim.ConnBurst, t.lim.ConnRate)
	}
	wait = debtWait(ab.tokens-1, t.lim.AddrRate)
	if cb != nil {
		wait = max(wait, debtWait(cb.tokens-1, t.lim.ConnRate))
	}
	if wait > t.lim.MaxWait {
		return reservation{}, wait, false
	}
	ab.tokens--
	if cb != nil {
		cb.tokens--
	}
	return reservation{addr: ab, conn: cb}, wait, true
}

func debtWait(balance, rate float64) time.Duration {
	if balance >= 0 {
		return 0
	}
	return time.Duration(-balance / rate * float64(time.Second))
}

// refund gives a reservation back (the auth succeeded or was abandoned).
func (t *throttle) refund(r reservation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r.addr.tokens++
	if r.conn != nil {
		r.conn.tokens++
	}
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

// errAuthFailed is the one answer to every refused credential: an unknown
// token, a token of another tenant and a throttled attempt look the same,
// so that an answer never tells a guesser that a token exists.
func errAuthFailed() *conn.BrokerError {
	return &conn.BrokerError{Type: "error", Message: "auth failed", Code: felix.CodeUnauthenticated}
}

// authenticate is the conn.Authenticator of the broker.
func (s *Server) authenticate(ctx context.Context, a *felix.Auth) (any, error) {
	if s.draining.Load() {
		return nil, &conn.BrokerError{Type: "error", Message: "broker draining", Code: felix.CodeDraining}
	}
	sc, _ := conn.ConnFromContext(ctx)
	addr := ""
	if sc != nil {
		addr = sc.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = host
		}
	}
	r, wait, ok := s.auth.reserve(addr, sc)
	if !ok {
		s.st.authThrottled.Add(1)
		s.logRefusal(addr, a.TenantID, "throttled")
		return nil, &conn.BrokerError{Type: "error", Message: "auth throttled", Code: felix.CodeOverloaded,
			Retry: felix.RetryAfter, RetryAfter: wait.Round(time.Millisecond)}
	}
	if wait > 0 {
		s.st.authDelayed.Add(1)
		tm := time.NewTimer(wait)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			s.auth.refund(r)
			return nil, errAuthFailed()
		}
	}
	id, found := s.cfg.Tokens[a.Token]
	if !found || id.Tenant != a.TenantID {
		s.st.authFailures.Add(1)
		s.logRefusal(addr, a.TenantID, "bad credential")
		return nil, errAuthFailed()
	}
	s.auth.refund(r)
	return id, nil
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
