package tap_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// testBroker is a small broker over conn's server half: it records
// acknowledged publishes, answers cache_put and cache_get from a map, and
// serves a subscription from offset 0 with what was published.
type testBroker struct {
	ln   *conn.Listener
	pool *x509.CertPool

	mu      sync.Mutex
	records [][]byte
	cache   map[string][]byte
	conns   []*conn.ServerConn
	// unsubscribed is closed when a subscriber stops reading its event
	// stream (STOP_SENDING).
	unsubscribed chan struct{}
}

func startBroker(t testing.TB, adjust func(*conn.ServerConfig)) *testBroker {
	t.Helper()
	b, stop, err := newBroker(adjust)
	require.NoError(t, err)
	t.Cleanup(stop)
	return b
}

// newBroker starts a testBroker on loopback; stop ends it and waits for
// its goroutines.
func newBroker(adjust func(*conn.ServerConfig)) (b *testBroker, stop func(), err error) {
	tc, pool, err := conn.SelfSigned()
	if err != nil {
		return nil, nil, err
	}
	cfg := &conn.ServerConfig{TLS: tc, Offer: felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureErrorCodes}}
	if adjust != nil {
		adjust(cfg)
	}
	ln, err := conn.Listen("127.0.0.1:0", cfg)
	if err != nil {
		return nil, nil, err
	}
	b = &testBroker{ln: ln, pool: pool, cache: map[string][]byte{}, unsubscribed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { b.serve(ctx, &wg) })
	return b, func() {
		cancel()
		ln.Close()
		wg.Wait()
	}, nil
}

func (b *testBroker) addr() string { return b.ln.Addr().String() }

func (b *testBroker) serve(ctx context.Context, wg *sync.WaitGroup) {
	for {
		sc, err := b.ln.Accept(ctx)
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, sc)
		b.mu.Unlock()
		wg.Go(func() {
			for {
				st, err := sc.AcceptStream(ctx)
				if err != nil {
					return
				}
				wg.Go(func() { b.stream(ctx, st) })
			}
		})
	}
}

func (b *testBroker) stream(ctx context.Context, st *conn.Stream) {
	defer st.Close()
	for {
		req, err := st.ReadRequest(ctx)
		if err != nil {
			return
		}
		if req.Flags != 0 {
			v, err := felix.ParsePublishBatch(req.Flags, req.Payload)
			if err != nil {
				return
			}
			b.mu.Lock()
			for p := range v.Payloads() {
				b.records = append(b.records, append([]byte(nil), p...))
			}
			b.mu.Unlock()
			if req.Flags.Has(felix.FlagBinaryPublishAcked) {
				st.AnswerPublish(ctx, req, felix.PublishResult{}, nil)
			}
			continue
		}
		switch m := req.Message.(type) {
		case *felix.Publish:
			b.mu.Lock()
			b.records = append(b.records, m.Payload)
			b.mu.Unlock()
			st.AnswerPublish(ctx, req, felix.PublishResult{}, nil)
		case *felix.CachePut:
			b.mu.Lock()
			b.cache[m.Key] = m.Value
			b.mu.Unlock()
			st.WriteMessage(ctx, &felix.CacheOK{RequestID: m.RequestID.V})
		case *felix.CacheGet:
			b.mu.Lock()
			v, ok := b.cache[m.Key]
			b.mu.Unlock()
			ans := &felix.CacheValue{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, RequestID: m.RequestID}
			if ok {
				ans.Value = felix.Some(v)
			}
			st.WriteMessage(ctx, ans)
		case *felix.Subscribe:
			es, err := st.StartSubscription(ctx, &felix.Subscribed{SubscriptionID: 1})
			if err != nil {
				return
			}
			b.mu.Lock()
			batch := felix.EventBatch{HasBaseOffset: true, Payloads: b.records}
			b.mu.Unlock()
			frame, _ := felix.AppendEventBatch(nil, &batch, es.Peer().EventFlags())
			es.WriteEncoded(ctx, frame)
			select {
			case <-es.Context().Done(): // the subscriber stopped reading
				close(b.unsubscribed)
			case <-ctx.Done():
			}
			return
		default:
			return
		}
	}
}

// dialTLS is the client trust of a relay's certificate.
func dialTLS(pool *x509.CertPool) *tls.Config { return &tls.Config{RootCAs: pool} }
