package conn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// This file is a tiny in-test broker built on the server API (Listen,
// Stream, EventStream). It keeps records in memory per stream, fans them
// out to subscribers, and serves caches, counters and watches. Streams named
// "stall..." are never answered (to test cancellation) and streams named
// "missing..." do not exist.

type brokerOpts struct {
	offer       felix.BrokerOffer
	legacy      bool // answer every auth with ok
	ackOffsets  bool // ack after the "write", with offsets
	helloLate   bool // write subscribed before opening the event stream
	requireALPN bool
	auth        Authenticator
	authTimeout time.Duration
	maxFrame    uint32
	srvTLS      *tls.Config // server certificate (default: a fresh SelfSigned)
	server      func(*ServerConfig)
}

type testBroker struct {
	t    testing.TB
	ln   *Listener
	pool *x509.CertPool
	o    brokerOpts

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	topics   map[string]*topicLog
	cache    map[string]cacheEntry
	counters map[string]int64
	watches  map[*testWatch]struct{}
	seen     []felix.Flags // flag words of publish frames, in arrival order
	seenJSON []string      // types of JSON requests, in arrival order
	seqs     []string      // stream/key:sequence of idempotent publishes
	conns    []*ServerConn
	subID    atomic.Uint64
	prodID   atomic.Uint64
	cacheOff uint64
}

type topicLog struct {
	recs [][]byte
	subs map[*testSub]struct{}
}

type cacheEntry struct {
	v   []byte
	exp time.Time
}

type testSub struct {
	es *EventStream
	ch chan any // [][]byte with base offset, or felix.Message (terminal)
}

// endSub ends a subscription with a plain FIN.
type endSub struct{}

type batchAt struct {
	base uint64
	recs [][]byte
}

type testWatch struct {
	es     *EventStream
	key    felix.Opt[string]
	prefix felix.Opt[string]
	ch     chan felix.Message
}

func fullOffer() felix.BrokerOffer {
	return felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.AllFeatures, PublishWindow: 64}
}

func startBroker(t testing.TB, o brokerOpts) *testBroker {
	t.Helper()
	srvTLS, pool, err := SelfSigned()
	require.NoError(t, err)
	if o.srvTLS != nil {
		srvTLS = o.srvTLS
	}
	scfg := &ServerConfig{TLS: srvTLS, Offer: o.offer, LegacyAuth: o.legacy,
		Authenticate: o.auth, AuthTimeout: o.authTimeout, MaxFrameBytes: o.maxFrame, RequireALPN: o.requireALPN}
	if o.server != nil {
		o.server(scfg)
	}
	ln, err := Listen("127.0.0.1:0", scfg)
	require.NoError(t, err)
	b := &testBroker{t: t, ln: ln, pool: pool, o: o, topics: map[string]*topicLog{}, cache: map[string]cacheEntry{},
		counters: map[string]int64{}, watches: map[*testWatch]struct{}{}}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.wg.Add(1)
	go b.acceptLoop()
	t.Cleanup(b.close)
	return b
}

func (b *testBroker) addr() string { return b.ln.Addr().String() }

func (b *testBroker) clientConfig() *Config {
	return &Config{TLS: &tls.Config{RootCAs: b.pool}, TenantID: "t1", Token: "tok"}
}

func (b *testBroker) dial(t testing.TB, mod func(*Config)) *Client {
	t.Helper()
	cfg := b.clientConfig()
	if mod != nil {
		mod(cfg)
	}
	c, err := Dial(deadlineCtx(t), b.addr(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func (b *testBroker) close() {
	b.cancel()
	b.ln.Close()
	b.wg.Wait()
}

func (b *testBroker) acceptLoop() {
	defer b.wg.Done()
	for {
		sc, err := b.ln.Accept(b.ctx)
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, sc)
		b.mu.Unlock()
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for {
				st, err := sc.AcceptStream(b.ctx)
				if err != nil {
					return
				}
				if !sc.Authenticated() || st.Auth() == nil || st.Conn() != sc {
					b.t.Errorf("stream handed over without authentication")
				}
				b.wg.Add(1)
				go func() {
					defer b.wg.Done()
					b.serve(st)
				}()
			}
		}()
	}
}

func topicKey(tenant, ns, stream string) string { return tenant + "/" + ns + "/" + stream }

func (b *testBroker) seenFlags() []felix.Flags {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]felix.Flags(nil), b.seen...)
}

func (b *testBroker) seenTypes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seenJSON...)
}

// append stores records and fans them out; it returns the first offset.
func (b *testBroker) append(key string, recs [][]byte) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	tl := b.topic(key)
	base := uint64(len(tl.recs))
	cp := make([][]byte, len(recs))
	for i, r := range recs {
		cp[i] = append([]byte(nil), r...)
	}
	tl.recs = append(tl.recs, cp...)
	for s := range tl.subs {
		select {
		case s.ch <- batchAt{base: base, recs: cp}:
		default: // a test subscriber that falls 1024 batches behind loses them
		}
	}
	return base
}

func (b *testBroker) topic(key string) *topicLog {
	tl := b.topics[key]
	if tl == nil {
		tl = &topicLog{subs: map[*testSub]struct{}{}}
		b.topics[key] = tl
	}
	return tl
}

// terminate sends a terminal message to every subscriber of key.
func (b *testBroker) terminate(key string, mk func(id uint64) felix.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.topic(key).subs {
		if m := mk(s.es.SubscriptionID()); m != nil {
			s.ch <- m
		} else {
			s.ch <- endSub{}
		}
		delete(b.topics[key].subs, s)
	}
}

func (b *testBroker) subscribers(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.topic(key).subs)
}

func (b *testBroker) serve(st *Stream) {
	defer st.Close()
	for {
		req, err := st.ReadRequest(st.Conn().Context())
		if err != nil {
			if !errors.Is(err, io.EOF) {
				st.Abort()
			}
			return
		}
		if req.Flags != 0 {
			if !b.binaryPublish(st, req) {
				return
			}
			continue
		}
		b.mu.Lock()
		b.seenJSON = append(b.seenJSON, req.Message.MessageType())
		b.mu.Unlock()
		if !b.handle(st, req.Message) {
			return
		}
	}
}

// binaryPublish handles a binary publish frame; false ends the stream.
func (b *testBroker) binaryPublish(st *Stream, req Request) bool {
	b.mu.Lock()
	b.seen = append(b.seen, req.Flags)
	b.mu.Unlock()
	switch req.Flags.Layout() {
	case felix.LayoutPublishBatch:
		v, err := felix.ParsePublishBatch(req.Flags, req.Payload)
		if err != nil {
			st.Abort()
			return false
		}
		if strings.HasPrefix(string(v.Stream), "missing") {
			return true
		}
		if strings.HasPrefix(string(v.Stream), "freeze") {
			// Stop reading the stream: the client's later frames block on
			// QUIC flow control.
			<-b.ctx.Done()
			return false
		}
		b.append(topicKey(string(v.TenantID), string(v.Namespace), string(v.Stream)), collect(v.Payloads()))
		return true
	case felix.LayoutAckedPublishBatch:
		pre, err := felix.PeekAckedPrefix(req.Flags, req.Payload)
		if err != nil {
			st.Abort()
			return false
		}
		v, err := felix.ParsePublishBatch(req.Flags, req.Payload)
		if err != nil {
			return b.ack(st, pre, 0, &felix.BrokerError{Message: "malformed publish batch", Code: felix.CodeInvalidRequest}, false)
		}
		if strings.HasPrefix(string(v.Stream), "stall") {
			return true
		}
		if strings.HasPrefix(string(v.Stream), "freeze") {
			// Stop reading the stream: the client's later frames block on
			// QUIC flow control.
			<-b.ctx.Done()
			return false
		}
		if strings.HasPrefix(string(v.Stream), "missing") {
			return b.ack(st, pre, 0, &felix.BrokerError{Message: "stream not found", Code: felix.CodeNotFound}, false)
		}
		recs := collect(v.Payloads())
		if pre.Idempotent {
			b.recordSeq(string(v.Stream), v.Key, pre.Sequence)
		}
		if len(recs) > 0 && string(recs[0]) == "refuse" {
			return b.ack(st, pre, 0, nil, true)
		}
		base := b.append(topicKey(string(v.TenantID), string(v.Namespace), string(v.Stream)), recs)
		return b.ack(st, pre, base, nil, false)
	}
	return st.WriteError(b.ctx, &felix.BrokerError{Message: "unexpected frame", Code: felix.CodeInvalidRequest}) == nil
}

func (b *testBroker) recordSeq(stream string, key []byte, seq uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seqs = append(b.seqs, fmt.Sprintf("%s/%s:%d", stream, key, seq))
}

func collect(seq func(func([]byte) bool)) [][]byte {
	var out [][]byte
	for p := range seq {
		out = append(out, p)
	}
	return out
}

func (b *testBroker) ack(st *Stream, pre felix.AckedPrefix, base uint64, fail *felix.BrokerError, refuse bool) bool {
	if pre.Idempotent && refuse {
		return st.WriteMessage(b.ctx, &felix.PublishRefused{RequestID: pre.RequestID, Reason: felix.PublishRefusalReason{Kind: felix.RefusalSequenceReused},
			Message: "sequence reused"}) == nil
	}
	if pre.Idempotent {
		if fail != nil {
			return st.WriteMessage(b.ctx, &felix.PublishError{RequestID: pre.RequestID, Message: fail.Message, Code: felix.Some(fail.Code)}) == nil
		}
		ok := &felix.PublishOK{RequestID: pre.RequestID}
		if b.o.ackOffsets {
			ok.Offset = felix.Some(base)
		}
		return st.WriteMessage(b.ctx, ok) == nil
	}
	a := felix.PublishAck{Status: felix.AckOK, RequestID: pre.RequestID}
	if fail != nil {
		a = felix.PublishAck{Status: felix.AckError, RequestID: pre.RequestID, Message: fail.Message, Code: fail.Code, Retry: fail.Code.DefaultRetry()}
	} else if b.o.ackOffsets {
		a.HasOffset, a.Offset = true, base
	}
	a = a.Restrict(st.Peer().Flags)
	fr, err := felix.AppendPublishAck(nil, &a)
	if err != nil {
		b.t.Errorf("encode ack: %v", err)
		return false
	}
	return st.WriteEncoded(b.ctx, fr) == nil
}

func (b *testBroker) publishAnswer(st *Stream, rid uint64, stream string, base uint64) bool {
	if strings.HasPrefix(stream, "missing") {
		return st.WriteMessage(b.ctx, &felix.PublishError{RequestID: rid, Message: "stream not found", Code: felix.Some(felix.CodeNotFound),
			Retry: felix.Some(felix.RetryAfter)}) == nil
	}
	ok := &felix.PublishOK{RequestID: rid}
	if b.o.ackOffsets {
		ok.Offset = felix.Some(base)
	}
	return st.WriteMessage(b.ctx, ok) == nil
}

// handle serves one JSON request; false ends the stream.
func (b *testBroker) handle(st *Stream, m felix.Message) bool {
	switch r := m.(type) {
	case *felix.Publish:
		return b.jsonPublish(st, r.TenantID, r.Namespace, r.Stream, [][]byte{r.Payload}, r.Ack, r.RequestID)
	case *felix.PublishBatchMessage:
		return b.jsonPublish(st, r.TenantID, r.Namespace, r.Stream, r.Payloads, r.Ack, r.RequestID)
	case *felix.ProducerInit:
		return st.WriteMessage(b.ctx, &felix.ProducerInitOK{RequestID: r.RequestID, ProducerID: 1000 + b.prodID.Add(1)}) == nil
	case *felix.PublishIdempotent:
		b.recordSeq(r.Stream, r.Key.V, r.Sequence)
		if strings.HasPrefix(r.Stream, "stall") {
			return true
		}
		if len(r.Payloads) > 0 && string(r.Payloads[0]) == "refuse" {
			return st.WriteMessage(b.ctx, &felix.PublishRefused{RequestID: r.RequestID, Reason: felix.PublishRefusalReason{Kind: felix.RefusalSequenceReused},
				Message: "sequence reused"}) == nil
		}
		base := b.append(topicKey(r.TenantID, r.Namespace, r.Stream), r.Payloads)
		return b.publishAnswer(st, r.RequestID, r.Stream, base)
	case *felix.Subscribe:
		b.subscribe(st, r)
		return false
	case *felix.CachePut:
		if strings.HasPrefix(r.Cache, "stall") {
			return true
		}
		if strings.HasPrefix(r.Cache, "missing") {
			return st.WriteError(b.ctx, &felix.BrokerError{Message: "cache scope not found", Code: felix.CodeNotFound}) == nil
		}
		e := cacheEntry{v: r.Value}
		if r.TTLMs.Set {
			e.exp = time.Now().Add(time.Duration(r.TTLMs.V) * time.Millisecond)
		}
		key := topicKey(r.TenantID, r.Namespace, r.Cache) + "/" + r.Key
		b.mu.Lock()
		b.cache[key] = e
		b.cacheOff++
		b.notifyWatches(r.Key, felix.Some(r.Value), b.cacheOff)
		b.mu.Unlock()
		if !r.RequestID.Set {
			return st.WriteMessage(b.ctx, &felix.OK{}) == nil
		}
		return st.WriteMessage(b.ctx, &felix.CacheOK{RequestID: r.RequestID.V}) == nil
	case *felix.CacheGet:
		if strings.HasPrefix(r.Cache, "stall") {
			return true
		}
		key := topicKey(r.TenantID, r.Namespace, r.Cache) + "/" + r.Key
		b.mu.Lock()
		e, ok := b.cache[key]
		if ok && !e.exp.IsZero() && time.Now().After(e.exp) {
			ok = false
		}
		b.mu.Unlock()
		cv := &felix.CacheValue{TenantID: r.TenantID, Namespace: r.Namespace, Cache: r.Cache, Key: r.Key, RequestID: r.RequestID}
		if ok {
			cv.Value = felix.Some(e.v)
		}
		return st.WriteMessage(b.ctx, cv) == nil
	case *felix.CacheDelete:
		key := topicKey(r.TenantID, r.Namespace, r.Cache) + "/" + r.Key
		b.mu.Lock()
		e, ok := b.cache[key]
		delete(b.cache, key)
		b.cacheOff++
		b.notifyWatches(r.Key, felix.Opt[[]byte]{}, b.cacheOff)
		b.mu.Unlock()
		cv := &felix.CacheValue{TenantID: r.TenantID, Namespace: r.Namespace, Cache: r.Cache, Key: r.Key, RequestID: r.RequestID}
		if ok {
			cv.Value = felix.Some(e.v)
		}
		return st.WriteMessage(b.ctx, cv) == nil
	case *felix.CounterAdd:
		key := topicKey(r.TenantID, r.Namespace, r.Cache) + "/" + r.Key
		b.mu.Lock()
		b.counters[key] += r.Delta
		v := b.counters[key]
		b.mu.Unlock()
		return st.WriteMessage(b.ctx, &felix.CounterValue{Value: felix.Some(v), RequestID: r.RequestID}) == nil
	case *felix.CounterGet:
		key := topicKey(r.TenantID, r.Namespace, r.Cache) + "/" + r.Key
		b.mu.Lock()
		v, ok := b.counters[key]
		b.mu.Unlock()
		cv := &felix.CounterValue{RequestID: r.RequestID}
		if ok {
			cv.Value = felix.Some(v)
		}
		return st.WriteMessage(b.ctx, cv) == nil
	case *felix.CacheWatch:
		b.watch(st, r)
		return false
	case *felix.UnknownMessage:
		if st.Peer().Unsupported(b.o.offer.Features.Has(felix.FeatureUnsupported)) {
			return st.WriteMessage(b.ctx, &felix.Unsupported{RequestType: r.Type, RequestID: r.RequestID()}) == nil
		}
		return false
	}
	st.WriteError(b.ctx, &felix.BrokerError{Message: "unexpected message type", Code: felix.CodeInvalidRequest})
	return false
}

func (b *testBroker) jsonPublish(st *Stream, tenant, ns, stream string, recs [][]byte, ack felix.Opt[felix.AckMode], rid felix.Opt[uint64]) bool {
	acked := !ack.Set || ack.V != felix.AckNone
	if acked && !rid.Set {
		st.WriteError(b.ctx, &felix.BrokerError{Message: "missing request_id for acked publish", Code: felix.CodeInvalidRequest})
		return false
	}
	if strings.HasPrefix(stream, "stall") {
		return true
	}
	base := uint64(0)
	if !strings.HasPrefix(stream, "missing") {
		base = b.append(topicKey(tenant, ns, stream), recs)
	}
	if !acked {
		return true
	}
	return b.publishAnswer(st, rid.V, stream, base)
}

func (b *testBroker) subscribe(st *Stream, r *felix.Subscribe) {
	if strings.HasPrefix(r.Stream, "stall") {
		<-st.Context().Done()
		return
	}
	if strings.HasPrefix(r.Stream, "missing") {
		st.WriteError(b.ctx, &felix.BrokerError{Message: "stream not found", Code: felix.CodeNotFound})
		return
	}
	if strings.HasPrefix(r.Stream, "nohello") {
		// subscribed, but the event stream never comes.
		st.WriteMessage(b.ctx, &felix.Subscribed{SubscriptionID: 1 << 40})
		return
	}
	key := topicKey(r.TenantID, r.Namespace, r.Stream)
	b.mu.Lock()
	tl := b.topic(key)
	from := uint64(len(tl.recs))
	if r.Start.Set {
		switch r.Start.V.Kind {
		case felix.StartEarliest:
			from = 0
		case felix.StartOffset:
			from = r.Start.V.Offset
		}
	}
	if from > uint64(len(tl.recs)) {
		avail := uint64(len(tl.recs))
		b.mu.Unlock()
		st.WriteMessage(b.ctx, &felix.SubscribeCursorError{Reason: felix.CursorInFuture, Requested: from, Available: avail})
		return
	}
	history := tl.recs[from:]
	b.mu.Unlock()
	id := b.subID.Add(1)
	ans := &felix.Subscribed{SubscriptionID: id}
	if r.QueueCapacity.Set {
		ans.QueueCapacity = r.QueueCapacity
	}
	if b.o.helloLate {
		if st.WriteMessage(b.ctx, ans) != nil {
			return
		}
	}
	es, err := st.OpenEventStream(b.ctx, id)
	if err != nil {
		return
	}
	s := &testSub{es: es, ch: make(chan any, 1024)}
	b.mu.Lock()
	// Records appended between the history snapshot and registration.
	if extra := tl.recs[from+uint64(len(history)):]; len(extra) > 0 {
		history = tl.recs[from:]
	}
	tl.subs[s] = struct{}{}
	b.mu.Unlock()
	if !b.o.helloLate {
		if st.WriteMessage(b.ctx, ans) != nil {
			es.Abort()
			return
		}
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() {
			b.mu.Lock()
			delete(tl.subs, s)
			b.mu.Unlock()
		}()
		b.runSub(s, from, history)
	}()
}

func (b *testBroker) runSub(s *testSub, from uint64, history [][]byte) {
	write := func(base uint64, recs [][]byte) error {
		eb := &felix.EventBatch{HasBaseOffset: true, BaseOffset: base, HasPublisher: true, Publisher: []byte("pub"),
			HasTimestamps: true, Payloads: recs}
		for range recs {
			eb.Timestamps = append(eb.Timestamps, uint64(1_700_000_000_000_000))
		}
		fr, err := felix.AppendEventBatch(nil, eb, s.es.Peer().EventFlags())
		if err != nil {
			return err
		}
		return s.es.WriteEncoded(b.ctx, fr)
	}
	if len(history) > 0 {
		if write(from, history) != nil {
			s.es.Abort()
			return
		}
	}
	next := from + uint64(len(history))
	for {
		select {
		case x := <-s.ch:
			switch v := x.(type) {
			case batchAt:
				if v.base+uint64(len(v.recs)) <= next {
					continue
				}
				if v.base < next {
					v.recs = v.recs[next-v.base:]
					v.base = next
				}
				if write(v.base, v.recs) != nil {
					s.es.Abort()
					return
				}
				next = v.base + uint64(len(v.recs))
			case endSub:
				s.es.Close()
				return
			case felix.Message:
				if err := s.es.WriteMessage(b.ctx, v); err != nil {
					b.t.Logf("terminal %s refused: %v", v.MessageType(), err)
				}
				s.es.Close()
				return
			}
		case <-s.es.Context().Done():
			return
		case <-b.ctx.Done():
			s.es.Close()
			return
		}
	}
}

func (b *testBroker) watch(st *Stream, r *felix.CacheWatch) {
	if strings.HasPrefix(r.Cache, "stall") {
		<-st.Context().Done()
		return
	}
	id := b.subID.Add(1)
	es, err := st.OpenEventStream(b.ctx, id)
	if err != nil {
		return
	}
	w := &testWatch{es: es, key: r.Key, prefix: r.Prefix, ch: make(chan felix.Message, 1024)}
	b.mu.Lock()
	b.watches[w] = struct{}{}
	off := b.cacheOff
	b.mu.Unlock()
	if st.WriteMessage(b.ctx, &felix.CacheWatchStarted{SubscriptionID: id, ResumeOffset: off + 1}) != nil {
		es.Abort()
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() {
			b.mu.Lock()
			delete(b.watches, w)
			b.mu.Unlock()
		}()
		for {
			select {
			case m := <-w.ch:
				if es.WriteMessage(b.ctx, m) != nil {
					es.Abort()
					return
				}
				if _, lag := m.(*felix.CacheWatchLagged); lag {
					es.Close()
					return
				}
			case <-es.Context().Done():
				return
			case <-b.ctx.Done():
				es.Close()
				return
			}
		}
	}()
}

// notifyWatches must be called with b.mu held.
func (b *testBroker) notifyWatches(key string, v felix.Opt[[]byte], off uint64) {
	for w := range b.watches {
		if (w.key.Set && w.key.V == key) || (w.prefix.Set && strings.HasPrefix(key, w.prefix.V)) {
			w.ch <- &felix.CacheEvent{Key: key, Value: v, Offset: off}
		}
	}
}

func (b *testBroker) lagWatches(resume uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for w := range b.watches {
		w.ch <- &felix.CacheWatchLagged{ResumeFrom: resume}
	}
}
