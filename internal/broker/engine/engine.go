package engine

import (
	"crypto/rand"
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flxproto/felix"
)

// Defaults used when a Config field is zero.
const (
	DefaultQueueCapacity      = 512  // published batches per subscriber
	DefaultMaxQueueCapacity   = 4096 // largest queue_capacity a subscriber may ask for
	DefaultProducerWindow     = 64   // sequences remembered per producer and shard
	DefaultCacheLogRetain     = 100_000
	DefaultWatchQueueCapacity = 1024 // cache events per watch
	DefaultHistoryBatch       = 64   // records per history page
	DefaultHistoryBatchBytes  = 64 << 10
	// DefaultRingRecords is the replay ring of an ephemeral stream shard,
	// in records (upstream's in-memory log capacity).
	DefaultRingRecords = 1024
)

// StreamConfig describes a stream.
type StreamConfig struct {
	// Durable streams keep a log with offsets, bounded by RetainRecords
	// and RetainBytes; every delivery carries offsets and append times.
	// Ephemeral streams keep only a replay ring of RingRecords records
	// (also bounded by RetainBytes): live deliveries carry no offsets and
	// no times, and a subscribe from earliest or from an offset is served
	// from the ring, its sequence numbers acting as offsets (see the
	// package documentation).
	Durable bool
	// Shards is the number of shards (0 means 1).
	Shards uint32
	// Routing places keyed publishes on shards (felix.RoutingModulo, the
	// zero value, or felix.RoutingJumpHash; docs/routing.md §1). Unkeyed
	// publishes go to shard 0.
	Routing felix.Routing
	// RetainRecords bounds each durable shard's log by record count (0 = no
	// bound). Ephemeral streams use RingRecords instead.
	RetainRecords int
	// RetainBytes bounds each shard's log or ring by payload bytes (0 = no
	// bound). The newest record is always kept.
	RetainBytes int64
	// RingRecords is the replay ring of each ephemeral shard, in records
	// (0 = DefaultRingRecords). Durable streams ignore it.
	RingRecords int
}

func (c StreamConfig) shards() uint32 { return max(c.Shards, 1) }

// retainRecords is the record bound of a shard's log or ring (0 = none).
func (c StreamConfig) retainRecords() int {
	if c.Durable {
		return c.RetainRecords
	}
	if c.RingRecords > 0 {
		return c.RingRecords
	}
	return DefaultRingRecords
}

// Topic names a stream.
type Topic struct {
	Tenant, Namespace, Stream string
}

// CacheRef names a cache.
type CacheRef struct {
	Tenant, Namespace, Cache string
}

// Config configures an Engine. The zero value is usable: streams and caches
// are created on first use, streams as DefaultStream.
type Config struct {
	// DefaultStream is the configuration of auto-created streams.
	DefaultStream StreamConfig
	// NoAutoCreateStreams makes unknown streams an error (not_found)
	// instead of creating them with DefaultStream on first use.
	NoAutoCreateStreams bool
	// NoAutoCreateCaches makes unknown caches an error (not_found).
	NoAutoCreateCaches bool
	// DeclareHint, when set, ends the not_found answer to an undeclared
	// stream or cache under NoAutoCreateStreams / NoAutoCreateCaches with
	// how the operator declares it (the broker command's flags); it is
	// given the name as tenant/namespace/name. Such an answer is retry
	// class fatal either way: this broker creates nothing on first use,
	// so asking again cannot succeed.
	DeclareHint func(cache bool, name string) string
	// MissingStreams are never created on first use, whatever
	// NoAutoCreateStreams says: they stay not_found until CreateStream
	// (a fixture's deliberately missing stream).
	MissingStreams []Topic
	// DefaultQueueCapacity is a subscriber's queue capacity when it asks
	// for none (0 = DefaultQueueCapacity).
	DefaultQueueCapacity int
	// MaxQueueCapacity caps queue_capacity (0 = DefaultMaxQueueCapacity).
	MaxQueueCapacity int
	// SubscriberQueueBytes bounds the bytes queued for one subscription
	// (0 = DefaultSubscriberQueueBytes); MaxQueuedBytes bounds them
	// engine-wide (0 = DefaultMaxQueuedBytes). A batch that does not fit
	// is dropped for that subscriber, which is then lagged (see
	// SubscribeRequest.LagReport). At the engine-wide bound a tenant
	// within its share (MaxQueuedBytes divided by the tenants with an open
	// subscription or watch) is still given room, up to a hard cap of
	// twice MaxQueuedBytes (Engine.queueRoom), and at that cap the queues
	// of the tenants over their share are taken back to make it room
	// (Engine.makeQueueRoom).
	SubscriberQueueBytes int64
	MaxQueuedBytes       int64
	// ProducerWindow is how many sequences per producer are remembered for
	// duplicate detection (0 = DefaultProducerWindow).
	ProducerWindow int
	// MaxProducers bounds the idempotent producer states held engine-wide
	// (0 = DefaultMaxProducers), MaxProducersPerShard those of one shard
	// (0 = DefaultMaxProducersPerShard); ProducerIdle is how long an
	// unused producer state is kept (0 = DefaultProducerIdle).
	MaxProducers         int
	MaxProducersPerShard int
	ProducerIdle         time.Duration
	// MaxProducersPerTenant is one tenant's share of the producer table
	// (0 = DefaultMaxProducersPerTenant).
	MaxProducersPerTenant int
	// MaxFrameBytes is the frame limit every derived frame must fit (0 =
	// felix.DefaultMaxFrameBytes): event batches are split to fit it and
	// a record that could never be delivered within it is refused.
	MaxFrameBytes uint32
	// MaxRetainBytes caps every shard's log or ring, records and their
	// bookkeeping (0 = DefaultMaxRetainBytes, negative = no cap);
	// MaxLogBytes caps all of them engine-wide (0 = DefaultMaxLogBytes,
	// negative = no cap): while the total is over it, the oldest records
	// of the tenant holding the most are trimmed, so a tenant holding no
	// more than its share (MaxLogBytes divided by the tenants holding
	// records) never loses one to another (every shard keeps its newest).
	MaxRetainBytes int64
	MaxLogBytes    int64
	// MaxStreamsPerTenant and MaxCachesPerTenant bound the streams and
	// caches created on first use per tenant (0 = the defaults, negative =
	// no bound); beyond them the request is refused limit_exceeded.
	// Streams declared with CreateStream do not count.
	MaxStreamsPerTenant int
	MaxCachesPerTenant  int
	// CacheLogRetainBytes caps each cache's write log in bytes besides
	// CacheLogRetain entries (0 = DefaultCacheLogRetainBytes, negative =
	// no cap); MaxCacheBytes caps a cache's live keys, values and counters
	// (0 = DefaultMaxCacheBytes, negative = no cap): writes beyond it are
	// refused limit_exceeded.
	CacheLogRetainBytes int64
	MaxCacheBytes       int64
	// MaxTenantCacheBytes caps the live bytes of all of one tenant's
	// caches (0 = DefaultMaxTenantCacheBytes), MaxTotalCacheBytes those
	// of every cache (0 = DefaultMaxTotalCacheBytes); negative = no cap.
	// Writes beyond are refused limit_exceeded; at MaxTotalCacheBytes only
	// those of a tenant over its share (the bound over the tenants holding
	// live bytes) are.
	MaxTenantCacheBytes int64
	MaxTotalCacheBytes  int64
	// MaxTotalCacheLogBytes caps the write logs of every cache together
	// (0 = DefaultMaxTotalCacheLogBytes, negative = no cap): a cache of a
	// tenant over its share (the bound over the tenants holding write
	// logs) that writes while the total is over it drops its own oldest
	// events (its newest is always kept); past twice the bound any
	// writing cache does.
	MaxTotalCacheLogBytes int64
	// CacheLogRetain is how many cache events per cache are kept for watch
	// resume (0 = DefaultCacheLogRetain).
	CacheLogRetain int
	// WatchQueueCapacity is a watch's live queue capacity in events
	// (0 = DefaultWatchQueueCapacity); WatchQueueBytes bounds it in bytes
	// of keys, values and the frames they become (0 =
	// DefaultWatchQueueBytes). Live events are shared by the watches they
	// match and charged once to the engine-wide MaxQueuedBytes, which
	// subscriber queues share. A watcher over any of them is ended with
	// cache_watch_lagged.
	WatchQueueCapacity int
	WatchQueueBytes    int64
	// MaxNameBytes bounds the tenant, namespace, stream, cache, key and
	// watch prefix of every request (0 or more than DefaultMaxNameBytes =
	// DefaultMaxNameBytes): a longer one is refused invalid_request before
	// anything is created.
	MaxNameBytes int
	// Now is the clock (nil = time.Now). Tests use it to expire TTLs and
	// consumer-group visibility timeouts.
	Now func() time.Time
	// Groups bounds consumer groups (zero fields take their defaults).
	Groups GroupConfig
	// State bounds the commit state of each shard (zero fields take their
	// defaults).
	State StateConfig
}

// Engine is the broker core. Create it with New; Close ends every
// subscription and watch.
type Engine struct {
	cfg Config

	mu      sync.Mutex
	streams map[Topic]*stream
	caches  map[CacheRef]*cacheScope
	subs    map[*Subscription]struct{}
	watches map[*Watch]struct{}
	closed  bool

	nextID          atomic.Uint64
	producerCount   atomic.Int64 // producer states held, all shards
	prodMu          sync.Mutex   // guards prodTenants; taken after a shard's mu, never before one
	prodTenants     map[string]*tenantProducers
	queuedBytes     atomic.Int64             // bytes held by subscriber queues (queue_bytes.go)
	logBytes        atomic.Int64             // bytes held by shard logs and rings (retention.go)
	logMu           sync.Mutex               // serialises engine-wide log trims (tenants.go)
	queueTenants    atomic.Int64             // tenants with an open subscription or watch
	tenants         map[string]*tenantUse    // fair-share accounting per tenant (mu; tenants.go)
	stateEntries    *budget                  // commit state keys (commit.go)
	stateBytes      *budget                  // commit state bytes
	claims          *budget                  // consumer-group claims, owed records and dead letters (group.go)
	groupCount      *budget                  // consumer groups
	autoStreams     map[string]int           // streams created on first use, per tenant (mu)
	autoCaches      map[string]int           // caches created on first use, per tenant (mu)
	tenantCache     map[string]*atomic.Int64 // live cache bytes per tenant (map: mu)
	cacheLive       atomic.Int64             // live cache bytes, all caches
	cacheTenants    atomic.Int64             // tenants holding live cache bytes
	cacheLogTenants atomic.Int64             // tenants holding cache write-log bytes
	cacheLogBytes   atomic.Int64             // cache write log bytes, all caches
	gate            pubGate                  // drain.go
	drainedFlag     atomic.Bool              // Drain was called
	st              counters
}

// New returns an Engine with cfg (zero fields take their defaults).
func New(cfg Config) *Engine {
	if cfg.DefaultQueueCapacity <= 0 {
		cfg.DefaultQueueCapacity = DefaultQueueCapacity
	}
	if cfg.MaxQueueCapacity <= 0 {
		cfg.MaxQueueCapacity = DefaultMaxQueueCapacity
	}
	if cfg.ProducerWindow <= 0 {
		cfg.ProducerWindow = DefaultProducerWindow
	}
	cfg.storageDefaults()
	if cfg.SubscriberQueueBytes <= 0 {
		cfg.SubscriberQueueBytes = DefaultSubscriberQueueBytes
	}
	if cfg.MaxQueuedBytes <= 0 {
		cfg.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if cfg.MaxProducers <= 0 {
		cfg.MaxProducers = DefaultMaxProducers
	}
	if cfg.MaxProducersPerShard <= 0 {
		cfg.MaxProducersPerShard = DefaultMaxProducersPerShard
	}
	if cfg.MaxProducersPerTenant <= 0 {
		cfg.MaxProducersPerTenant = DefaultMaxProducersPerTenant
	}
	if cfg.ProducerIdle <= 0 {
		cfg.ProducerIdle = DefaultProducerIdle
	}
	if cfg.CacheLogRetain <= 0 {
		cfg.CacheLogRetain = DefaultCacheLogRetain
	}
	if cfg.WatchQueueBytes <= 0 {
		cfg.WatchQueueBytes = DefaultWatchQueueBytes
	}
	if cfg.WatchQueueCapacity <= 0 {
		cfg.WatchQueueCapacity = DefaultWatchQueueCapacity
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Groups = cfg.Groups.withDefaults()
	cfg.State = cfg.State.withDefaults()
	return &Engine{
		cfg:          cfg,
		stateEntries: newBudget("commit state entries", int64(cfg.State.MaxTenantEntries), int64(cfg.State.MaxTotalEntries)),
		stateBytes:   newBudget("commit state bytes", cfg.State.MaxTenantBytes, cfg.State.MaxTotalBytes),
		claims:       newBudget("consumer-group claims", int64(cfg.Groups.MaxTenantClaims), int64(cfg.Groups.MaxTotalClaims)),
		groupCount:   newBudget("consumer groups", int64(cfg.Groups.MaxTenantGroups), int64(cfg.Groups.MaxTotalGroups)),
		streams:      make(map[Topic]*stream),
		autoStreams:  make(map[string]int), autoCaches: make(map[string]int),
		tenantCache: make(map[string]*atomic.Int64), prodTenants: make(map[string]*tenantProducers),
		caches: make(map[CacheRef]*cacheScope), tenants: make(map[string]*tenantUse),
		subs:    make(map[*Subscription]struct{}),
		watches: make(map[*Watch]struct{}),
	}
}

// Config returns the engine's effective configuration.
func (e *Engine) Config() Config { return e.cfg }

// newID returns a fresh subscription / watch id (never 0).
func (e *Engine) newID() uint64 { return e.nextID.Add(1) }

// CreateStream registers a stream with its configuration. It fails with
// invalid_request if the stream exists with a different configuration.
func (e *Engine) CreateStream(t Topic, c StreamConfig) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.streams[t]; ok {
		if s.cfg != c {
			return errorf(felix.CodeInvalidRequest, "stream exists with another configuration: "+topicString(t))
		}
		return nil
	}
	e.streams[t] = newStream(e, t, c)
	return nil
}

// CreateCache registers a cache (useful with NoAutoCreateCaches).
func (e *Engine) CreateCache(r CacheRef) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.caches[r]; !ok {
		e.caches[r] = newCacheScope(e, r.Tenant)
	}
}

// StreamInfo returns a stream's configuration, creating it first when
// auto-creation is on. ok is false for an unknown stream.
func (e *Engine) StreamInfo(t Topic) (c StreamConfig, ok bool) {
	s, err := e.stream(t)
	if err != nil {
		return StreamConfig{}, false
	}
	return s.cfg, true
}

func (e *Engine) stream(t Topic) (*stream, error) {
	if err := e.checkTopic(t); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.streams[t]; ok {
		return s, nil
	}
	if slices.Contains(e.cfg.MissingStreams, t) {
		return nil, errorf(felix.CodeNotFound, "stream not found: "+topicString(t))
	}
	if e.cfg.NoAutoCreateStreams {
		return nil, e.undeclared(false, topicString(t), t.Tenant+"/"+t.Namespace+"/"+t.Stream)
	}
	if err := e.autoCreateAllowed(e.autoStreams, t.Tenant, e.cfg.MaxStreamsPerTenant, "streams"); err != nil {
		return nil, err
	}
	s := newStream(e, t, e.cfg.DefaultStream)
	e.streams[t] = s
	return s, nil
}

func (e *Engine) cache(r CacheRef) (*cacheScope, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.caches[r]; ok {
		return c, nil
	}
	if e.cfg.NoAutoCreateCaches {
		return nil, e.undeclared(true, r.Tenant+"/"+r.Namespace+"/"+r.Cache, r.Tenant+"/"+r.Namespace+"/"+r.Cache)
	}
	if err := e.autoCreateAllowed(e.autoCaches, r.Tenant, e.cfg.MaxCachesPerTenant, "caches"); err != nil {
		return nil, err
	}
	c := newCacheScope(e, r.Tenant)
	e.caches[r] = c
	return c, nil
}

// ProducerInit returns a fresh random 64-bit producer id (producer_init).
func (e *Engine) ProducerInit() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			e.st.producers.Add(1)
			return id
		}
	}
}

// Close ends every subscription and watch (their Next returns ErrClosed)
// and refuses new ones. It is idempotent.
func (e *Engine) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	subs := make([]*Subscription, 0, len(e.subs))
	for s := range e.subs {
		subs = append(subs, s)
	}
	watches := make([]*Watch, 0, len(e.watches))
	for w := range e.watches {
		watches = append(watches, w)
	}
	e.mu.Unlock()
	for _, s := range subs {
		s.Close()
	}
	for _, w := range watches {
		w.Close()
	}
}

func (e *Engine) register(s *Subscription) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.subs[s] = struct{}{}
	return true
}

func (e *Engine) unregister(s *Subscription) {
	e.mu.Lock()
	delete(e.subs, s)
	e.mu.Unlock()
}

func (e *Engine) registerWatch(w *Watch) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.watches[w] = struct{}{}
	return true
}

func (e *Engine) unregisterWatch(w *Watch) {
	e.mu.Lock()
	delete(e.watches, w)
	e.mu.Unlock()
}

func (e *Engine) nowMicros() uint64 { return uint64(e.cfg.Now().UnixMicro()) }
func (e *Engine) nowMillis() uint64 { return uint64(e.cfg.Now().UnixMilli()) }

func topicString(t Topic) string {
	return "tenant=" + t.Tenant + " namespace=" + t.Namespace + " stream=" + t.Stream
}

// Stats is a snapshot of the engine's counters.
type Stats struct {
	PublishedBatches    uint64 // batches appended (duplicates excluded)
	PublishedRecords    uint64 // records appended
	DuplicateBatches    uint64 // idempotent batches recognised as already written
	RefusedBatches      uint64 // idempotent batches refused
	Producers           uint64 // producer ids handed out
	ProducerStates      uint64 // idempotent producer states held (all shards)
	ProducersEvicted    uint64 // states dropped to make room (table full)
	ProducersExpired    uint64 // states dropped after ProducerIdle unused
	EventEncodes        uint64 // event frames encoded (one per batch and modifier set)
	DeliveredBatches    uint64 // event frames handed to subscribers
	DeliveredRecords    uint64 // records handed to subscribers
	DroppedBatches      uint64 // batches dropped at full subscriber queues
	DroppedRecords      uint64 // records in those batches
	LaggedSubscriptions uint64 // subscriptions ended with a lag report
	ActiveSubscriptions uint64 // open subscriptions
	QueuedBytes         uint64 // bytes held by subscriber queues (records and frames)
	LogBytes            uint64 // bytes held by stream logs and rings (records and bookkeeping)
	TotalSubscriptions  uint64 // subscriptions ever opened
	CachePuts           uint64 // cache writes (put and applied put_if)
	CacheGets           uint64 // cache reads
	CacheHits           uint64 // reads that found a live value
	CacheDeletes        uint64 // deletes that removed a value
	CacheExpired        uint64 // entries found expired on access
	ConditionFailures   uint64 // put_if / delete_if not applied
	CounterAdds         uint64 // counter_add calls
	ActiveWatches       uint64 // open cache watches
	WatchEvents         uint64 // cache events handed to watchers
	WatchEventEncodes   uint64 // cache_event frames encoded (a live event once, whatever its watches)
	LaggedWatches       uint64 // watches ended with cache_watch_lagged
	DeadLettersDropped  uint64 // dead letters discarded at a full dead-letter list
}

type counters struct {
	publishedBatches, publishedRecords, duplicateBatches, refusedBatches, producers  atomic.Uint64
	eventEncodes, deliveredBatches, deliveredRecords, droppedBatches, droppedRecords atomic.Uint64
	laggedSubs, activeSubs, totalSubs                                                atomic.Uint64
	cachePuts, cacheGets, cacheHits, cacheDeletes, cacheExpired, condFailures        atomic.Uint64
	counterAdds, activeWatches, watchEvents, laggedWatches, watchEncodes             atomic.Uint64
	producersEvicted, producersExpired                                               atomic.Uint64
	deadDropped                                                                      atomic.Uint64
}

// Stats returns a snapshot of the engine's counters.
func (e *Engine) Stats() Stats {
	c := &e.st
	return Stats{
		PublishedBatches: c.publishedBatches.Load(), PublishedRecords: c.publishedRecords.Load(),
		DuplicateBatches: c.duplicateBatches.Load(), RefusedBatches: c.refusedBatches.Load(),
		Producers: c.producers.Load(), EventEncodes: c.eventEncodes.Load(),
		QueuedBytes:    uint64(max(e.queuedBytes.Load(), 0)),
		LogBytes:       uint64(max(e.logBytes.Load(), 0)),
		ProducerStates: uint64(max(e.producerCount.Load(), 0)), ProducersEvicted: c.producersEvicted.Load(),
		ProducersExpired: c.producersExpired.Load(),
		DeliveredBatches: c.deliveredBatches.Load(), DeliveredRecords: c.deliveredRecords.Load(),
		DroppedBatches: c.droppedBatches.Load(), DroppedRecords: c.droppedRecords.Load(),
		LaggedSubscriptions: c.laggedSubs.Load(), ActiveSubscriptions: c.activeSubs.Load(),
		TotalSubscriptions: c.totalSubs.Load(),
		CachePuts:          c.cachePuts.Load(), CacheGets: c.cacheGets.Load(), CacheHits: c.cacheHits.Load(),
		CacheDeletes: c.cacheDeletes.Load(), CacheExpired: c.cacheExpired.Load(),
		ConditionFailures: c.condFailures.Load(), CounterAdds: c.counterAdds.Load(),
		ActiveWatches: c.activeWatches.Load(), WatchEvents: c.watchEvents.Load(), WatchEventEncodes: c.watchEncodes.Load(),
		LaggedWatches: c.laggedWatches.Load(), DeadLettersDropped: c.deadDropped.Load(),
	}
}

// undeclared is the not_found answer to a stream or cache this broker
// does not create on first use: retry class fatal (asking again cannot
// succeed: the client gives up at once), saying how to declare it. name
// is how the answer shows it, path its tenant/namespace/name form.
func (e *Engine) undeclared(cache bool, name, path string) *Error {
	what := "stream"
	if cache {
		what = "cache scope"
	}
	msg := what + " not found: " + name + ": this broker serves declared " + what + "s only and creates none on first use"
	if e.cfg.DeclareHint != nil {
		if h := e.cfg.DeclareHint(cache, path); h != "" {
			msg += " (" + h + ")"
		}
	}
	return &Error{Code: felix.CodeNotFound, Retry: felix.RetryFatal, Message: msg}
}
