package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
)

// felix bench: a load generator over the cluster-aware client (package
// client), so that it measures what applications get, redirects, retries
// and resumes included. bench_report.go renders the report,
// bench_verify.go holds the record header and the per-publisher sequence
// bookkeeping that proves no acknowledged record was lost.

func init() {
	register(command{name: "bench", usage: "bench pub|sub|pubsub [FLAGS] STREAM", run: runBench,
		summary: "load-test a broker: records/s, MB/s, ack and delivery latency, errors, retries, resumes"})
}

// Bounds of felix bench's own resources.
const (
	maxBenchWorkers = 1024 // publishers, and subscribers
	maxBenchConns   = 256
	maxBenchBatch   = 1 << 16
	// maxTrackedPublishers bounds the publishers one subscriber keeps
	// sequence bookkeeping for (its own run's and other runs' in bench sub).
	maxTrackedPublishers = 1024
	// unackedGrace is how long subscribers wait without a record once
	// every record whose publish did not fail arrived: the rest may
	// arrive (an ambiguous outcome) or never.
	unackedGrace = 200 * time.Millisecond
	// defaultMaxSubsPerConn is the reference broker's subscriptions per
	// connection (examples/broker -max-subs-per-conn, 4096).
	defaultMaxSubsPerConn = 4096
	// latencyMaxMicros is the largest latency the histograms hold (10 min);
	// larger values are recorded as it.
	latencyMaxMicros = int64(10 * time.Minute / time.Microsecond)
)

// Ack modes of felix bench.
const (
	benchAckNone       = "none"
	benchAckBatch      = "batch"
	benchAckIdempotent = "idempotent"
)

// benchConfig is a validated felix bench command line.
type benchConfig struct {
	cf             clientFlags
	mode, stream   string
	seeds          []string
	pubs, subs     int
	conns          int
	size, batch    int
	ack            string
	keys           int
	allShards      bool
	shard          uint32
	count          int64
	duration       time.Duration
	warmup, drain  time.Duration
	progress       time.Duration
	maxSubsPerConn int
}

// publishes reports whether the mode has publishers.
func (c *benchConfig) publishes() bool { return c.mode != "sub" }

// subscribes reports whether the mode has subscribers.
func (c *benchConfig) subscribes() bool { return c.mode != "pub" }

// parseBench parses and checks a felix bench command line, refusing what
// cannot work before anything connects.
func parseBench(args []string, stderr io.Writer) (*benchConfig, error) {
	c := &benchConfig{cf: clientFlags{stderr: stderr}}
	fs := newFlagSet("bench")
	c.cf.register(fs)
	fs.IntVar(&c.pubs, "pubs", 1, "publishers (goroutines publishing batch after batch; pub and pubsub)")
	fs.IntVar(&c.subs, "subs", 1, "subscribers (sub and pubsub)")
	fs.IntVar(&c.conns, "conns", 1, "client connections (one cluster-aware client each); publishers, then subscribers, are spread over them round-robin")
	fs.IntVar(&c.size, "size", 128, fmt.Sprintf("record size in bytes (at least %d: the bench header with publisher, sequence and send time)", benchHeaderLen))
	fs.IntVar(&c.batch, "batch", 1, "records per publish batch")
	fs.StringVar(&c.ack, "ack", benchAckBatch, "acknowledgement: none (fire and forget), batch (acked per batch) or idempotent (idempotent producer)")
	fs.IntVar(&c.keys, "keys", 0, "routing keys the publishers cycle through, one per batch (0 = unkeyed: shard 0)")
	shards := fs.String("shard", "", "shard the subscribers read: a number, or all (sharded subscription); default all with -keys, else 0")
	fs.Int64Var(&c.count, "n", 0, "records per publisher to measure (bench sub: per subscriber), after the warm-up; 0 = run for -duration")
	fs.DurationVar(&c.duration, "duration", 0, "measured run time after the warm-up (default 10s when -n is not given)")
	fs.DurationVar(&c.warmup, "warmup", 0, "warm-up before measuring: its records are verified but left out of rates and latencies")
	fs.DurationVar(&c.drain, "drain", 5*time.Second, fmt.Sprintf("how long subscribers may go without a record, once publishing ended, before they stop waiting for the rest (once only records whose publish failed are missing: at most %s)", unackedGrace))
	fs.DurationVar(&c.progress, "progress", time.Second, "interval of the progress line on stderr (0 = none)")
	fs.IntVar(&c.maxSubsPerConn, "max-subs-per-conn", defaultMaxSubsPerConn, "subscriptions the broker allows per connection (the reference broker's -max-subs-per-conn)")
	if len(args) == 0 {
		return nil, usagef("missing mode: pub, sub or pubsub")
	}
	c.mode = args[0]
	if strings.HasPrefix(c.mode, "-") {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		return nil, usagef("the mode comes first: felix bench pub|sub|pubsub [FLAGS] STREAM")
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch c.mode {
	case "pub":
		if set["subs"] && c.subs != 0 {
			return nil, usagef("bench pub has no subscribers (-subs %d): use bench pubsub, or bench sub in another process", c.subs)
		}
		c.subs = 0
	case "sub":
		if set["pubs"] && c.pubs != 0 {
			return nil, usagef("bench sub has no publishers (-pubs %d): use bench pubsub, or bench pub in another process", c.pubs)
		}
		c.pubs = 0
	case "pubsub":
	default:
		return nil, usagef("unknown mode %q: want pub, sub or pubsub", c.mode)
	}
	if fs.NArg() != 1 {
		return nil, usagef("want exactly one STREAM after the flags, got %d arguments", fs.NArg())
	}
	c.stream = fs.Arg(0)
	if err := checkName("STREAM", c.stream); err != nil {
		return nil, err
	}
	for _, s := range strings.Split(c.cf.addr, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.seeds = append(c.seeds, s)
		}
	}
	if len(c.seeds) == 0 {
		return nil, usagef("-addr is empty: give a broker address (several, comma-separated, for a cluster)")
	}
	if c.publishes() && (c.pubs < 1 || c.pubs > maxBenchWorkers) {
		return nil, usagef("-pubs %d: want 1 to %d publishers", c.pubs, maxBenchWorkers)
	}
	if c.subscribes() && (c.subs < 1 || c.subs > maxBenchWorkers) {
		return nil, usagef("-subs %d: want 1 to %d subscribers", c.subs, maxBenchWorkers)
	}
	if c.conns < 1 || c.conns > maxBenchConns {
		return nil, usagef("-conns %d: want 1 to %d connections", c.conns, maxBenchConns)
	}
	if c.conns > c.pubs+c.subs {
		return nil, usagef("-conns %d is more connections than publishers and subscribers (%d): the extra ones would carry nothing", c.conns, c.pubs+c.subs)
	}
	if c.size < benchHeaderLen {
		return nil, usagef("-size %d is too small to carry the bench header (%d bytes: run, publisher, sequence number, send time), which the latency and loss checks need: use -size %d or more", c.size, benchHeaderLen, benchHeaderLen)
	}
	if c.batch < 1 || c.batch > maxBenchBatch {
		return nil, usagef("-batch %d: want 1 to %d records per batch", c.batch, maxBenchBatch)
	}
	switch c.ack {
	case "per_batch":
		c.ack = benchAckBatch
	case benchAckNone, benchAckBatch, benchAckIdempotent:
	default:
		return nil, usagef("bad -ack %q: want none, batch or idempotent", c.ack)
	}
	if c.keys < 0 || c.keys > maxBenchBatch {
		return nil, usagef("-keys %d: want 0 (unkeyed) to %d keys", c.keys, maxBenchBatch)
	}
	if c.publishes() {
		if n := c.frameLen(); n-felix.HeaderLen > felix.DefaultMaxFrameBytes {
			return nil, usagef("a batch of %d records of %d bytes is a %d-byte frame, over the %d-byte frame limit: lower -batch or -size", c.batch, c.size, n, felix.DefaultMaxFrameBytes)
		}
	}
	switch s := *shards; {
	case s == "all" || (s == "" && c.keys > 0):
		c.allShards = true
	case s == "":
	default:
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return nil, usagef("bad -shard %q: want a shard number or all", s)
		}
		c.shard = uint32(n)
		if c.mode == "pubsub" && c.keys == 0 && n != 0 {
			return nil, usagef("-shard %d with unkeyed records: they all go to shard 0 (use -keys, or -shard 0)", n)
		}
	}
	if c.count < 0 {
		return nil, usagef("-n %d: want a positive record count", c.count)
	}
	if c.duration < 0 || c.warmup < 0 || c.drain < 0 || c.progress < 0 {
		return nil, usagef("-duration, -warmup, -drain and -progress cannot be negative")
	}
	if c.count > 0 && set["duration"] {
		return nil, usagef("give -n or -duration, not both")
	}
	if c.count == 0 && c.duration == 0 {
		c.duration = 10 * time.Second
	}
	if c.maxSubsPerConn < 1 {
		return nil, usagef("-max-subs-per-conn %d: want at least 1", c.maxSubsPerConn)
	}
	if c.subscribes() {
		if per := c.subsPerConn(); per > c.maxSubsPerConn || per > conn.DefaultMaxEventStreams {
			return nil, usagef("%d subscribers on %d connection(s) is %d subscriptions per connection; the broker allows %d (-max-subs-per-conn) and a connection carries at most %d event streams: use -conns %d or more",
				c.subs, c.conns, per, c.maxSubsPerConn, conn.DefaultMaxEventStreams, (c.subs+min(c.maxSubsPerConn, conn.DefaultMaxEventStreams)-1)/min(c.maxSubsPerConn, conn.DefaultMaxEventStreams))
		}
	}
	return c, nil
}

// frameLen is the size of one publish frame of the run.
func (c *benchConfig) frameLen() int {
	rec := make([]byte, c.size)
	b := felix.PublishBatch{TenantID: c.cf.tenant, Namespace: c.cf.namespace, Stream: c.stream, Payloads: make([][]byte, c.batch)}
	for i := range b.Payloads {
		b.Payloads[i] = rec
	}
	if c.ack != benchAckNone {
		b.AckMode = felix.AckPerBatch
	}
	b.Idempotent = c.ack == benchAckIdempotent
	if c.keys > 0 {
		b.HasKey, b.Key = true, []byte(benchKey(c.keys-1))
	}
	return b.FrameLen()
}

// subsPerConn is the largest number of subscribers one connection carries
// (subscribers are spread round-robin after the publishers).
func (c *benchConfig) subsPerConn() int {
	counts := make([]int, c.conns)
	for i := range c.subs {
		counts[(c.pubs+i)%c.conns]++
	}
	return slices.Max(counts)
}

// benchKey is the routing key of key index i.
func benchKey(i int) string { return "bench-key-" + strconv.Itoa(i) }

// bench is one run.
type bench struct {
	cfg     *benchConfig
	run     uint32
	topic   client.Topic
	clients []*client.Client

	start, measureStart time.Time
	pubs                []*benchPub
	subs                []*benchSub

	// notices counts the client's notices by kind.
	notices [16]atomic.Int64

	histMu     sync.Mutex
	ackHist    *hdrhistogram.Histogram
	deliverHis *hdrhistogram.Histogram

	errMu  sync.Mutex
	errors map[string]*errorCount

	pubsDone atomic.Bool
	sentAll  atomic.Uint64 // records sent by every publisher, final once pubsDone
	expected atomic.Uint64 // of those, the ones whose publish did not fail
}

// errorCount is one error class of the report.
type errorCount struct {
	n     int64
	first string
}

// maxErrorClasses bounds the error classes of a report (the rest is
// "other").
const maxErrorClasses = 32

// countError counts err under its class.
func (b *bench) countError(err error) {
	k := benchErrorClass(err)
	b.errMu.Lock()
	defer b.errMu.Unlock()
	e := b.errors[k]
	if e == nil {
		if len(b.errors) >= maxErrorClasses {
			k = "other"
			e = b.errors[k]
		}
		if e == nil {
			msg := oneLine(err.Error())
			if len(msg) > 300 {
				msg = msg[:300] + "..."
			}
			e = &errorCount{first: msg}
			b.errors[k] = e
		}
	}
	e.n++
}

// benchErrorClass names the class of a failed publish or subscription:
// "retry class/what", from a fixed vocabulary (a broker's unknown code is
// "unknown_code", never its text).
func benchErrorClass(err error) string {
	var pr *felix.PublishRefusedError
	var be *felix.BrokerError
	var te *conn.TransportError
	var lost *client.ShardLostError
	var ce *felix.CursorError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &lost):
		return "shard_lost/" + benchErrorClass(lost.Err)
	}
	what := "other"
	switch {
	case errors.Is(err, client.ErrAmbiguous):
		what = "ambiguous"
	case errors.Is(err, client.ErrProducerStopped):
		what = "producer_stopped"
	case errors.As(err, new(*felix.LaggedError)):
		what = "lagged"
	case errors.As(err, &ce):
		what = "cursor"
		if ce.Reason == "too_old" || ce.Reason == "in_future" {
			what += ":" + ce.Reason
		}
	case errors.As(err, &pr):
		what = "publish_refused"
		switch pr.Reason {
		case "unknown_producer", "sequence_expired", "sequence_reused", "sequence_gap", "offset_mismatch", "not_leader":
			what += ":" + pr.Reason
		}
	case errors.As(err, &be):
		what = "unknown_code"
		if be.Code.Known() {
			what = string(be.Code)
		}
	case errors.As(err, &te):
		what = "transport"
	case errors.Is(err, client.ErrCannotResume):
		what = "cannot_resume"
	}
	return client.RetryClassOf(err).String() + "/" + what
}

// notice counts a client notice.
func (b *bench) notice(n client.Notice) {
	if int(n.Kind) < len(b.notices) {
		b.notices[n.Kind].Add(1)
	}
}

// latencyBuf collects latencies of one goroutine before they go into a
// shared histogram, so the histogram lock is taken once per 256 values.
type latencyBuf struct{ v []int64 }

func (l *latencyBuf) add(b *bench, h *hdrhistogram.Histogram, d time.Duration) {
	us := max(int64(d/time.Microsecond), 0)
	l.v = append(l.v, min(us, latencyMaxMicros))
	if len(l.v) == cap(l.v) {
		l.flush(b, h)
	}
}

func (l *latencyBuf) flush(b *bench, h *hdrhistogram.Histogram) {
	b.histMu.Lock()
	for _, v := range l.v {
		_ = h.RecordValue(v) // in range: clamped above
	}
	b.histMu.Unlock()
	l.v = l.v[:0]
}

// newLatencyHist returns a histogram of 1 µs to 10 min with three
// significant digits.
func newLatencyHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, latencyMaxMicros, 3) }

// workerStats are a publisher's or subscriber's counters.
type workerStats struct {
	records  atomic.Int64 // every record, warm-up included (progress)
	mRecords int64        // measured records (after the warm-up)
	mBytes   int64
	first    time.Time // first measured record (sent or received)
	last     time.Time // last measured record (acked or received)
	errors   int64
	stopErr  error // the error that stopped the worker, if any
}

// measured counts n records of size bytes at t0..t1.
func (w *workerStats) measured(n, bytes int64, t0, t1 time.Time) {
	if w.first.IsZero() {
		w.first = t0
	}
	w.last = t1
	w.mRecords += n
	w.mBytes += bytes
}

// benchPub is one publisher.
type benchPub struct {
	workerStats
	idx     int
	c       *client.Client
	prod    *client.Producer
	sent    atomic.Uint64 // records sent (sequence numbers used)
	batches int64
	unacked rangeList // sequence ranges whose publish was not acknowledged
}

// benchSub is one subscriber.
type benchSub struct {
	workerStats
	idx      int
	c        *client.Client
	one      *client.Subscription
	sharded  *client.ShardedSubscription
	seqs     map[[2]uint32]*seqSet // (run, publisher) → sequence numbers received
	foreign  int64                 // records without a bench header
	untrack  int64                 // records of publishers past maxTrackedPublishers
	ownSeen  atomic.Uint64         // distinct records of this run's publishers
	lastRecv atomic.Int64          // Unix nanoseconds of the last record
}

// next returns the next record's payload.
func (s *benchSub) next(ctx context.Context) ([]byte, error) {
	if s.sharded != nil {
		ev, err := s.sharded.Next(ctx)
		return ev.Payload, err
	}
	ev, err := s.one.Next(ctx)
	return ev.Payload, err
}

func (s *benchSub) close() {
	if s.sharded != nil {
		s.sharded.Close()
	} else if s.one != nil {
		s.one.Close()
	}
}

func runBench(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "raw" {
		return runBenchRaw(ctx, args[1:], stdin, stdout, stderr) // bench_raw.go
	}
	cfg, err := parseBench(args, stderr)
	if err != nil {
		return err
	}
	b := &bench{cfg: cfg, run: rand.Uint32(), errors: map[string]*errorCount{},
		topic:   client.Topic{TenantID: cfg.cf.tenant, Namespace: cfg.cf.namespace, Stream: cfg.stream},
		ackHist: newLatencyHist(), deliverHis: newLatencyHist()}
	defer b.close()
	if err := b.setup(ctx); err != nil {
		return err
	}
	b.runLoad(ctx, stderr)
	rep := b.report(ctx.Err() != nil)
	if err := rep.write(stdout, cfg.cf.jsonOut); err != nil {
		return err
	}
	return rep.failure()
}

// close closes every subscription and client.
func (b *bench) close() {
	for _, s := range b.subs {
		s.close()
	}
	for _, c := range b.clients {
		c.Close()
	}
}

// setup connects the clients, creates the producers and subscribes, so
// that every subscriber is in place before the first record is sent.
func (b *bench) setup(ctx context.Context) error {
	cfg := b.cfg
	cc, err := cfg.cf.connConfig(0)
	if err != nil {
		return err
	}
	for range cfg.conns {
		dctx, cancel := cfg.cf.timeoutCtx(ctx)
		c, err := client.Dial(dctx, client.Config{Seeds: cfg.seeds, Conn: cc, OnNotice: b.notice})
		cancel()
		if err != nil {
			return cfg.cf.explain("connect", err)
		}
		b.clients = append(b.clients, c)
	}
	for i := range cfg.pubs {
		p := &benchPub{idx: i, c: b.clients[i%cfg.conns]}
		if cfg.ack == benchAckIdempotent {
			pctx, cancel := cfg.cf.timeoutCtx(ctx)
			p.prod, err = p.c.NewProducer(pctx)
			cancel()
			if err != nil {
				if errors.Is(err, felix.ErrNotAdvertised) {
					return fmt.Errorf("-ack idempotent: the broker does not offer idempotent producers (%v): use -ack batch", err)
				}
				return cfg.cf.explain(fmt.Sprintf("publisher %d: producer_init", i), err)
			}
		}
		b.pubs = append(b.pubs, p)
	}
	for i := range cfg.subs {
		c := b.clients[(cfg.pubs+i)%cfg.conns]
		s := &benchSub{idx: i, c: c, seqs: map[[2]uint32]*seqSet{}}
		sctx, cancel := cfg.cf.timeoutCtx(ctx)
		if cfg.allShards {
			s.sharded, err = c.SubscribeSharded(sctx, b.topic, client.ShardedOptions{})
		} else {
			s.one, err = c.Subscribe(sctx, b.topic, client.SubscribeOptions{Shard: cfg.shard})
		}
		cancel()
		if err != nil {
			return b.subscribeError(i, err)
		}
		b.subs = append(b.subs, s)
	}
	return nil
}

// subscribeError explains why subscriber i could not subscribe.
func (b *bench) subscribeError(i int, err error) error {
	var be *felix.BrokerError
	switch {
	case errors.As(err, &be) && be.Code == felix.CodeLimitExceeded:
		return fmt.Errorf("subscriber %d: the broker refused one more subscription on its connection (%v): it allows fewer than this run's %d per connection; use more -conns (and set -max-subs-per-conn to the broker's limit)", i, err, b.cfg.subsPerConn())
	case errors.Is(err, client.ErrUnknownStream):
		return fmt.Errorf("subscriber %d: stream %s has no shards yet, so -shard all has nothing to read: declare the stream on the broker (examples/broker -stream TENANT/NS/NAME:shards=N) or publish to it first", i, b.cfg.stream)
	}
	return b.cfg.cf.explain(fmt.Sprintf("subscriber %d: subscribe to %s", i, b.cfg.stream), err)
}

// runLoad runs the publishers and subscribers to the end of the run.
func (b *bench) runLoad(ctx context.Context, stderr io.Writer) {
	cfg := b.cfg
	b.start = time.Now()
	b.measureStart = b.start.Add(cfg.warmup)
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	if !cfg.publishes() && cfg.count == 0 {
		var cancel context.CancelFunc
		subCtx, cancel = context.WithDeadline(subCtx, b.measureStart.Add(cfg.duration))
		defer cancel()
	}
	var subWG, pubWG sync.WaitGroup
	for _, s := range b.subs {
		subWG.Go(func() { b.subscriber(subCtx, s) })
	}
	for _, p := range b.pubs {
		pubWG.Go(func() { b.publisher(ctx, p) })
	}
	stopProgress := b.startProgress(stderr)
	defer stopProgress()
	pubWG.Wait()
	var sent, expected uint64
	for _, p := range b.pubs {
		n := p.sent.Load()
		sent += n
		expected += n - p.unacked.count() // publishes not refused nor cut
	}
	b.sentAll.Store(sent)
	b.expected.Store(expected)
	b.pubsDone.Store(true)
	if !cfg.publishes() {
		subWG.Wait()
		return
	}
	// Wait for the subscribers to get every record, or to go -drain
	// without one; once only records whose publish failed are missing
	// (they may never come), wait at most unackedGrace without one.
	subsDone := make(chan struct{})
	go func() { subWG.Wait(); close(subsDone) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	lastSeen, lastChange := b.delivered(), time.Now()
	for {
		select {
		case <-subsDone:
			return
		case <-ctx.Done():
			stopSubs()
			<-subsDone
			return
		case now := <-tick.C:
			all, acked := true, true
			for _, s := range b.subs {
				seen := s.ownSeen.Load()
				all = all && seen >= sent
				acked = acked && seen >= expected
			}
			if n := b.delivered(); n != lastSeen {
				lastSeen, lastChange = n, now
			}
			wait := cfg.drain
			if acked {
				wait = min(wait, unackedGrace)
			}
			if all || now.Sub(lastChange) >= wait {
				stopSubs()
				<-subsDone
				return
			}
		}
	}
}

// drainNote says, once publishing ended, what the subscribers still wait
// for: the records the slowest one has not received yet.
func (b *bench) drainNote() string {
	sent, expected := b.sentAll.Load(), b.expected.Load()
	least := sent
	for _, s := range b.subs {
		least = min(least, s.ownSeen.Load())
	}
	if least >= expected {
		return fmt.Sprintf("  (draining: %d records whose publish failed, at most %s more)", sent-least, unackedGrace)
	}
	return fmt.Sprintf("  (draining: %d records to come, at most -drain %s without one)", expected-least, b.cfg.drain)
}

// delivered is the number of records every subscriber received so far.
func (b *bench) delivered() int64 {
	var n int64
	for _, s := range b.subs {
		n += s.records.Load()
	}
	return n
}

// publisher publishes batch after batch until the run's end.
func (b *bench) publisher(ctx context.Context, p *benchPub) {
	cfg := b.cfg
	end := b.measureStart.Add(cfg.duration)
	measureNano := b.measureStart.UnixNano()
	buf := make([]byte, cfg.batch*cfg.size)
	for i := range buf {
		buf[i] = byte(i)
	}
	payloads := make([][]byte, cfg.batch)
	for i := range payloads {
		payloads[i] = buf[i*cfg.size : (i+1)*cfg.size : (i+1)*cfg.size]
	}
	var lat latencyBuf
	lat.v = make([]int64, 0, 256)
	defer lat.flush(b, b.ackHist)
	ack := felix.AckPerBatch
	if cfg.ack == benchAckNone {
		ack = felix.AckNone
	}
	keys := make([][]byte, cfg.keys)
	for i := range keys {
		keys[i] = []byte(benchKey(i))
	}
	var seq uint64
	for ctx.Err() == nil {
		t0 := time.Now()
		if cfg.count > 0 && p.mRecords >= cfg.count || cfg.count == 0 && !t0.Before(end) {
			return
		}
		// Measured or warm-up is decided once, by the wall-clock time the
		// records carry: a subscriber decides by that stamp too, so a batch
		// at the boundary is never warm-up to one side and measured to the
		// other (t0.Before would compare monotonic readings, which differ
		// from the wall clock when it is slewed or stepped).
		sent := t0.UnixNano()
		measured := sent >= measureNano
		for i, pl := range payloads {
			putBenchHeader(pl, benchHeader{run: b.run, pub: uint32(p.idx), seq: seq + uint64(i), sentNano: sent})
		}
		var key []byte
		if cfg.keys > 0 {
			key = keys[p.batches%int64(cfg.keys)]
		}
		pctx, cancel := cfg.cf.timeoutCtx(ctx)
		var err error
		if p.prod != nil {
			_, err = p.prod.PublishBatch(pctx, b.topic, payloads, client.PublishOptions{Key: key})
		} else {
			_, err = p.c.PublishBatch(pctx, b.topic, payloads, client.PublishOptions{Ack: ack, NoAck: ack == felix.AckNone, Key: key})
		}
		cancel()
		t1 := time.Now()
		n := uint64(cfg.batch)
		p.batches++
		if err != nil {
			p.unacked.add(seq, seq+n)
			if ctx.Err() == nil {
				p.errors++
				b.countError(err)
				if stopsPublisher(err) {
					p.stopErr = err
					seq += n
					p.sent.Store(seq)
					return
				}
			}
		} else if ack != felix.AckNone {
			if measured {
				lat.add(b, b.ackHist, t1.Sub(t0))
			}
		}
		if measured {
			p.measured(int64(n), int64(n)*int64(cfg.size), t0, t1)
		}
		seq += n
		p.sent.Store(seq)
		p.records.Add(int64(n))
	}
}

// stopsPublisher reports whether a publish error ends the publisher: a
// refusal no re-send can mend (fatal class: forbidden, invalid request, a
// stopped producer, ...). Ambiguous outcomes, timeouts and retryable
// failures the client gave up on do not: the next batch is tried.
func stopsPublisher(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, client.ErrAmbiguous) {
		return false
	}
	var te *conn.TransportError
	if errors.As(err, &te) {
		return false
	}
	return client.RetryClassOf(err) == felix.RetryFatal
}

// subscriber reads records until ctx ends (or, in bench sub with -n, it
// has measured that many).
func (b *bench) subscriber(ctx context.Context, s *benchSub) {
	cfg := b.cfg
	var lat latencyBuf
	lat.v = make([]int64, 0, 256)
	defer lat.flush(b, b.deliverHis)
	measureNano := b.measureStart.UnixNano()
	for {
		payload, err := s.next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, client.ErrClosed) {
				return
			}
			s.errors++
			b.countError(err)
			if errors.As(err, new(*client.ShardLostError)) {
				continue // the other shards deliver on
			}
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				s.stopErr = err
			}
			return
		}
		now := time.Now()
		s.records.Add(1)
		s.lastRecv.Store(now.UnixNano())
		h, ok := parseBenchHeader(payload)
		if !ok {
			s.foreign++
			if !now.Before(b.measureStart) {
				s.measured(1, int64(len(payload)), now, now)
			}
		} else {
			if h.sentNano >= measureNano {
				s.measured(1, int64(len(payload)), now, now)
				lat.add(b, b.deliverHis, now.Sub(time.Unix(0, h.sentNano)))
			}
			k := [2]uint32{h.run, h.pub}
			set := s.seqs[k]
			if set == nil && h.seq < maxBenchSeq && len(s.seqs) < maxTrackedPublishers && (h.run != b.run || int(h.pub) < len(b.pubs)) {
				set = &seqSet{}
				if h.run != b.run {
					// Another process's publisher (bench sub): count gaps
					// from the first record received, not from the
					// records sent before this subscription.
					set.base = h.seq
				}
				s.seqs[k] = set
			}
			if set == nil || h.seq >= maxBenchSeq {
				s.untrack++
			} else {
				before := set.unique
				set.add(h.seq)
				if h.run == b.run && set.unique > before {
					s.ownSeen.Add(1)
				}
			}
		}
		if !cfg.publishes() && cfg.count > 0 && s.mRecords >= cfg.count {
			return
		}
	}
}

// startProgress prints one progress line per interval on w until the
// returned function is called.
func (b *bench) startProgress(w io.Writer) (stop func()) {
	if b.cfg.progress <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(b.cfg.progress)
		defer t.Stop()
		var lastPub, lastSub int64
		last := b.start
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				var pub, sub int64
				for _, p := range b.pubs {
					pub += p.records.Load()
				}
				sub = b.delivered()
				dt := now.Sub(last).Seconds()
				line := fmt.Sprintf("bench %6.1fs", now.Sub(b.start).Seconds())
				if now.Before(b.measureStart) {
					line += " (warm-up)"
				}
				if b.cfg.publishes() {
					line += fmt.Sprintf("  pub %s rec/s (%d)", rate(float64(pub-lastPub)/dt), pub)
				}
				if b.cfg.subscribes() {
					line += fmt.Sprintf("  sub %s rec/s (%d)", rate(float64(sub-lastSub)/dt), sub)
				}
				b.errMu.Lock()
				var errs int64
				for _, e := range b.errors {
					errs += e.n
				}
				b.errMu.Unlock()
				line += fmt.Sprintf("  errors %d  redirects %d  retries %d  resumes %d", errs,
					b.notices[client.NoticeRedirect].Load(), b.notices[client.NoticeRetry].Load(), b.notices[client.NoticeResumed].Load())
				if b.cfg.publishes() && b.cfg.subscribes() && b.pubsDone.Load() {
					line += b.drainNote()
				}
				fmt.Fprintln(w, line)
				lastPub, lastSub, last = pub, sub, now
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// rate formats a rate with a k/M suffix.
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
