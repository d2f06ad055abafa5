package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// budgetFlags holds the broker-wide budget flags, the per-address
// handshake limit and the delivery workers' caps (docs/limits.md §2 and
// §3.1).
type budgetFlags struct {
	answerBytes     int64
	tenantAnswers   int64
	handshakesPerIP int
	tenantSubBytes  int64
	subBytes        int64
	tenantWorkers   int
	workers         int
}

func registerBudgetFlags(fs *flag.FlagSet) *budgetFlags {
	b := new(budgetFlags)
	fs.Int64Var(&b.answerBytes, "max-answer-bytes", conn.DefaultMaxAnswerBytes, "answer bytes being written on all connections together, on top of each connection's -conn-inflight-bytes (beyond: answers wait, holding no copy; negative: no broker-wide bound)")
	fs.Int64Var(&b.tenantAnswers, "max-tenant-answer-bytes", conn.DefaultMaxTenantAnswerBytes, "answer bytes being written for one tenant on all its connections together, its share of -max-answer-bytes (beyond: its answers wait, holding no copy; negative: no per-tenant bound)")
	fs.IntVar(&b.handshakesPerIP, "max-handshakes-per-addr", conn.DefaultMaxHandshakesPerAddr, "QUIC handshakes in progress from one verified source address (beyond: CONNECTION_REFUSED); clients behind one NAT share it: raise it for large NATs (negative: no bound)")
	fs.Int64Var(&b.tenantSubBytes, "max-tenant-sub-bytes", server.DefaultMaxTenantSubscriptionBytes, "what one tenant's subscriptions and cache watches hold on all connections together, each counting 16 KiB plus its key or prefix (beyond: limit_exceeded; negative: no bound)")
	fs.Int64Var(&b.subBytes, "max-sub-bytes", server.DefaultMaxSubscriptionBytes, "what all subscriptions and cache watches hold together, counted as for -max-tenant-sub-bytes (beyond: limit_exceeded; negative: no bound)")
	fs.IntVar(&b.tenantWorkers, "tenant-delivery-workers", server.DefaultTenantDeliveryWorkers, "goroutines writing one tenant's subscriptions and cache watches to their event streams (an idle subscription holds none; a client that stops reading holds at most its tenant's workers, each until -event-write-timeout)")
	fs.IntVar(&b.workers, "delivery-workers", server.DefaultDeliveryWorkers, "goroutines writing all subscriptions and cache watches together, at least -tenant-delivery-workers (a tenant with deliveries ready while all run gets the next one that finishes a turn)")
	return b
}

// apply sets the budgets in cfg, refusing values the server would replace
// by their defaults.
func (b *budgetFlags) apply(cfg *server.Config) error {
	if b.answerBytes == 0 {
		return errors.New("-max-answer-bytes 0: want at least 1, or negative for no bound")
	}
	if b.tenantAnswers == 0 {
		return errors.New("-max-tenant-answer-bytes 0: want at least 1, or negative for no bound")
	}
	if b.handshakesPerIP == 0 {
		return errors.New("-max-handshakes-per-addr 0: want at least 1, or negative for no bound")
	}
	if b.tenantSubBytes == 0 || b.subBytes == 0 {
		return errors.New("-max-tenant-sub-bytes and -max-sub-bytes: want at least 1, or negative for no bound")
	}
	cfg.MaxTenantSubscriptionBytes, cfg.MaxSubscriptionBytes = b.tenantSubBytes, b.subBytes
	if b.tenantWorkers < 1 || b.workers < b.tenantWorkers {
		return fmt.Errorf("-tenant-delivery-workers %d, -delivery-workers %d: want 1 ≤ -tenant-delivery-workers ≤ -delivery-workers", b.tenantWorkers, b.workers)
	}
	cfg.TenantDeliveryWorkers, cfg.DeliveryWorkers = b.tenantWorkers, b.workers
	inner := cfg.ConnLimits
	cfg.ConnLimits = func(c *conn.ServerConfig) {
		if inner != nil {
			inner(c)
		}
		c.MaxAnswerBytes, c.MaxTenantAnswerBytes, c.MaxHandshakesPerAddr = b.answerBytes, b.tenantAnswers, b.handshakesPerIP
	}
	return nil
}
