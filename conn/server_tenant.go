package conn

import (
	"fmt"
	"sync"

	"github.com/flxproto/felix"
)

// This file bounds what one tenant's authenticated connections can make
// quic-go hold unread (issue 32): a client sending 1-byte STREAM frames to
// streams the server is not reading costs about 160 bytes of memory per
// unread byte, and an authenticated connection may have its receive window
// of unread bytes (MaxConnReceiveWindow). Two per-tenant bounds keep the
// sum of a tenant's windows, and so what it can pin, bounded whatever
// number of connections it opens:
//
//   - MaxTenantConns: the connections whose first authenticated stream
//     named the tenant. The first auth of a connection beyond it is
//     refused (limit_exceeded, reason "max_tenant_conns", retry_after) and
//     the connection stays unauthenticated (its other streams may still
//     authenticate, for a tenant with room);
//   - MaxTenantWindowGrowth: the bytes by which the receive windows of the
//     tenant's connections grew above their initial size together. quic-go
//     asks before growing a connection's window
//     (quic.Config.AllowConnectionWindowIncrease); growth beyond the budget
//     is refused, and that connection keeps its current window (its client
//     is slowed by flow control, never refused).
//
// A tenant therefore has at most MaxTenantConns × the initial window +
// MaxTenantWindowGrowth unread: 32 × 96 KiB + 4 MiB = 7 MiB at the
// defaults, ≈ 1.1 GiB in the tiny-frame worst case (instead of 160 MiB per
// connection with no bound on the connections). Both are returned when the
// connection ends. A connection is charged to the tenant of its first
// authenticated stream, for its whole life: streams authenticated on it
// later for another tenant do not move it. The tables hold one entry per
// tenant with an authenticated connection, no more (tenantBudgets).

const (
	// DefaultMaxTenantConns is ServerConfig.MaxTenantConns: the
	// authenticated connections of one tenant.
	DefaultMaxTenantConns = 32
	// DefaultMaxTenantWindowGrowth is ServerConfig.MaxTenantWindowGrowth:
	// how much the receive windows of one tenant's connections may grow
	// above their initial size together (four connections' worth of
	// growth to DefaultMaxConnReceiveWindow).
	DefaultMaxTenantWindowGrowth = 4 << 20
)

// tenantCharge is what an authenticated connection holds of its tenant's
// budgets; it is set once, under Listener.mu, when the connection's first
// stream authenticates, and returned when the connection ends.
type tenantCharge struct {
	conns *tenantBudget // one place; nil: no cap
	grow  *tenantBudget // window growth; nil: no bound
	l     *Listener

	mu    sync.Mutex
	grown int64 // bytes of grow held
	done  bool  // returned: no more growth
}

// admitTenantLocked charges c, whose first stream just authenticated for
// tenant, to the tenant's connection places, and returns its charge, or
// the refusal to answer when the tenant has MaxTenantConns connections.
// l.mu is held.
func (l *Listener) admitTenantLocked(tenant string) (*tenantCharge, *felix.BrokerError) {
	ch := &tenantCharge{l: l}
	if l.tenantConns != nil {
		tb := l.tenantConns.get(tenant)
		if _, ok := tb.b.tryAcquire(1); !ok {
			l.tenantConns.put(tb, 0)
			l.st.refusedTenantConns.Add(1)
			return nil, &felix.BrokerError{Type: "error", Code: felix.CodeLimitExceeded, Retry: felix.RetryAfter, Reason: "max_tenant_conns",
				Message: fmt.Sprintf("too many connections for this tenant (max_tenant_conns %d)", l.cfg.MaxTenantConns)}
		}
		ch.conns = tb
	}
	if l.tenantGrowth != nil {
		ch.grow = l.tenantGrowth.get(tenant)
	}
	return ch, nil
}

// allowGrowth charges delta bytes of window growth to the tenant, and
// reports whether the window may grow by that much.
func (ch *tenantCharge) allowGrowth(delta uint64) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.done {
		return false
	}
	if ch.grow == nil {
		return true
	}
	n, ok := ch.grow.b.tryAcquire(int64(delta))
	if ok && uint64(n) < delta { // more than the whole budget
		ch.grow.b.release(n)
		ok = false
	}
	if !ok {
		ch.l.st.refusedGrowth.Add(1)
		return false
	}
	ch.grown += n
	return true
}

// release returns the connection's place and window growth to its tenant.
func (ch *tenantCharge) release() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.done {
		return
	}
	ch.done = true
	if ch.grow != nil {
		ch.l.tenantGrowth.put(ch.grow, ch.grown)
	}
	if ch.conns != nil {
		ch.l.tenantConns.put(ch.conns, 1)
	}
}
