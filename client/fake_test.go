package client_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/conntest"
	"github.com/flxproto/felix/internal/broker/server"
)

// fakeNode is a clustered-looking broker that owns nothing (a scripted
// conntest node with the test brokers' certificate): it answers topology
// with itself and the real broker, redirects every subscribe to the real
// broker (not_leader), and leaves publishes unanswered or drops the
// connection as soon as one arrives (so the publish's outcome is unknown
// to the client).
type fakeNode struct {
	cl   *conntest.Cluster
	real string

	closeOnPublish bool
	// shards is the shard count answered to stream_shards (0: 1); shard 1
	// of a multi-shard stream is served here and ends at once with
	// subscription_lagged (a lost shard).
	shards uint32
}

func startFake(t testing.TB, real string, closeOnPublish bool, adjust ...func(*fakeNode)) *fakeNode {
	t.Helper()
	tc, err := certs()
	require.NoError(t, err)
	f := &fakeNode{real: real, closeOnPublish: closeOnPublish}
	for _, a := range adjust {
		a(f)
	}
	f.cl = conntest.Start(t, conntest.Options{TLS: tc, Configure: func(_ int, c *conn.ServerConfig) {
		c.Offer = felix.BrokerOffer{Flags: server.Flags,
			Features: felix.FeatureRedirect | felix.FeatureTopology | felix.FeatureStreamShards | felix.FeatureErrorCodes | felix.FeatureShardMoved}
	}})
	nd := f.cl.Nodes[0]
	nd.Always("topology", func(x *conntest.Exchange) error {
		return x.Reply(&felix.TopologyView{Brokers: []felix.BrokerEndpoint{{NodeID: "fake", Addr: nd.Addr}, {NodeID: "real", Addr: real}}})
	})
	nd.Always("stream_shards", func(x *conntest.Exchange) error {
		return x.Reply(&felix.StreamShardsView{Shards: max(f.shards, 1), RequestID: x.Request.Message.(*felix.StreamShards).RequestID})
	})
	nd.Always("subscribe", func(x *conntest.Exchange) error {
		if x.Request.Message.(*felix.Subscribe).Shard.V == 1 {
			es, err := x.Subscribe(&felix.Subscribed{SubscriptionID: 77})
			if err != nil {
				return err
			}
			if err := es.Message(&felix.SubscriptionLagged{SubscriptionID: 77, ResumeFrom: 5}); err != nil {
				return err
			}
			return es.End(nil)
		}
		return x.Fail(&felix.NotLeaderError{NodeID: "real", Addr: real, Generation: 1})
	})
	nd.Always("publish", func(x *conntest.Exchange) error {
		if f.closeOnPublish {
			x.Conn.CloseWithError(conn.CloseShuttingDown, "gone before the ack")
		}
		return nil // unanswered
	})
	return f
}

func (f *fakeNode) addr() string { return f.cl.Nodes[0].Addr }

func (f *fakeNode) stop() { f.cl.Close() }

// subscribes returns the subscribe requests the fake received.
func (f *fakeNode) subscribes() []*felix.Subscribe {
	var out []*felix.Subscribe
	for _, r := range f.cl.ReceivedOf("subscribe") {
		out = append(out, r.Message.(*felix.Subscribe))
	}
	return out
}
