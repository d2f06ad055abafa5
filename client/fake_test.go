package client_test

import (
	"context"
	"sync"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/examples/broker/server"
	"github.com/stretchr/testify/require"
)

// fakeNode is a clustered-looking broker that owns nothing: it answers
// topology with itself and the real broker, redirects every subscribe to
// the real broker (not_leader), and can drop a connection as soon as a
// publish arrives (so the publish's outcome is unknown to the client).
type fakeNode struct {
	ln   *conn.Listener
	real string

	closeOnPublish bool
	// shards is the shard count answered to stream_shards (0: 1); shard 1
	// of a multi-shard stream is served here and ends at once with
	// subscription_lagged (a lost shard).
	shards uint32

	mu         sync.Mutex
	subscribes []*felix.Subscribe
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

func startFake(t testing.TB, real string, closeOnPublish bool, adjust ...func(*fakeNode)) *fakeNode {
	t.Helper()
	tc, err := certs()
	require.NoError(t, err)
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: tc, Offer: felix.BrokerOffer{Flags: server.Flags,
		Features: felix.FeatureRedirect | felix.FeatureTopology | felix.FeatureStreamShards | felix.FeatureErrorCodes | felix.FeatureShardMoved}})
	require.NoError(t, err)
	f := &fakeNode{ln: ln, real: real, closeOnPublish: closeOnPublish}
	for _, a := range adjust {
		a(f)
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(f.stop)
	return f
}

func (f *fakeNode) addr() string { return f.ln.Addr().String() }

func (f *fakeNode) stop() {
	f.cancel()
	f.ln.Close()
	f.wg.Wait()
}

func (f *fakeNode) serve() {
	defer f.wg.Done()
	for {
		sc, err := f.ln.Accept(f.ctx)
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer sc.CloseWithError(conn.CloseShuttingDown, "fake closing")
			for {
				st, err := sc.AcceptStream(f.ctx)
				if err != nil {
					return
				}
				f.wg.Add(1)
				go func() { defer f.wg.Done(); f.stream(sc, st) }()
			}
		}()
	}
}

func (f *fakeNode) stream(sc *conn.ServerConn, st *conn.Stream) {
	defer st.Close()
	for {
		req, err := st.ReadRequest(f.ctx)
		if err != nil {
			return
		}
		if req.Flags != 0 {
			if f.closeOnPublish {
				sc.CloseWithError(conn.CloseShuttingDown, "gone before the ack")
				return
			}
			continue
		}
		switch m := req.Message.(type) {
		case *felix.Topology:
			st.WriteMessage(f.ctx, &felix.TopologyView{Brokers: []felix.BrokerEndpoint{{NodeID: "fake", Addr: f.addr()}, {NodeID: "real", Addr: f.real}}})
		case *felix.StreamShards:
			st.WriteMessage(f.ctx, &felix.StreamShardsView{Shards: max(f.shards, 1), RequestID: m.RequestID})
		case *felix.Subscribe:
			f.mu.Lock()
			f.subscribes = append(f.subscribes, m)
			f.mu.Unlock()
			if m.Shard.V == 1 {
				const id = 77
				es, err := st.OpenEventStream(f.ctx, id)
				if err != nil {
					return
				}
				st.WriteMessage(f.ctx, &felix.Subscribed{SubscriptionID: id})
				es.WriteMessage(f.ctx, &felix.SubscriptionLagged{SubscriptionID: id, ResumeFrom: 5})
				es.Close()
				return
			}
			st.WriteMessage(f.ctx, &felix.NotLeader{NodeID: "real", Addr: felix.Some(f.real), Generation: 1})
			return
		}
	}
}

func (f *fakeNode) subscribeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subscribes)
}
