package engine

import (
	"container/list"
	"strconv"
	"time"

	"github.com/flxproto/felix"
)

// Producer table defaults (Config.MaxProducers, MaxProducersPerShard,
// ProducerIdle).
const (
	DefaultMaxProducers         = 16384
	DefaultMaxProducersPerShard = 4096
	// DefaultMaxProducersPerTenant is one tenant's share of the table: a
	// tenant at its share makes room among its own producers.
	DefaultMaxProducersPerTenant = 4096
	DefaultProducerIdle          = 10 * time.Minute
	// firstWindow is the sequence window a new producer starts with; it
	// doubles up to Config.ProducerWindow as the producer's sequences
	// grow, so a producer that wrote once costs a few hundred bytes.
	firstWindow = 4
)

// producer is the idempotence state of one producer id on one shard.
type producer struct {
	id     uint64
	next   uint64 // next expected sequence
	recent []seqEntry
	used   time.Time // last applied or duplicate batch
	elem   *list.Element
	fresh  bool // not yet in the table (first batch being applied)
}

// producerTable is a shard's producers, most recently used first. It is
// bounded by Config.MaxProducersPerShard here and Config.MaxProducers
// engine-wide; producers idle for Config.ProducerIdle are forgotten (a
// forgotten producer's next batch is refused unknown_producer, and the
// client starts again with a new producer id, as docs/errors.md §5 says).
type producerTable struct {
	byID map[uint64]*producer
	lru  list.List // of *producer, front = most recently used
}

func newProducerTable() producerTable {
	return producerTable{byID: make(map[uint64]*producer)}
}

// checkSequence applies the idempotent producer rules (docs/errors.md §5,
// publish_refused). It returns the producer state to update (a fresh one,
// not yet in the table, for sequence 0 of an unknown producer), or the
// remembered entry of a duplicate, or a *Refusal. The caller holds sh.mu.
func (sh *shard) checkSequence(id, seq, dg uint64) (*producer, *seqEntry, error) {
	w := sh.st.e.cfg.ProducerWindow
	sh.expireProducers()
	p := sh.producers.byID[id]
	if p == nil {
		if seq != 0 {
			return nil, nil, &Refusal{Reason: RefusedUnknownProducer,
				Message: "unknown producer " + strconv.FormatUint(id, 10) + " on this shard (sequence " + strconv.FormatUint(seq, 10) + " is not 0)"}
		}
		return &producer{id: id, fresh: true}, nil, nil
	}
	sh.touch(p)
	switch {
	case seq == p.next:
		return p, nil, nil
	case seq > p.next:
		return nil, nil, &Refusal{Reason: RefusedSequenceGap, Expected: p.next,
			Message: "sequence gap: got " + strconv.FormatUint(seq, 10) + ", expected " + strconv.FormatUint(p.next, 10)}
	}
	if p.next-seq > uint64(w) || len(p.recent) == 0 {
		return nil, nil, &Refusal{Reason: RefusedSequenceExpired,
			Message: "sequence " + strconv.FormatUint(seq, 10) + " is older than the remembered window"}
	}
	ent := &p.recent[seq%uint64(len(p.recent))]
	if !ent.valid || ent.seq != seq {
		return nil, nil, &Refusal{Reason: RefusedSequenceExpired,
			Message: "sequence " + strconv.FormatUint(seq, 10) + " is no longer remembered"}
	}
	if ent.digest != dg {
		return nil, nil, &Refusal{Reason: RefusedSequenceReused,
			Message: "sequence " + strconv.FormatUint(seq, 10) + " was used for different payloads"}
	}
	cp := *ent
	return nil, &cp, nil
}

// recordSequence remembers an applied batch. A fresh producer enters the
// table only with a non-empty first batch (an empty one leaves no state),
// once admitProducer made room. The caller holds sh.mu.
func (sh *shard) recordSequence(p *producer, seq uint64, ent seqEntry, empty bool) error {
	e := sh.st.e
	if p.fresh {
		if empty {
			return nil
		}
		if err := sh.admitProducer(); err != nil {
			return err
		}
		t := &sh.producers
		p.fresh = false
		p.recent = make([]seqEntry, min(firstWindow, e.cfg.ProducerWindow))
		p.elem = t.lru.PushFront(p)
		t.byID[p.id] = p
		e.producerCount.Add(1)
		e.prodMu.Lock()
		tp := e.tenantProducersLocked(sh.st.topic.Tenant)
		tp.count++
		tp.shards[sh]++
		e.prodMu.Unlock()
		sh.touch(p)
	}
	if w := e.cfg.ProducerWindow; seq >= uint64(len(p.recent)) && len(p.recent) < w {
		// Grow the ring: below its first wrap every sequence sits at its
		// own index, so the entries keep their places.
		grown := make([]seqEntry, min(w, max(2*len(p.recent), int(seq)+1)))
		copy(grown, p.recent)
		p.recent = grown
	}
	p.recent[seq%uint64(len(p.recent))] = ent
	p.next = seq + 1
	return nil
}

func (sh *shard) touch(p *producer) {
	p.used = sh.st.e.cfg.Now()
	sh.producers.lru.MoveToFront(p.elem)
}

func (sh *shard) forget(p *producer) {
	e := sh.st.e
	sh.producers.lru.Remove(p.elem)
	delete(sh.producers.byID, p.id)
	e.producerCount.Add(-1)
	e.prodMu.Lock()
	tp := e.tenantProducersLocked(sh.st.topic.Tenant)
	tp.count--
	if tp.shards[sh]--; tp.shards[sh] <= 0 {
		delete(tp.shards, sh)
	}
	e.prodMu.Unlock()
}

// tenantProducers is one tenant's part of the producer table (guarded by
// Engine.prodMu).
type tenantProducers struct {
	count  int
	shards map[*shard]int // shards holding the tenant's producers, and how many
}

func (e *Engine) tenantProducersLocked(tenant string) *tenantProducers {
	tp := e.prodTenants[tenant]
	if tp == nil {
		tp = &tenantProducers{shards: make(map[*shard]int)}
		e.prodTenants[tenant] = tp
	}
	return tp
}

// admitProducer makes room for one more producer on sh, bounded by
// MaxProducersPerShard, the tenant's MaxProducersPerTenant and the
// engine-wide MaxProducers. A full shard, or a tenant at its share, or a
// full engine, first forgets the shard's least recently used producer;
// when the shard has none, a producer of another shard is forgotten: of
// the same tenant when the tenant is at its share, else of the tenant
// holding the most. Only if no such shard can be had without waiting is
// the batch refused (overloaded, retry_after, producer_table_full) before
// anything is written. The caller holds sh.mu (other shards' locks are
// only tried, never waited for).
func (sh *shard) admitProducer() error {
	e := sh.st.e
	t := &sh.producers
	if len(t.byID) >= e.cfg.MaxProducersPerShard {
		sh.evictLRU()
		return nil
	}
	e.prodMu.Lock()
	tp := e.tenantProducersLocked(sh.st.topic.Tenant)
	tenantFull := tp.count >= e.cfg.MaxProducersPerTenant
	if !tenantFull && e.producerCount.Load() < int64(e.cfg.MaxProducers) {
		e.prodMu.Unlock()
		return nil
	}
	if t.lru.Len() > 0 {
		e.prodMu.Unlock()
		sh.evictLRU()
		return nil
	}
	from := tp
	if !tenantFull {
		for _, o := range e.prodTenants {
			if o.count > from.count {
				from = o
			}
		}
	}
	var victims [4]*shard
	n := 0
	for v := range from.shards {
		if v != sh && n < len(victims) {
			victims[n] = v
			n++
		}
	}
	e.prodMu.Unlock()
	for _, v := range victims[:n] {
		if !v.mu.TryLock() {
			continue
		}
		ok := v.producers.lru.Len() > 0
		if ok {
			v.evictLRU()
		}
		v.mu.Unlock()
		if ok {
			return nil
		}
	}
	return &Error{Code: felix.CodeOverloaded, Retry: felix.RetryAfter, Reason: "producer_table_full",
		Message: "idempotent producer table full: retry later"}
}

// evictLRU forgets the shard's least recently used producer to make room.
// The caller holds sh.mu.
func (sh *shard) evictLRU() {
	sh.forget(sh.producers.lru.Back().Value.(*producer))
	sh.st.e.st.producersEvicted.Add(1)
}

// expireProducers forgets the shard's producers idle for longer than
// Config.ProducerIdle (oldest first; a few per call, so the cost is
// amortised over the publishes that find them).
func (sh *shard) expireProducers() {
	e := sh.st.e
	now := e.cfg.Now()
	for range 8 {
		b := sh.producers.lru.Back()
		if b == nil {
			return
		}
		p := b.Value.(*producer)
		if now.Sub(p.used) <= e.cfg.ProducerIdle {
			return
		}
		sh.forget(p)
		e.st.producersExpired.Add(1)
	}
}
