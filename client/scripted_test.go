package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/conntest"
)

// The rules of failure handling, each against scripted brokers
// (conn/conntest) that answer exactly the hard case under test.

var sTopic = conntest.Topic("s")

// scriptedClient is a client of cl over seeds (cl's first node when
// none), without discovery unless adjust turns it on.
func scriptedClient(t *testing.T, cl *conntest.Cluster, seeds []string, adjust func(*client.Config)) (*client.Client, *notices) {
	t.Helper()
	if seeds == nil {
		seeds = cl.Addrs()[:1]
	}
	return newClient(t, seeds, func(cfg *client.Config) {
		cfg.Conn = cl.ClientConfig()
		cfg.Conn.IdleTimeout, cfg.Conn.KeepAlive = 1500*time.Millisecond, 300*time.Millisecond
		cfg.NoDiscovery, cfg.DialTimeout = true, 2*time.Second
		cfg.BackoffBase, cfg.BackoffMax = 5*time.Millisecond, 20*time.Millisecond
		if adjust != nil {
			adjust(cfg)
		}
	})
}

// subscribeRead subscribes from start and reads n records.
func subscribeRead(t *testing.T, c *client.Client, o client.SubscribeOptions, n int) *client.Subscription {
	t.Helper()
	sub, err := c.Subscribe(ctxT(t), sTopic, o)
	require.NoError(t, err)
	t.Cleanup(func() { sub.Close() })
	for range n {
		_, err := sub.Next(ctxT(t))
		require.NoError(t, err)
	}
	return sub
}

// noticed returns the last notice of kind k seen so far, failing at once
// when there is none (the notices under test are emitted before the call
// that caused them returns).
func noticed(t *testing.T, n *notices, k client.NoticeKind) client.Notice {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	for i := len(n.list) - 1; i >= 0; i-- {
		if n.list[i].Kind == k {
			return n.list[i]
		}
	}
	require.FailNow(t, "no notice", k.String())
	return client.Notice{}
}

var subIDs atomic.Uint64

// echoFrom serves a subscribe with one record at the offset it asked for
// (100 for latest, 0 for earliest) and holds the subscription open.
func echoFrom(x *conntest.Exchange) error {
	off := askedOffset(x)
	es, err := x.Subscribe(&felix.Subscribed{SubscriptionID: subIDs.Add(1)})
	if err != nil {
		return err
	}
	if err := es.Batch(off, 0, []byte("echo")); err != nil {
		return err
	}
	es.Wait()
	return nil
}

// askedOffset returns the offset a subscribe asked for: 0 for earliest,
// 100 for latest.
func askedOffset(x *conntest.Exchange) uint64 {
	start := x.Request.Message.(*felix.Subscribe).Start.V
	switch start.Kind {
	case felix.StartOffset:
		return start.Offset
	case felix.StartEarliest:
		return 0
	}
	return 100
}

// deliverThen serves a subscribe with batches, then ends the event stream
// with end.
func deliverThen(end error, batches ...*felix.EventBatch) conntest.Handler {
	return func(x *conntest.Exchange) error {
		es, err := x.Subscribe(&felix.Subscribed{SubscriptionID: subIDs.Add(1)})
		if err != nil {
			return err
		}
		for _, b := range batches {
			if err := es.BatchOf(b); err != nil {
				return err
			}
		}
		return es.End(end)
	}
}

func offsets(base uint64, n int) *felix.EventBatch {
	b := &felix.EventBatch{HasBaseOffset: true, BaseOffset: base}
	for i := range n {
		b.Payloads = append(b.Payloads, []byte(fmt.Sprint("r", base+uint64(i))))
	}
	return b
}

// subscribesOn returns the start positions of the subscribes node i got.
func subscribesOn(cl *conntest.Cluster, i int) []felix.StartPosition {
	var out []felix.StartPosition
	for _, r := range cl.ReceivedOf("subscribe") {
		if r.Node == i {
			out = append(out, r.Message.(*felix.Subscribe).Start.V)
		}
	}
	return out
}

var latest = felix.StartPosition{Kind: felix.StartLatest}

// An event stream ending with an error frame resumes when the error's
// class allows a retry or redirect, and ends the subscription otherwise;
// stream_deleted ends it.
func TestScriptedEventStreamEnds(t *testing.T) {
	cases := []struct {
		name   string
		end    error
		resume bool
	}{
		{"retry", &felix.BrokerError{Message: "moving", Code: felix.CodeShardUnavailable, Retry: felix.RetryRetry}, true},
		{"retry_after", &felix.BrokerError{Message: "busy", Code: felix.CodeOverloaded, Retry: felix.RetryAfter, RetryAfter: time.Millisecond}, true},
		{"redirect", &felix.BrokerError{Message: "not here", Code: felix.CodeNotLeader, Retry: felix.RetryRedirect}, true},
		{"fatal", &felix.BrokerError{Message: "revoked", Code: felix.CodeForbidden}, false},
		{"stream deleted", &felix.StreamDeletedError{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{})
			cl.Nodes[0].On("subscribe", deliverThen(tc.end, offsets(4, 2)))
			cl.Nodes[0].Always("subscribe", echoFrom)
			c, _ := scriptedClient(t, cl, nil, nil)
			sub := subscribeRead(t, c, client.SubscribeOptions{Start: felix.StartAt(4)}, 2)
			ev, err := sub.Next(ctxT(t))
			if !tc.resume {
				// stream_deleted reaches a client that did not offer
				// FEATURE_STREAM_DELETED as not_found (fatal).
				var be *felix.BrokerError
				var sd *felix.StreamDeletedError
				require.True(t, errors.As(err, &be) || errors.As(err, &sd), "ends with the typed end: %v", err)
				require.Equal(t, felix.RetryFatal, client.RetryClassOf(err))
				require.Len(t, subscribesOn(cl, 0), 1, "not resumed")
				return
			}
			require.NoError(t, err)
			require.Equal(t, uint64(6), ev.Offset)
			require.Equal(t, []felix.StartPosition{felix.StartAt(4), felix.StartAt(6)}, subscribesOn(cl, 0))
		})
	}
}

// After shard_moved a subscription resumes at max(last delivered + 1,
// resume_from), at resume_from before any delivery, and at the new
// owner's tail when resume_from is absent and no offset is known — on the
// owner the frame names.
func TestScriptedShardMovedResume(t *testing.T) {
	noOffsets := &felix.EventBatch{Payloads: [][]byte{[]byte("m1"), []byte("m2")}}
	cases := []struct {
		name      string
		start     felix.StartPosition
		delivered *felix.EventBatch
		moved     felix.ShardMovedError
		want      felix.StartPosition
	}{
		{"resume_from below the next offset", felix.StartAt(10), offsets(10, 3), felix.ShardMovedError{HasResumeFrom: true, ResumeFrom: 8}, felix.StartAt(13)},
		{"resume_from beyond the next offset", felix.StartAt(10), offsets(10, 3), felix.ShardMovedError{HasResumeFrom: true, ResumeFrom: 20}, felix.StartAt(20)},
		{"before any delivery", felix.StartPosition{Kind: felix.StartEarliest}, nil, felix.ShardMovedError{HasResumeFrom: true, ResumeFrom: 5}, felix.StartAt(5)},
		{"no resume_from, nothing delivered", felix.StartPosition{Kind: felix.StartEarliest}, nil, felix.ShardMovedError{}, latest},
		{"no resume_from, records without offsets", felix.StartPosition{Kind: felix.StartEarliest}, noOffsets, felix.ShardMovedError{}, latest},
		{"no resume_from, offsets known", felix.StartAt(10), offsets(10, 3), felix.ShardMovedError{}, felix.StartAt(13)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{Nodes: 2})
			n1 := cl.Nodes[1]
			moved := tc.moved
			moved.NodeID, moved.Addr, moved.Generation = n1.ID, n1.Addr, 2
			var batches []*felix.EventBatch
			if tc.delivered != nil {
				batches = append(batches, tc.delivered)
			}
			cl.Nodes[0].On("subscribe", deliverThen(&moved, batches...))
			n1.Always("subscribe", echoFrom)
			c, n := scriptedClient(t, cl, nil, nil)
			delivered := 0
			if tc.delivered != nil {
				delivered = len(tc.delivered.Payloads)
			}
			sub := subscribeRead(t, c, client.SubscribeOptions{Start: tc.start}, delivered)
			ev, err := sub.Next(ctxT(t))
			require.NoError(t, err)
			require.Equal(t, "echo", string(ev.Payload))
			require.Equal(t, []felix.StartPosition{tc.want}, subscribesOn(cl, 1), "resubscribed on the named owner at the rule's position")
			require.Len(t, subscribesOn(cl, 0), 1, "not back on the old owner")
			if tc.want.Kind == felix.StartOffset {
				require.Equal(t, tc.want.Offset, ev.Offset)
			}
			require.Equal(t, n1.Addr, noticed(t, n, client.NoticeResumed).Addr)
		})
	}
}

// The resubscribe after shard_moved goes to the named owner and follows
// its not_leader from there.
func TestScriptedShardMovedFollowsNotLeader(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 3})
	n1, n2 := cl.Nodes[1], cl.Nodes[2]
	cl.Nodes[0].On("subscribe", func(x *conntest.Exchange) error {
		// From now on the old owner would redirect straight to n2: a
		// client ignoring shard_moved's owner is seen asking it.
		cl.SetOwner("s", 0, 2)
		return deliverThen(&felix.ShardMovedError{HasResumeFrom: true, ResumeFrom: 3, NodeID: n1.ID, Addr: n1.Addr, Generation: 2}, offsets(0, 3))(x)
	})
	n1.Always("subscribe", func(x *conntest.Exchange) error {
		return x.Fail(&felix.NotLeaderError{NodeID: n2.ID, Addr: n2.Addr, Generation: 3})
	})
	n2.Always("subscribe", echoFrom)
	c, _ := scriptedClient(t, cl, nil, nil)
	sub := subscribeRead(t, c, client.SubscribeOptions{Start: felix.StartAt(0)}, 3)
	ev, err := sub.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(3), ev.Offset)
	var order []int
	for _, r := range cl.ReceivedOf("subscribe") {
		order = append(order, r.Node)
	}
	require.Equal(t, []int{0, 1, 2}, order, "old owner, named owner, its redirect")
	require.Equal(t, []felix.StartPosition{felix.StartAt(3)}, subscribesOn(cl, 2))
}

// subscription_lagged resumes gaplessly by default (last delivered + 1,
// resume_from before any delivery) with a lag notice; LagAsError ends the
// subscription instead; both report the position used.
func TestScriptedLag(t *testing.T) {
	cases := []struct {
		name       string
		delivered  *felix.EventBatch
		resumeFrom uint64
		asError    bool
		want       uint64
	}{
		{"after deliveries", offsets(10, 3), 50, false, 13},
		{"before any delivery", nil, 7, false, 7},
		{"as an error", offsets(10, 3), 50, true, 13},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{})
			var batches []*felix.EventBatch
			if tc.delivered != nil {
				batches = append(batches, tc.delivered)
			}
			cl.Nodes[0].On("subscribe", deliverThen(&felix.LaggedError{ResumeFrom: tc.resumeFrom}, batches...))
			cl.Nodes[0].Always("subscribe", echoFrom)
			c, n := scriptedClient(t, cl, nil, nil)
			delivered := 0
			if tc.delivered != nil {
				delivered = len(tc.delivered.Payloads)
			}
			sub := subscribeRead(t, c, client.SubscribeOptions{Start: felix.StartAt(10), LagAsError: tc.asError}, delivered)
			ev, err := sub.Next(ctxT(t))
			require.Equal(t, tc.want, noticed(t, n, client.NoticeLagged).Offset, "the notice reports the position used")
			if tc.asError {
				var le *felix.LaggedError
				require.ErrorAs(t, err, &le)
				require.Equal(t, tc.want, le.ResumeFrom, "the error reports where to resume without a gap")
				require.Len(t, subscribesOn(cl, 0), 1, "not resumed")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, ev.Offset)
			require.Equal(t, []felix.StartPosition{felix.StartAt(10), felix.StartAt(tc.want)}, subscribesOn(cl, 0))
		})
	}
}

// A delivered batch beyond previous + 1 + skipped_before is reported with
// the missing range and counted; skipped offsets are not drops.
func TestScriptedDropDetection(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	cl.Nodes[0].On("subscribe", func(x *conntest.Exchange) error {
		es, err := x.Subscribe(&felix.Subscribed{SubscriptionID: subIDs.Add(1)})
		if err != nil {
			return err
		}
		for _, b := range []struct{ base, skipped uint64 }{{0, 0}, {1, 0}, {5, 2}, {6, 0}, {9, 2}} {
			if err := es.Batch(b.base, b.skipped, []byte("r")); err != nil {
				return err
			}
		}
		es.Wait()
		return nil
	})
	c, n := scriptedClient(t, cl, nil, nil)
	sub := subscribeRead(t, c, client.SubscribeOptions{Start: felix.StartAt(0)}, 5)
	// 2..4 before 5: 3 and 4 skipped, 2 missing; 7..8 before 9 skipped.
	d := noticed(t, n, client.NoticeDropped)
	require.Equal(t, uint64(2), d.Offset)
	require.Equal(t, uint64(1), d.Count)
	require.Equal(t, uint64(1), sub.Dropped())
	require.Equal(t, 1, n.count(client.NoticeDropped))
}

// A filtered cache watch sees sparse offsets: no drop is reported.
func TestScriptedWatchNoDropNotice(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	cl.Nodes[0].On("cache_watch", func(x *conntest.Exchange) error {
		es, err := x.Watch(&felix.CacheWatchStarted{SubscriptionID: subIDs.Add(1), ResumeOffset: 1})
		if err != nil {
			return err
		}
		for _, off := range []uint64{1, 5, 40} {
			if err := es.Message(&felix.CacheEvent{Key: "k", Value: felix.Some([]byte("v")), Offset: off}); err != nil {
				return err
			}
		}
		es.Wait()
		return nil
	})
	c, n := scriptedClient(t, cl, nil, nil)
	w, err := c.CacheWatch(ctxT(t), client.CacheRef{TenantID: conntest.Tenant, Namespace: "app", Cache: "c"}, client.WatchOptions{Prefix: felix.Some("k")})
	require.NoError(t, err)
	defer w.Close()
	for _, want := range []uint64{1, 5, 40} {
		ev, err := w.Next(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, want, ev.Offset)
	}
	require.Zero(t, n.count(client.NoticeDropped))
}

// A retry_after answer is waited out: the re-send comes at least
// retry_after_ms later, although the backoff alone is far shorter.
func TestScriptedRetryAfterWaits(t *testing.T) {
	const wait = 300 * time.Millisecond
	noBinaryAck := felix.FlagBinaryPublishAcked | felix.FlagBinaryPublishAck
	cases := []struct {
		name      string
		flags     felix.Flags
		features  felix.Features
		binary    bool
		clustered bool
	}{
		{"standalone binary", conntest.Flags, felix.FeatureErrorCodes, true, false},
		{"standalone json", conntest.Flags &^ noBinaryAck, felix.FeatureErrorCodes, false, false},
		{"cluster binary", conntest.Flags, conntest.Features, true, true},
		{"cluster json", conntest.Flags &^ noBinaryAck, conntest.Features, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{Configure: func(_ int, c *conn.ServerConfig) {
				c.Offer.Flags, c.Offer.Features = tc.flags, tc.features
			}})
			cl.Nodes[0].On("publish", func(x *conntest.Exchange) error {
				return x.AnswerPublish(felix.PublishResult{}, &felix.BrokerError{Message: "busy", Code: felix.CodeOverloaded, Retry: felix.RetryAfter, RetryAfter: wait})
			})
			c, n := scriptedClient(t, cl, nil, nil)
			require.NoError(t, c.Connect(ctxT(t)))
			_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
			require.NoError(t, err)
			var pubs []conntest.Received
			for _, r := range cl.Received() {
				if r.Publish != nil {
					pubs = append(pubs, r)
				}
			}
			require.Len(t, pubs, 2)
			require.Equal(t, tc.binary, pubs[0].Publish.Binary)
			require.GreaterOrEqual(t, pubs[1].At.Sub(pubs[0].At), wait, "waited retry_after_ms")
			require.GreaterOrEqual(t, noticed(t, n, client.NoticeRetry).Delay, wait)
		})
	}
}

// A chain of not_leader hops is followed up to MaxRedirects without
// spending the retry budget; one hop more is not.
func TestScriptedRedirectChain(t *testing.T) {
	for _, tc := range []struct {
		maxRedirects int
		ok           bool
	}{{3, true}, {2, false}} {
		t.Run(fmt.Sprint("max ", tc.maxRedirects), func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{Nodes: 4})
			for i := range 3 {
				next := cl.Nodes[i+1]
				cl.Nodes[i].Always("publish", func(x *conntest.Exchange) error {
					return x.AnswerPublish(felix.PublishResult{}, &felix.NotLeaderError{NodeID: next.ID, Addr: next.Addr, Generation: uint64(i + 1)})
				})
			}
			c, n := scriptedClient(t, cl, nil, func(cfg *client.Config) { cfg.MaxRedirects, cfg.MaxAttempts = tc.maxRedirects, -1 })
			_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
			var order []int
			for _, r := range cl.Received() {
				if r.Publish != nil {
					order = append(order, r.Node)
				}
			}
			if !tc.ok {
				require.Equal(t, felix.RetryRedirect, client.RetryClassOf(err))
				require.Equal(t, []int{0, 1, 2}, order, "stopped after MaxRedirects hops")
				return
			}
			require.NoError(t, err)
			require.Equal(t, []int{0, 1, 2, 3}, order)
			require.Equal(t, 3, n.count(client.NoticeRedirect))
			require.Zero(t, n.count(client.NoticeRetry))
		})
	}
}

// A redirect that names no owner (not_leader as a JSON publish_error
// without an address) is resolved with shard_owners, without spending the
// retry budget; a broker that does not advertise shard_owners is not asked.
func TestScriptedRedirectWithoutOwner(t *testing.T) {
	for _, tc := range []struct {
		name     string
		features felix.Features
	}{{"shard_owners", conntest.Features}, {"no shard_owners", conntest.Features &^ felix.FeatureShardOwners}} {
		t.Run(tc.name, func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{Nodes: 2, Configure: func(_ int, c *conn.ServerConfig) {
				c.Offer.Flags = conntest.Flags &^ (felix.FlagBinaryPublishAcked | felix.FlagBinaryPublishAck)
				c.Offer.Features = tc.features
			}})
			cl.SetOwner("s", 0, 1)
			cl.Nodes[0].Always("publish", func(x *conntest.Exchange) error {
				return x.AnswerPublish(felix.PublishResult{}, &felix.BrokerError{Message: "not the leader", Code: felix.CodeNotLeader, Retry: felix.RetryRedirect})
			})
			c, n := scriptedClient(t, cl, nil, func(cfg *client.Config) { cfg.MaxAttempts = -1 })
			_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
			var types []string
			for _, r := range cl.Received() {
				if r.Type != "topology" {
					types = append(types, fmt.Sprint(r.Node, " ", r.Type))
				}
			}
			if tc.features.Has(felix.FeatureShardOwners) {
				require.NoError(t, err)
				require.Equal(t, []string{"0 publish", "0 shard_owners", "1 publish"}, types)
				require.Zero(t, n.count(client.NoticeRetry), "no retry spent")
				return
			}
			require.Error(t, err)
			require.Equal(t, []string{"0 publish"}, types, "shard_owners not advertised: never sent")
		})
	}
}

// A dead first seed costs at most one dial timeout: later calls go to the
// live seed without dialling the dead one again.
func TestScriptedDeadFirstSeed(t *testing.T) {
	hole, err := net.ListenPacket("udp", "127.0.0.1:0") // never answers
	require.NoError(t, err)
	defer hole.Close()
	cl := conntest.Start(t, conntest.Options{})
	const dialTimeout = time.Second
	dead := hole.LocalAddr().String()
	// The home broker is drawn at random: take clients until one starts
	// on the dead seed.
	for try := 0; ; try++ {
		require.Less(t, try, 20, "no client started on the dead seed")
		c, n := scriptedClient(t, cl, []string{dead, cl.Nodes[0].Addr}, func(cfg *client.Config) { cfg.DialTimeout = dialTimeout })
		start := time.Now()
		require.NoError(t, c.Connect(ctxT(t)))
		if n.count(client.NoticeDialFailed) == 0 {
			continue
		}
		for range 3 {
			_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
			require.NoError(t, err)
		}
		require.Less(t, time.Since(start), 2*dialTimeout, "at most one dial timeout")
		require.Equal(t, 1, n.count(client.NoticeDialFailed), "the dead seed was dialled once")
		return
	}
}

// Keyed publishes go straight to the owner of the shard the stream's
// routing picks, once the shard view is known: no forward, no redirect.
func TestScriptedKeyedPublishToOwner(t *testing.T) {
	for _, routing := range []felix.Routing{felix.RoutingModulo, felix.RoutingJumpHash} {
		t.Run(routing.String(), func(t *testing.T) {
			const shards = 5
			cl := conntest.Start(t, conntest.Options{Nodes: shards})
			cl.SetShards("s", shards, routing)
			for i := range shards {
				cl.SetOwner("s", uint32(i), i)
			}
			c, n := scriptedClient(t, cl, cl.Addrs(), nil)
			_, err := c.StreamShards(ctxT(t), sTopic)
			require.NoError(t, err)
			// Learn the owners: one publish per shard (a redirect each at most).
			for s := range uint32(shards) {
				_, err := c.Publish(ctxT(t), sTopic, []byte("warm"), client.PublishOptions{Ack: felix.AckPerBatch, Key: keyFor(routing, shards, s)})
				require.NoError(t, err)
			}
			redirects, before := n.count(client.NoticeRedirect), len(cl.Received())
			for i := range 40 {
				key := []byte(fmt.Sprint("key-", i))
				_, err := c.Publish(ctxT(t), sTopic, []byte("v"), client.PublishOptions{Ack: felix.AckPerBatch, Key: key})
				require.NoError(t, err)
			}
			for _, r := range cl.Received()[before:] {
				if r.Publish == nil {
					continue
				}
				want := int(routing.ShardOf(r.Publish.Key, true, shards))
				require.Equal(t, want, r.Node, "key %q went to the owner of its shard", r.Publish.Key)
			}
			require.Equal(t, redirects, n.count(client.NoticeRedirect), "no redirect once the owners are known")
		})
	}
}

// keyFor returns a key that routing maps to shard s of n.
func keyFor(routing felix.Routing, n, s uint32) []byte {
	for i := 0; ; i++ {
		k := []byte(fmt.Sprint("warm-", i))
		if routing.ShardOf(k, true, n) == s {
			return k
		}
	}
}

// An unsafe write whose answer is lost or says outcome_unknown returns the
// ambiguous-outcome error and is never re-sent; the at-least-once variant
// re-sends it; a fatal answer is never retried.
func TestScriptedAmbiguousAndFatal(t *testing.T) {
	lose := map[string]conntest.Handler{
		"connection reset": func(x *conntest.Exchange) error { return x.ResetConn() },
		"stream reset":     func(x *conntest.Exchange) error { return x.ResetStream() },
		"outcome_unknown": func(x *conntest.Exchange) error {
			return x.AnswerPublish(felix.PublishResult{}, &felix.BrokerError{Message: "may have been written", Code: felix.CodeInternal, Retry: felix.RetryOutcomeUnknown})
		},
	}
	for name, h := range lose {
		for _, clustered := range []bool{false, true} {
			t.Run(fmt.Sprint(name, " clustered=", clustered), func(t *testing.T) {
				cl := conntest.Start(t, conntest.Options{Nodes: 2, Configure: func(_ int, c *conn.ServerConfig) {
					if !clustered {
						c.Offer.Features = felix.FeatureErrorCodes
					}
				}})
				for _, nd := range cl.Nodes {
					nd.On("publish", h)
				}
				c, _ := scriptedClient(t, cl, cl.Addrs(), nil)
				require.NoError(t, c.Connect(ctxT(t)))
				_, err := c.Publish(ctxT(t), sTopic, []byte("once"), acked)
				require.ErrorIs(t, err, client.ErrAmbiguous)
				require.Equal(t, felix.RetryOutcomeUnknown, client.RetryClassOf(err))
				require.Len(t, publishes(cl), 1, "never re-sent")

				for _, nd := range cl.Nodes {
					nd.On("publish", h)
				}
				_, err = c.PublishBatchMayDuplicate(ctxT(t), sTopic, [][]byte{[]byte("again")}, acked)
				require.NoError(t, err)
				require.GreaterOrEqual(t, len(publishes(cl)), 3, "at-least-once re-sends after the lost answer")
			})
		}
	}
	t.Run("fatal", func(t *testing.T) {
		cl := conntest.Start(t, conntest.Options{})
		cl.Nodes[0].Always("publish", func(x *conntest.Exchange) error {
			return x.AnswerPublish(felix.PublishResult{}, &felix.BrokerError{Message: "no", Code: felix.CodeForbidden})
		})
		c, n := scriptedClient(t, cl, nil, nil)
		_, err := c.PublishBatchMayDuplicate(ctxT(t), sTopic, [][]byte{[]byte("x")}, acked)
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.CodeForbidden, be.Code)
		require.Len(t, publishes(cl), 1, "never retried")
		require.Zero(t, n.count(client.NoticeRetry))
	})
}

func publishes(cl *conntest.Cluster) []conntest.Received {
	var out []conntest.Received
	for _, r := range cl.Received() {
		if r.Publish != nil {
			out = append(out, r)
		}
	}
	return out
}

// A Producer used from many goroutines sends one route's batches one at
// a time, with consecutive sequences never reused.
func TestScriptedProducerOneAtATime(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	var inflight, peak atomic.Int32
	cl.Nodes[0].Always("publish", func(x *conntest.Exchange) error {
		peak.Store(max(peak.Load(), inflight.Add(1)))
		defer inflight.Add(-1)
		// Hold the answer a little: a second batch of the route sent
		// meanwhile is caught in flight.
		ctx, cancel := context.WithTimeout(x.Context(), 20*time.Millisecond)
		defer cancel()
		<-ctx.Done()
		res, err := x.PublishResult()
		return x.AnswerPublish(res, err)
	})
	c, _ := scriptedClient(t, cl, nil, nil)
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	const goroutines, each = 6, 3
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				_, err := p.PublishBatch(ctxT(t), sTopic, [][]byte{[]byte(fmt.Sprint(g, "-", i))}, client.PublishOptions{})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(1), peak.Load(), "one batch of the route in flight at a time")
	var seqs []uint64
	for _, r := range publishes(cl) {
		seqs = append(seqs, r.Publish.Sequence)
	}
	want := make([]uint64, goroutines*each)
	for i := range want {
		want[i] = uint64(i)
	}
	require.Equal(t, want, seqs, "consecutive sequences, none reused")
	require.Len(t, cl.Log("s", 0), goroutines*each)
}

// An in-doubt batch keeps its sequence until the broker answers for it,
// whatever the error that left it in doubt; the call that gives up
// returns the ambiguous-outcome error naming producer, sequence and cause.
func TestScriptedProducerInDoubtKeepsSequence(t *testing.T) {
	lose := map[string]conntest.Handler{
		"caller's deadline": func(x *conntest.Exchange) error {
			res, err := x.PublishResult() // written, the answer comes too late
			late, cancel := context.WithTimeout(x.Context(), 600*time.Millisecond)
			defer cancel()
			<-late.Done()
			return x.AnswerPublish(res, err)
		},
		"connection reset": func(x *conntest.Exchange) error {
			x.PublishResult() // written, the answer lost
			return x.ResetConn()
		},
		"connection closed": func(x *conntest.Exchange) error {
			x.PublishResult()
			x.Node.CloseConns()
			return nil
		},
		"stream reset": func(x *conntest.Exchange) error {
			x.PublishResult()
			return x.ResetStream()
		},
		"garbage answer": func(x *conntest.Exchange) error {
			x.PublishResult()
			return x.Reply(&felix.CacheShardsView{Shards: 1})
		},
		"outcome_unknown": func(x *conntest.Exchange) error {
			x.PublishResult()
			return x.AnswerPublish(felix.PublishResult{}, &felix.BrokerError{Message: "?", Code: felix.CodeInternal, Retry: felix.RetryOutcomeUnknown})
		},
	}
	for name, h := range lose {
		t.Run(name, func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{})
			c, _ := scriptedClient(t, cl, nil, func(cfg *client.Config) { cfg.MaxAttempts = -1 })
			p, err := c.NewProducer(ctxT(t))
			require.NoError(t, err)
			_, err = p.PublishBatch(ctxT(t), sTopic, [][]byte{[]byte("a")}, client.PublishOptions{})
			require.NoError(t, err)
			cl.Nodes[0].On("publish", h)
			ctx := ctxT(t)
			if name == "caller's deadline" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
			}
			_, err = p.PublishBatch(ctx, sTopic, [][]byte{[]byte("b")}, client.PublishOptions{})
			require.ErrorIs(t, err, client.ErrAmbiguous)
			var amb *client.AmbiguousError
			require.ErrorAs(t, err, &amb)
			require.Equal(t, p.ID(), amb.Producer)
			require.Equal(t, uint64(1), amb.Sequence)
			require.Contains(t, err.Error(), fmt.Sprint("producer ", p.ID(), ", sequence 1"))
			if name == "caller's deadline" {
				require.ErrorIs(t, err, context.DeadlineExceeded, "the real cause")
			}
			require.Equal(t, felix.RetryOutcomeUnknown, client.RetryClassOf(err))

			_, err = p.PublishBatch(ctxT(t), sTopic, [][]byte{[]byte("c")}, client.PublishOptions{})
			require.NoError(t, err)
			var seqs []uint64
			for _, r := range publishes(cl) {
				seqs = append(seqs, r.Publish.Sequence)
			}
			require.Equal(t, []uint64{0, 1, 1, 2}, seqs, "the in-doubt batch re-sent under its sequence before the next")
			var log []string
			for _, p := range cl.Log("s", 0) {
				log = append(log, string(p))
			}
			require.Equal(t, []string{"a", "b", "c"}, log, "every batch once")
		})
	}
}

// The new user's run: the cluster unreachable for a while, MaxAttempts 2,
// the application re-sending after every error except the ambiguous one:
// every record lands exactly once.
func TestScriptedProducerOutageNoDuplicates(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	r := startRelay(t, cl.Nodes[0].Addr)
	const outage = 3 * time.Second // the user's 15 s, shortened
	var once sync.Once
	var up atomic.Bool
	up.Store(true)
	cl.Nodes[0].Always("publish", func(x *conntest.Exchange) error {
		res, err := x.PublishResult()
		if strings.HasPrefix(string(x.Received.Publish.Payloads[0]), "r5") {
			// The cluster goes away right after writing r5: its ack is lost.
			once.Do(func() {
				r.dropAll.Store(true)
				up.Store(false)
				time.AfterFunc(outage, func() { r.dropAll.Store(false); up.Store(true) })
			})
		}
		return x.AnswerPublish(res, err)
	})
	c, n := scriptedClient(t, cl, []string{r.addr()}, func(cfg *client.Config) {
		cfg.MaxAttempts = 2
		cfg.DialTimeout = 300 * time.Millisecond
		cfg.Conn.IdleTimeout, cfg.Conn.KeepAlive = 400*time.Millisecond, 100*time.Millisecond
	})
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	const records = 12
	ambiguous, failures := 0, 0
	for i := range records {
		payload := []byte(fmt.Sprint("r", i))
		for {
			_, err := p.PublishBatch(ctxT(t), sTopic, [][]byte{payload}, client.PublishOptions{})
			if err == nil {
				break
			}
			if errors.Is(err, client.ErrAmbiguous) {
				ambiguous++
				break // the producer re-sends it itself
			}
			failures++
			require.NotEqual(t, "context deadline exceeded", err.Error(), "never a bare context error")
			require.Contains(t, err.Error(), fmt.Sprint("producer ", p.ID()))
		}
	}
	// Settle a batch left in doubt by the last call, if any.
	_, err = p.PublishBatch(ctxT(t), sTopic, [][]byte{[]byte("final")}, client.PublishOptions{})
	require.NoError(t, err)
	require.True(t, up.Load())
	require.Positive(t, ambiguous, "r5's ack was lost: in doubt")
	require.Positive(t, failures, "calls failed during the outage and the application re-sent them")
	require.Positive(t, n.count(client.NoticeRetry))
	seen := map[string]int{}
	var dups []string
	for _, p := range cl.Log("s", 0) {
		seen[string(p)]++
		if seen[string(p)] == 2 {
			dups = append(dups, string(p))
		}
	}
	require.Empty(t, dups, "0 duplicates")
	for i := range records {
		require.Equal(t, 1, seen[fmt.Sprint("r", i)], "r%d landed once", i)
	}
	t.Logf("outage %v: %d ambiguous, %d failed calls re-sent by the application, %d records, 0 duplicates", outage, ambiguous, failures, len(seen))
}

// Negotiation fallbacks and feature gates: no binary acked publish
// advertised → JSON publishes; a legacy ok → the original v1 frames only;
// a request whose bit was not advertised is never sent.
func TestScriptedNegotiation(t *testing.T) {
	t.Run("no binary acked publish", func(t *testing.T) {
		cl := conntest.Start(t, conntest.Options{Configure: func(_ int, c *conn.ServerConfig) {
			c.Offer.Flags = conntest.Flags &^ (felix.FlagBinaryPublishAcked | felix.FlagBinaryPublishAck)
		}})
		c, _ := scriptedClient(t, cl, nil, nil)
		_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
		require.NoError(t, err)
		pubs := publishes(cl)
		require.Len(t, pubs, 1)
		require.False(t, pubs[0].Publish.Binary)
	})
	t.Run("binary acked publish", func(t *testing.T) {
		cl := conntest.Start(t, conntest.Options{})
		c, _ := scriptedClient(t, cl, nil, nil)
		_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
		require.NoError(t, err)
		require.True(t, publishes(cl)[0].Publish.Binary)
	})
	t.Run("legacy ok", func(t *testing.T) {
		cl := conntest.Start(t, conntest.Options{Configure: func(_ int, c *conn.ServerConfig) { c.LegacyAuth = true }})
		c, _ := scriptedClient(t, cl, nil, nil)
		_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
		require.NoError(t, err)
		require.False(t, publishes(cl)[0].Publish.Binary, "0x0008 is not in ORIGINAL_V1_FLAGS")
		_, err = c.Subscribe(ctxT(t), sTopic, client.SubscribeOptions{Start: felix.StartAt(3)})
		require.ErrorIs(t, err, felix.ErrNotAdvertised, "offsets (0x0020) were not negotiated")
		_, err = c.StreamShards(ctxT(t), sTopic)
		require.ErrorIs(t, err, felix.ErrNotAdvertised)
		for _, r := range cl.Received() {
			require.NotContains(t, []string{"subscribe", "stream_shards", "topology", "shard_owners"}, r.Type, "never sent")
		}
	})
	t.Run("no stream_shards", func(t *testing.T) {
		cl := conntest.Start(t, conntest.Options{Configure: func(_ int, c *conn.ServerConfig) {
			c.Offer.Features = conntest.Features &^ felix.FeatureStreamShards
		}})
		c, _ := scriptedClient(t, cl, nil, nil)
		require.NoError(t, c.Connect(ctxT(t)))
		_, err := c.Publish(ctxT(t), sTopic, []byte("x"), client.PublishOptions{Ack: felix.AckPerBatch, Key: []byte("k")})
		require.NoError(t, err)
		for _, r := range cl.Received() {
			require.NotEqual(t, "stream_shards", r.Type, "never sent")
		}
		require.Len(t, publishes(cl), 1)
	})
}

// not_found is retried only within the short promotion window: the call
// gives up after two retries whatever MaxAttempts says, and its class
// tells generic retry loops not to spin.
func TestScriptedNotFoundShortBudget(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	cl.Nodes[0].Always("publish", func(x *conntest.Exchange) error {
		return x.AnswerPublish(felix.PublishResult{}, &felix.BrokerError{Message: "stream not found", Code: felix.CodeNotFound})
	})
	c, n := scriptedClient(t, cl, nil, func(cfg *client.Config) { cfg.MaxAttempts = 8 })
	_, err := c.Publish(ctxT(t), sTopic, []byte("x"), acked)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotFound, be.Code)
	require.Len(t, publishes(cl), 3, "sent once and retried twice")
	require.Equal(t, 2, n.count(client.NoticeRetry))
	require.Equal(t, felix.RetryFatal, client.RetryClassOf(err))
}

// Permanent failures fail at once, without retries: an address without a
// port, a certificate the client does not trust, credentials refused.
func TestScriptedPermanentFailuresNotRetried(t *testing.T) {
	cases := []struct {
		name   string
		seed   func(cl *conntest.Cluster) string
		adjust func(cfg *client.Config)
	}{
		{"missing port", func(*conntest.Cluster) string { return "127.0.0.1" }, nil},
		{"unknown port", func(*conntest.Cluster) string { return "127.0.0.1:nosuchport" }, nil},
		{"certificate not trusted", func(cl *conntest.Cluster) string { return cl.Nodes[0].Addr }, func(cfg *client.Config) {
			cfg.Conn.TLS = &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "localhost"}
		}},
		{"credentials refused", func(cl *conntest.Cluster) string { return cl.Nodes[0].Addr }, func(cfg *client.Config) { cfg.Conn.Token = "wrong" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := conntest.Start(t, conntest.Options{Configure: func(_ int, c *conn.ServerConfig) {
				c.Authenticate = func(_ context.Context, a *felix.Auth) (any, error) {
					if a.Token != conntest.Token {
						return nil, &felix.BrokerError{Message: "authentication failed", Code: felix.CodeUnauthenticated}
					}
					return a.TenantID, nil
				}
			}})
			c, n := scriptedClient(t, cl, []string{tc.seed(cl)}, func(cfg *client.Config) {
				cfg.MaxAttempts = 8
				if tc.adjust != nil {
					tc.adjust(cfg)
				}
			})
			err := c.Connect(ctxT(t))
			require.Error(t, err)
			require.Equal(t, felix.RetryFatal, client.RetryClassOf(err), "%v", err)
			require.Zero(t, n.count(client.NoticeRetry), "not retried: %v", err)
		})
	}
}

// Records a broker sends again after a resume (below the resume offset)
// are dropped: nothing is delivered twice.
func TestScriptedResumeDropsRepeats(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 2})
	n1 := cl.Nodes[1]
	cl.Nodes[0].On("subscribe", deliverThen(&felix.ShardMovedError{HasResumeFrom: true, ResumeFrom: 13, NodeID: n1.ID, Addr: n1.Addr, Generation: 2}, offsets(10, 3)))
	n1.Always("subscribe", func(x *conntest.Exchange) error {
		// The new owner starts over at 10, whatever was asked.
		es, err := x.Subscribe(&felix.Subscribed{SubscriptionID: subIDs.Add(1)})
		if err != nil {
			return err
		}
		if err := es.BatchOf(offsets(10, 5)); err != nil {
			return err
		}
		es.Wait()
		return nil
	})
	c, _ := scriptedClient(t, cl, nil, nil)
	sub := subscribeRead(t, c, client.SubscribeOptions{Start: felix.StartAt(10)}, 3)
	for _, want := range []uint64{13, 14} {
		ev, err := sub.Next(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, want, ev.Offset)
	}
}

// A broker that ends every event stream at once does not spin the
// client: resumes that deliver nothing are bounded by the retry budget,
// then the subscription ends with the cause.
func TestScriptedFruitlessResumesBounded(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	cl.Nodes[0].Always("subscribe", deliverThen(&felix.LaggedError{ResumeFrom: 5}))
	c, _ := scriptedClient(t, cl, nil, func(cfg *client.Config) { cfg.MaxAttempts = 2 })
	sub := subscribeRead(t, c, client.SubscribeOptions{Start: felix.StartAt(5)}, 0)
	_, err := sub.Next(ctxShort(t)) // an unbounded loop fails within seconds
	var le *felix.LaggedError
	require.ErrorAs(t, err, &le)
	require.Len(t, subscribesOn(cl, 0), 3, "the first subscribe and two resumes")
}
