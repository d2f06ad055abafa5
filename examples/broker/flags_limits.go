package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/flxproto/felix/internal/broker/engine"

	"github.com/flxproto/felix/internal/broker/server"
)

// authFlags registers the auth throttle flags (docs/limits.md).
func authFlags(fs *flag.FlagSet) *server.AuthLimits {
	l := new(server.AuthLimits)
	fs.IntVar(&l.AddrBurst, "auth-fail-burst", server.DefaultAuthAddrBurst, "failed auths a source address may make before it is throttled")
	fs.Float64Var(&l.AddrRate, "auth-fail-rate", server.DefaultAuthAddrRate, "failed auths per second a throttled source address is allowed")
	fs.IntVar(&l.ConnBurst, "auth-conn-fail-burst", server.DefaultAuthConnBurst, "failed auths one connection may make before it is throttled")
	fs.Float64Var(&l.ConnRate, "auth-conn-fail-rate", server.DefaultAuthConnRate, "failed auths per second a throttled connection is allowed")
	fs.IntVar(&l.GlobalBurst, "auth-global-fail-burst", server.DefaultAuthGlobalBurst, "failed auths the whole broker answers before throttling every failure")
	fs.Float64Var(&l.GlobalRate, "auth-global-fail-rate", server.DefaultAuthGlobalRate, "failed auths per second the whole broker answers once throttled (valid tokens are never throttled)")
	fs.IntVar(&l.MaxAddrs, "auth-max-addrs", server.DefaultAuthMaxAddrs, "source addresses the auth throttle remembers (beyond: a random one is forgotten)")
	fs.DurationVar(&l.MaxWait, "auth-max-wait", server.DefaultAuthMaxWait, "longest a failed auth's answer is held back by the throttle; beyond it the failure is answered auth throttled (overloaded, retry_after) and its connection checks no more auths")
	return l
}

// limitFlags holds the resource-bound flags (docs/limits.md).
type limitFlags struct {
	queueBytes, maxQueued, maxRetain, maxLog, cacheLog, maxCache int64
	watchBytes, tenantCache, totalCache, totalCacheLog           int64
	maxProducers, producersPerShard, streamsPerTenant, cachesPer int
	maxName, producersPerTenant                                  int
	producerIdle, writeTimeout                                   time.Duration
	tenants                                                      *tenantFlags // flags_tenants.go
}

func registerLimitFlags(fs *flag.FlagSet) *limitFlags {
	l := new(limitFlags)
	fs.Int64Var(&l.queueBytes, "queue-bytes", engine.DefaultSubscriberQueueBytes, "bytes queued for one subscriber before it is lagged")
	fs.Int64Var(&l.maxQueued, "max-queued-bytes", engine.DefaultMaxQueuedBytes, "bytes queued for all subscribers together before backlogged ones of tenants over their share are lagged")
	fs.Int64Var(&l.maxRetain, "max-retain-bytes", engine.DefaultMaxRetainBytes, "cap on every shard's log or ring, records and bookkeeping (-1 = none)")
	fs.Int64Var(&l.maxLog, "max-log-bytes", engine.DefaultMaxLogBytes, "cap on all stream logs and rings together; beyond it the tenant holding the most is trimmed first (-1 = none)")
	fs.Int64Var(&l.cacheLog, "cache-log-bytes", engine.DefaultCacheLogRetainBytes, "per-cache write log kept for watch resume, in bytes (-1 = none)")
	fs.Int64Var(&l.maxCache, "max-cache-bytes", engine.DefaultMaxCacheBytes, "live keys, values and counters per cache; writes beyond are refused (-1 = none)")
	fs.Int64Var(&l.tenantCache, "max-tenant-cache-bytes", engine.DefaultMaxTenantCacheBytes, "live keys, values and counters of all of one tenant's caches; writes beyond are refused (-1 = none)")
	fs.Int64Var(&l.totalCache, "max-total-cache-bytes", engine.DefaultMaxTotalCacheBytes, "live keys, values and counters of every cache together; writes beyond are refused (-1 = none)")
	fs.Int64Var(&l.totalCacheLog, "max-total-cache-log-bytes", engine.DefaultMaxTotalCacheLogBytes, "cap on all cache write logs together; beyond it writing caches of tenants over their share trim their own oldest events (-1 = none)")
	fs.Int64Var(&l.watchBytes, "watch-queue-bytes", engine.DefaultWatchQueueBytes, "bytes queued for one cache watcher before it is lagged")
	fs.IntVar(&l.maxProducers, "max-producers", engine.DefaultMaxProducers, "idempotent producer states held broker-wide")
	fs.IntVar(&l.producersPerShard, "max-producers-per-shard", engine.DefaultMaxProducersPerShard, "idempotent producer states held per shard")
	fs.IntVar(&l.producersPerTenant, "max-producers-per-tenant", engine.DefaultMaxProducersPerTenant, "idempotent producer states one tenant may hold (its share of -max-producers)")
	fs.DurationVar(&l.producerIdle, "producer-idle", engine.DefaultProducerIdle, "idle time after which an idempotent producer state is forgotten")
	fs.IntVar(&l.streamsPerTenant, "max-streams-per-tenant", engine.DefaultMaxStreamsPerTenant, "streams a tenant may have created on first use (-1 = no bound)")
	fs.IntVar(&l.cachesPer, "max-caches-per-tenant", engine.DefaultMaxCachesPerTenant, "caches a tenant may have created on first use (-1 = no bound)")
	fs.IntVar(&l.maxName, "max-name-bytes", engine.DefaultMaxNameBytes, "longest tenant, namespace, stream, cache, key or watch prefix a request may name (at most 65535); longer ones are refused invalid_request")
	fs.DurationVar(&l.writeTimeout, "event-write-timeout", server.DefaultEventWriteTimeout, "longest one event-stream write may block on a client that stopped reading; the stream is then reset")
	l.tenants = registerTenantFlags(fs)
	return l
}

// apply copies the flags into the broker configuration.
func (l *limitFlags) apply(cfg *server.Config) error {
	for name, v := range map[string]int64{"-queue-bytes": l.queueBytes, "-max-queued-bytes": l.maxQueued, "-watch-queue-bytes": l.watchBytes,
		"-max-producers": int64(l.maxProducers), "-max-producers-per-shard": int64(l.producersPerShard),
		"-max-producers-per-tenant": int64(l.producersPerTenant)} {
		if v <= 0 {
			return fmt.Errorf("%s must be positive", name)
		}
	}
	if l.maxName < 1 || l.maxName > engine.DefaultMaxNameBytes {
		return fmt.Errorf("-max-name-bytes %d: want 1..%d", l.maxName, engine.DefaultMaxNameBytes)
	}
	if l.producerIdle <= 0 || l.writeTimeout <= 0 {
		return errors.New("-producer-idle and -event-write-timeout must be positive")
	}
	e := &cfg.Engine
	e.SubscriberQueueBytes, e.MaxQueuedBytes, e.WatchQueueBytes = l.queueBytes, l.maxQueued, l.watchBytes
	e.MaxRetainBytes, e.MaxLogBytes = l.maxRetain, l.maxLog
	e.CacheLogRetainBytes, e.MaxCacheBytes = l.cacheLog, l.maxCache
	e.MaxTenantCacheBytes, e.MaxTotalCacheBytes, e.MaxTotalCacheLogBytes = l.tenantCache, l.totalCache, l.totalCacheLog
	e.MaxProducers, e.MaxProducersPerShard, e.ProducerIdle = l.maxProducers, l.producersPerShard, l.producerIdle
	e.MaxProducersPerTenant = l.producersPerTenant
	e.MaxStreamsPerTenant, e.MaxCachesPerTenant = l.streamsPerTenant, l.cachesPer
	e.MaxNameBytes = l.maxName
	cfg.EventWriteTimeout = l.writeTimeout
	l.tenants.apply(cfg)
	return nil
}

// startStats starts the stats endpoint and the periodic stats line; both
// stop with ctx.
func startStats(ctx context.Context, srv *server.Server, log *slog.Logger, addr string, every time.Duration) error {
	if addr != "" {
		ss, err := srv.ServeStats(addr)
		if err != nil {
			return fmt.Errorf("-stats: %w", err)
		}
		log.Info("stats endpoint", "url", "http://"+ss.Addr().String()+"/stats", "metrics", "http://"+ss.Addr().String()+"/metrics")
		context.AfterFunc(ctx, func() { _ = ss.Close() })
	}
	if every > 0 {
		go srv.LogStats(ctx, every)
	}
	return nil
}
