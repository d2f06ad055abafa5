package server

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// This file bounds what the subscriptions and cache watches of many
// connections hold together, per tenant and broker-wide, on top of each
// connection's MaxSubscriptionsPerConn (issue 35: 16 connections of one
// token held 64,000 subscriptions and their goroutines, 931 MiB, or 64,000
// watches with 64 KiB prefixes, 5,104 MiB). Each subscription or watch is
// charged SubscriptionCost, what one costs whatever it asks for (its pump
// queue, event stream and delivery state), plus the bytes of its key or prefix,
// which the engine keeps for the watch's life.

const (
	// SubscriptionCost is what one subscription or cache watch is charged
	// against the subscription budgets besides its key or prefix: about
	// what one costs in memory (issue 35 measured 931 MiB for 64,000
	// subscriptions, ≈ 14.5 KiB each).
	SubscriptionCost = 16 << 10
	// DefaultMaxTenantSubscriptionBytes is
	// Config.MaxTenantSubscriptionBytes: 4,096 subscriptions of one
	// tenant, or fewer watches with long prefixes.
	DefaultMaxTenantSubscriptionBytes = 64 << 20
	// DefaultMaxSubscriptionBytes is Config.MaxSubscriptionBytes: 32,768
	// subscriptions on the broker, 8 tenants at their share.
	DefaultMaxSubscriptionBytes = 512 << 20
)

// subBudget counts the subscription bytes held per tenant and in all.
type subBudget struct {
	tenantMax, totalMax int64 // ≤ 0: no bound
	mu                  sync.Mutex
	total               int64
	tenants             map[string]int64 // only tenants holding some
}

// take charges cost to tenant, or says which budget refuses it.
func (b *subBudget) take(tenant string, cost int64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	held := b.tenants[tenant]
	if b.tenantMax > 0 && held+cost > b.tenantMax {
		return fmt.Sprintf("tenant's subscriptions and watches over %d bytes (max_tenant_subscription_bytes; each counts %d bytes plus its key or prefix)", b.tenantMax, SubscriptionCost)
	}
	if b.totalMax > 0 && b.total+cost > b.totalMax {
		return fmt.Sprintf("broker's subscriptions and watches over %d bytes (max_subscription_bytes)", b.totalMax)
	}
	if b.tenants == nil {
		b.tenants = make(map[string]int64)
	}
	b.tenants[tenant] = held + cost
	b.total += cost
	return ""
}

// put returns what take charged.
func (b *subBudget) put(tenant string, cost int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= cost
	if n := b.tenants[tenant] - cost; n > 0 {
		b.tenants[tenant] = n
	} else {
		delete(b.tenants, tenant)
	}
}

// subSlot is what one subscription or watch holds: its place on the
// connection and its charge to the budgets. release returns both, once.
type subSlot struct {
	conn   *atomic.Int64
	b      *subBudget
	tenant string
	cost   int64
	done   atomic.Bool
}

func (s *subSlot) release() {
	if s.done.Swap(true) {
		return
	}
	s.conn.Add(-1)
	s.b.put(s.tenant, s.cost)
}
