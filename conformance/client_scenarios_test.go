package conformance_test

// The catalogue's client scenarios (reconnection, redirects, retry
// classes, acknowledgements, errors, link faults, sharded subscriptions)
// run through the public API of the cluster-aware client (package client)
// against the fixture cluster. Helpers here are prefixed "sc" so that they
// do not collide with the other scenario files of the package.

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/conn"
)

// scNotices records a client's notices (Config.OnNotice) and lets a test
// wait for one.
type scNotices struct {
	mu      sync.Mutex
	all     []client.Notice
	changed chan struct{} // closed and replaced on every notice
}

func newSCNotices() *scNotices { return &scNotices{changed: make(chan struct{})} }

func (n *scNotices) add(ev client.Notice) {
	n.mu.Lock()
	n.all = append(n.all, ev)
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
}

// mark returns the number of notices so far: a position for since and wait.
func (n *scNotices) mark() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.all)
}

// since returns the notices from position from on.
func (n *scNotices) since(from int) []client.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.all[from:])
}

// count returns how many notices from position from on are of kind k.
func (n *scNotices) count(from int, k client.NoticeKind) int {
	c := 0
	for _, ev := range n.since(from) {
		if ev.Kind == k {
			c++
		}
	}
	return c
}

// wait returns the first notice from position from on that is of kind k
// and matches (nil matches any), waiting for it.
func (n *scNotices) wait(fx *Fx, from int, k client.NoticeKind, match func(client.Notice) bool) client.Notice {
	fx.t.Helper()
	ctx := fx.ctx()
	for {
		n.mu.Lock()
		for _, ev := range n.all[from:] {
			if ev.Kind == k && (match == nil || match(ev)) {
				n.mu.Unlock()
				return ev
			}
		}
		ch := n.changed
		n.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			fx.t.Fatalf("no %s notice came: %v", k, ctx.Err())
		}
	}
}

// at matches notices about addr.
func at(addr string) func(client.Notice) bool {
	return func(ev client.Notice) bool { return ev.Addr == addr }
}

// scClient returns a cluster-aware client over seeds with the fixture's
// credentials, and its notices; adjust may change the configuration. The
// client is closed when the test ends.
func (fx *Fx) scClient(seeds []string, adjust func(*client.Config)) (*client.Client, *scNotices) {
	fx.t.Helper()
	n := newSCNotices()
	cfg := client.Config{Seeds: seeds, OnNotice: n.add,
		Conn: conn.Config{TLS: fx.tls(), TenantID: fx.TenantID, Token: fx.Token}}
	if adjust != nil {
		adjust(&cfg)
	}
	c, err := client.New(cfg)
	require.NoError(fx.t, err)
	fx.t.Cleanup(func() { _ = c.Close() })
	return c, n
}

// scDefault returns a cluster-aware client over every fixture broker,
// configured as a user would (the client the scenarios use unless they
// need something else); closed when the test ends.
func (fx *Fx) scDefault() *client.Client {
	fx.t.Helper()
	c, _ := fx.scClient(fx.Addrs, nil)
	return c
}

// scPub publishes one record through c, acked per message.
func (fx *Fx) scPub(c *client.Client, t felix.Topic, p []byte) (client.PublishResult, error) {
	return c.Publish(fx.ctx(), t, p, client.PublishOptions{Ack: felix.AckPerMessage})
}

// scLinkClient returns a client whose only seed is the link interposer
// (no discovery, so that it stays behind the interposer), connected; it
// skips the scenario when the fixture has no interposer.
func (fx *Fx) scLinkClient(adjust func(*client.Config)) (*client.Client, *scNotices) {
	fx.t.Helper()
	if fx.LinkAddr == "" {
		fx.Skip("the fixture has no link interposer (link_addr)")
	}
	c, n := fx.scClient([]string{fx.LinkAddr}, func(cfg *client.Config) {
		cfg.NoDiscovery = true
		if adjust != nil {
			adjust(cfg)
		}
	})
	require.NoError(fx.t, c.Connect(fx.ctx()))
	return c, n
}

// scSubscribe subscribes through c; the subscription is closed when the
// test ends.
func (fx *Fx) scSubscribe(c *client.Client, t felix.Topic, o client.SubscribeOptions) *client.Subscription {
	fx.t.Helper()
	sub, err := c.Subscribe(fx.ctx(), t, o)
	require.NoError(fx.t, err)
	fx.t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// scNext reads the next record of sub.
func (fx *Fx) scNext(sub *client.Subscription) client.Event {
	fx.t.Helper()
	ev, err := sub.Next(fx.ctx())
	require.NoError(fx.t, err)
	return ev
}

// scPublish publishes one acked record through c and returns its offset.
func (fx *Fx) scPublish(c *client.Client, t felix.Topic, p string) uint64 {
	fx.t.Helper()
	res, err := c.Publish(fx.ctx(), t, []byte(p), client.PublishOptions{Ack: felix.AckPerMessage})
	require.NoError(fx.t, err)
	require.True(fx.t, res.HasOffset, "a durable stream's ack carries the offset")
	return res.Offset
}

// scRead reads n records of shard 0 of t from offset from, through a
// fresh client over every fixture broker.
func (fx *Fx) scRead(t felix.Topic, from uint64, n int) []client.Event {
	fx.t.Helper()
	c, _ := fx.scClient(fx.Addrs, nil)
	sub := fx.scSubscribe(c, t, client.SubscribeOptions{Start: felix.StartAt(from)})
	out := make([]client.Event, 0, n)
	for range n {
		out = append(out, fx.scNext(sub))
	}
	_ = sub.Close()
	return out
}

// shardsOf reads a stream_shards answer as its shard count (0 for an
// unknown stream) and routing (absent routing is modulo, the zero value).
func shardsOf(v *felix.StreamShardsView, err error) (uint32, felix.Routing, error) {
	if err != nil {
		return 0, 0, err
	}
	return v.Shards, v.Routing.V, nil
}

// scOwner returns the address of the broker that owns shard of stream
// (shard_owners, asked of the first fixture broker).
func (fx *Fx) scOwner(stream string, shard uint32) string {
	fx.t.Helper()
	owners, err := api.New(fx.client()).ShardOwners(fx.ctx(), fx.TenantID, fx.Namespace, stream, felix.ShardKindStream)
	require.NoError(fx.t, err)
	for _, o := range owners {
		if o.Shard == shard && o.Addr.V != "" {
			return o.Addr.V
		}
	}
	fx.t.Fatalf("shard_owners names no owner of %s/%d", stream, shard)
	return ""
}

// scNonOwner returns a fixture broker other than owner.
func (fx *Fx) scNonOwner(owner string) string {
	fx.t.Helper()
	for _, a := range fx.Addrs {
		if a != owner {
			return a
		}
	}
	fx.Skip("the fixture has a single broker: nobody to redirect")
	return ""
}

// scKill kills the fixture broker at addr (POST /kill) and restarts it
// when the test ends (POST /restart).
func (fx *Fx) scKill(addr string) {
	fx.t.Helper()
	i := slices.Index(fx.Addrs, addr)
	require.GreaterOrEqual(fx.t, i, 0, "%s is not a fixture broker", addr)
	fx.control("/kill", `{"node":`+strconv.Itoa(i)+`}`)
	fx.t.Cleanup(func() { fx.control("/restart", `{"node":`+strconv.Itoa(i)+`}`) })
}

// scLink injects a link fault (POST /link); the link is healed when the
// test ends.
func (fx *Fx) scLink(fault string, holdMS int) {
	fx.t.Helper()
	body, _ := json.Marshal(map[string]any{"fault": fault, "hold_ms": holdMS})
	fx.t.Cleanup(func() { fx.control("/heal", "{}") })
	fx.control("/link", string(body))
}

// scMS is d in milliseconds, for evidence.
func scMS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// scNoRetry requires that no notice from position from on is a retry.
func scNoRetry(t *testing.T, n *scNotices, from int) {
	t.Helper()
	for _, ev := range n.since(from) {
		require.NotEqual(t, client.NoticeRetry, ev.Kind, "retried: %+v", ev)
	}
}

// ---- reconnect ----

func Test_reconnect_survives_broker_loss(t *testing.T) {
	run(t, "reconnect.survives_broker_loss", func(t *testing.T, fx *Fx) {
		if len(fx.Addrs) < 2 {
			fx.Skip("the fixture has a single broker")
		}
		tp := fx.topic(fx.DurableStream)
		owner := fx.scOwner(fx.DurableStream, 0)
		// The client starts from the owner of the shard it publishes to:
		// the broker it uses.
		c, n := fx.scClient([]string{owner}, nil)
		require.NoError(t, c.Connect(fx.ctx()))
		fx.scPublish(c, tp, fx.key("before"))
		for _, a := range fx.Addrs {
			if a != owner {
				n.wait(fx, 0, client.NoticeDiscovered, at(a))
			}
		}
		m := n.mark()
		fx.scKill(owner)
		n.wait(fx, m, client.NoticeDisconnected, at(owner))
		p := fx.key("after")
		off := fx.scPublish(c, tp, p)
		require.Equal(t, p, string(fx.scRead(tp, off, 1)[0].Payload))
		fx.Pass(conformance.Evidence{"killed": owner, "offset_after": off})
	})
}

func Test_reconnect_discovers_brokers_from_one_seed(t *testing.T) {
	run(t, "reconnect.discovers_brokers_from_one_seed", func(t *testing.T, fx *Fx) {
		if len(fx.Addrs) < 2 {
			fx.Skip("the fixture has a single broker")
		}
		seed := fx.Addrs[0]
		c, n := fx.scClient([]string{seed}, nil)
		require.NoError(t, c.Connect(fx.ctx()))
		for _, a := range fx.Addrs[1:] {
			n.wait(fx, 0, client.NoticeDiscovered, at(a))
		}
		require.Subset(t, c.Brokers(), fx.Addrs, "every broker learnt from one seed")
		m := n.mark()
		fx.scKill(seed)
		n.wait(fx, m, client.NoticeDisconnected, at(seed))
		// The seed is gone: the client works on what it learnt.
		tp := fx.topic(fx.DurableStream)
		p := fx.key("no-seed")
		off := fx.scPublish(c, tp, p)
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{Start: felix.StartAt(off)})
		require.Equal(t, p, string(fx.scNext(sub).Payload))
		for _, ev := range n.since(m) {
			if ev.Kind == client.NoticeConnected {
				require.NotEqual(t, seed, ev.Addr)
			}
		}
		var discovered []string
		for _, ev := range n.since(0) {
			if ev.Kind == client.NoticeDiscovered {
				discovered = append(discovered, ev.Addr)
			}
		}
		fx.Pass(conformance.Evidence{"discovered": discovered, "seed_killed": seed, "offset_after": off})
	})
}

func Test_reconnect_subscription_resumes_at_the_next_offset(t *testing.T) {
	run(t, "reconnect.subscription_resumes_at_the_next_offset", func(t *testing.T, fx *Fx) {
		if len(fx.Addrs) < 2 {
			fx.Skip("the fixture has a single broker")
		}
		tp := fx.topic(fx.DurableStream)
		c, n := fx.scClient(fx.Addrs, nil)
		first := fx.scPublish(c, tp, fx.key("r"))
		for range 2 {
			fx.scPublish(c, tp, fx.key("r"))
		}
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{Start: felix.StartAt(first)})
		var o uint64
		var before, after []uint64
		for i := range 3 {
			ev := fx.scNext(sub)
			require.Equal(t, first+uint64(i), ev.Offset)
			o = ev.Offset
			before = append(before, o)
		}
		// The subscription is served by the shard's owner: kill it.
		owner := fx.scOwner(fx.DurableStream, 0)
		m := n.mark()
		fx.scKill(owner)
		n.wait(fx, m, client.NoticeDisconnected, at(owner))
		var want []string
		for range 3 {
			p := fx.key("after")
			fx.scPublish(c, tp, p)
			want = append(want, p)
		}
		for i, p := range want {
			ev := fx.scNext(sub)
			require.Equal(t, o+1+uint64(i), ev.Offset, "delivery continues at o+1: nothing skipped or repeated")
			require.Equal(t, p, string(ev.Payload))
			after = append(after, ev.Offset)
		}
		res := n.wait(fx, m, client.NoticeResumed, nil)
		require.Equal(t, o+1, res.Offset)
		fx.Pass(conformance.Evidence{"killed": owner, "before": before, "after": after, "resumed_at": res.Offset})
	})
}

// ---- redirect ----

func Test_redirect_follows_to_the_shard_owner(t *testing.T) {
	run(t, "redirect.follows_to_the_shard_owner", func(t *testing.T, fx *Fx) {
		tp := fx.topic(fx.DurableStream)
		owner := fx.scOwner(fx.DurableStream, 0)
		other := fx.scNonOwner(owner)
		c, n := fx.scClient([]string{other}, func(cfg *client.Config) { cfg.NoDiscovery = true })
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{})
		ev := n.wait(fx, 0, client.NoticeRedirect, nil)
		require.Equal(t, other, ev.Addr)
		require.Equal(t, owner, ev.Target)
		p := fx.key("redirected")
		fx.scPublish(c, tp, p)
		got := fx.scNext(sub)
		require.Equal(t, p, string(got.Payload))
		fx.Pass(conformance.Evidence{"redirects": n.count(0, client.NoticeRedirect), "owner": ev.Target, "offset": got.Offset})
	})
}

func Test_redirect_carries_the_start_offset_through_every_hop(t *testing.T) {
	run(t, "redirect.carries_the_start_offset_through_every_hop", func(t *testing.T, fx *Fx) {
		tp := fx.topic(fx.DurableStream)
		owner := fx.scOwner(fx.DurableStream, 0)
		other := fx.scNonOwner(owner)
		w, _ := fx.scClient(fx.Addrs, nil)
		var ps []string
		var from uint64
		for i := range 4 {
			p := fx.key("hop")
			off := fx.scPublish(w, tp, p)
			if i == 0 {
				from = off
			}
			ps = append(ps, p)
		}
		fx.scPublish(w, tp, fx.key("tail"))
		c, n := fx.scClient([]string{other}, func(cfg *client.Config) { cfg.NoDiscovery = true })
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{Start: felix.StartAt(from)})
		require.GreaterOrEqual(t, n.count(0, client.NoticeRedirect), 1, "redirected at least once")
		var delivered []uint64
		for i, p := range ps {
			ev := fx.scNext(sub)
			require.Equal(t, from+uint64(i), ev.Offset, "starts at the requested offset, not at the tail")
			require.Equal(t, p, string(ev.Payload))
			delivered = append(delivered, ev.Offset)
		}
		fx.Pass(conformance.Evidence{"redirects": n.count(0, client.NoticeRedirect), "start": from, "delivered": delivered})
	})
}

func Test_redirect_is_not_reported_as_a_failure(t *testing.T) {
	run(t, "redirect.is_not_reported_as_a_failure", func(t *testing.T, fx *Fx) {
		tp := fx.topic(fx.DurableStream)
		owner := fx.scOwner(fx.DurableStream, 0)
		other := fx.scNonOwner(owner)
		// No retry budget at all: a redirect must not need one.
		c, n := fx.scClient([]string{other}, func(cfg *client.Config) {
			cfg.NoDiscovery = true
			cfg.MaxAttempts = -1
		})
		sub, err := c.Subscribe(fx.ctx(), tp, client.SubscribeOptions{})
		require.NoError(t, err, "not_leader never reaches the application")
		t.Cleanup(func() { _ = sub.Close() })
		require.GreaterOrEqual(t, n.count(0, client.NoticeRedirect), 1)
		// An idempotent publish to a non-owner is refused with not_leader:
		// followed as well.
		c2, n2 := fx.scClient([]string{other}, func(cfg *client.Config) {
			cfg.NoDiscovery = true
			cfg.MaxAttempts = -1
		})
		prod, err := c2.NewProducer(fx.ctx())
		if errors.Is(err, felix.ErrNotAdvertised) {
			fx.Skip("the broker has no idempotent producers")
		}
		require.NoError(t, err)
		p := fx.key("idem")
		res, err := prod.PublishBatch(fx.ctx(), tp, [][]byte{[]byte(p)}, client.PublishOptions{})
		require.NoError(t, err, "not_leader never reaches the application")
		require.GreaterOrEqual(t, n2.count(0, client.NoticeRedirect), 1)
		ev := fx.scNext(sub)
		require.Equal(t, p, string(ev.Payload))
		require.Equal(t, res.Offset, ev.Offset)
		scNoRetry(t, n, 0)
		scNoRetry(t, n2, 0)
		fx.Pass(conformance.Evidence{"redirects": n.count(0, client.NoticeRedirect) + n2.count(0, client.NoticeRedirect),
			"retries": n.count(0, client.NoticeRetry) + n2.count(0, client.NoticeRetry), "offset": ev.Offset})
	})
}

// ---- retry ----

func Test_retry_terminal_failures_are_not_retried(t *testing.T) {
	run(t, "retry.terminal_failures_are_not_retried", func(t *testing.T, fx *Fx) {
		c, n := fx.scClient(fx.Addrs, func(cfg *client.Config) { cfg.Conn.Token = fx.UnauthorizedToken })
		_, err := c.Publish(fx.ctx(), fx.topic(fx.DurableStream), []byte("x"), client.PublishOptions{Ack: felix.AckPerMessage})
		be := fx.brokerError(err)
		require.Equal(t, felix.CodeForbidden, be.Code)
		require.False(t, errors.Is(err, client.ErrAmbiguous))
		require.Equal(t, felix.RetryFatal, client.RetryClassOf(err))
		scNoRetry(t, n, 0)
		require.Zero(t, n.count(0, client.NoticeRedirect))
		fx.Pass(conformance.Evidence{"code": be.Code.String(), "retry_class": client.RetryClassOf(err).String(),
			"retries": n.count(0, client.NoticeRetry)})
	})
}

func Test_retry_ambiguous_outcomes_are_not_silently_retried(t *testing.T) {
	run(t, "retry.ambiguous_outcomes_are_not_silently_retried", func(t *testing.T, fx *Fx) {
		if fx.QuorumStream == "" {
			fx.Skip("the fixture has no quorum_stream")
		}
		tp := fx.topic(fx.QuorumStream)
		c, n := fx.scClient(fx.Addrs, nil)
		fx.scPublish(c, tp, fx.key("before"))
		body, _ := json.Marshal(map[string]any{"stream": fx.QuorumStream})
		fx.control("/partition", string(body))
		t.Cleanup(func() { fx.control("/heal", "{}") })
		m := n.mark()
		_, err := c.Publish(fx.ctx(), tp, []byte(fx.key("maybe")), client.PublishOptions{Ack: felix.AckPerMessage})
		require.ErrorIs(t, err, client.ErrAmbiguous, "reported, not re-sent")
		var ae *client.AmbiguousError
		require.ErrorAs(t, err, &ae)
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.CodeQuorumTimeout, be.Code)
		require.Equal(t, felix.RetryOutcomeUnknown, client.RetryClassOf(err))
		scNoRetry(t, n, m)
		retries := n.count(m, client.NoticeRetry)
		fx.control("/heal", "{}")
		// Re-sending is asked for by name.
		res, err := c.PublishBatchMayDuplicate(fx.ctx(), tp, [][]byte{[]byte(fx.key("again"))}, client.PublishOptions{Ack: felix.AckPerMessage})
		require.NoError(t, err)
		require.True(t, res.HasOffset)
		fx.Pass(conformance.Evidence{"code": be.Code.String(), "retries": retries, "offset_after_opt_in": res.Offset})
	})
}

func Test_retry_transport_failures_are_retried_against_another_broker(t *testing.T) {
	run(t, "retry.transport_failures_are_retried_against_another_broker", func(t *testing.T, fx *Fx) {
		if len(fx.Addrs) < 2 {
			fx.Skip("the fixture has a single broker")
		}
		// A client behind the interposer learns one more broker: the owner
		// of a shard the link node does not own, by a redirect.
		c, n := fx.scLinkClient(nil)
		tp := fx.topic(fx.DurableStream)
		shards, _, err := shardsOf(c.StreamShards(fx.ctx(), tp))
		require.NoError(t, err)
		linkOwner := fx.scOwner(fx.LinkStream, 0)
		var other string
		var shard uint32
		for s := range shards {
			if o := fx.scOwner(fx.DurableStream, s); o != linkOwner {
				other, shard = o, s
				break
			}
		}
		if other == "" {
			fx.Skip("the link node owns every shard of the durable stream")
		}
		sub := fx.scSubscribe(c, tp, client.SubscribeOptions{Shard: shard})
		n.wait(fx, 0, client.NoticeConnected, at(other))
		require.NoError(t, sub.Close())
		// The interposed connection dies for good; the next call fails on
		// it and must go to the other broker, not to the dead one.
		m := n.mark()
		fx.scLink("reset", 0)
		_, err = c.StreamShards(fx.ctx(), tp)
		require.NoError(t, err, "retried on another broker")
		ev := n.wait(fx, m, client.NoticeRetry, nil)
		require.Equal(t, fx.LinkAddr, ev.Addr, "the failure was the dead connection's")
		var on []string
		for _, ev := range n.since(m) {
			if ev.Kind == client.NoticeConnected || ev.Kind == client.NoticeDialFailed {
				require.NotEqual(t, fx.LinkAddr, ev.Addr, "not retried on the dead broker")
			}
			if ev.Kind == client.NoticeConnected {
				on = append(on, ev.Addr)
			}
		}
		if len(on) == 0 { // the other broker's connection was open already
			on = append(on, other)
		}
		fx.Pass(conformance.Evidence{"failed": ev.Addr, "retries": n.count(m, client.NoticeRetry), "retried_on": on})
	})
}

// ---- ack ----

func Test_ack_none_does_not_wait_for_the_broker(t *testing.T) {
	run(t, "ack.none_does_not_wait_for_the_broker", func(t *testing.T, fx *Fx) {
		c, _ := fx.scLinkClient(nil)
		tp := fx.topic(fx.LinkStream)
		r, _ := fx.scClient(fx.Addrs, nil)
		sub := fx.scSubscribe(r, tp, client.SubscribeOptions{})
		// Nothing crosses the link until it heals: a publish that waited
		// for the broker could not return (its connection would die of
		// its idle timeout first, with an error).
		const stall = 600_000
		fx.scLink("stall", stall)
		p := fx.key("none")
		began := time.Now()
		res, err := c.Publish(fx.ctx(), tp, []byte(p), client.PublishOptions{NoAck: true})
		took := time.Since(began)
		require.NoError(t, err)
		require.False(t, res.HasOffset, "no answer, so no offset")
		fx.control("/heal", "{}")
		ev := fx.scNext(sub)
		require.Equal(t, p, string(ev.Payload), "the record was sent")
		fx.Pass(conformance.Evidence{"call_ms": scMS(took), "stall_ms": stall, "delivered_at": ev.Offset})
	})
}

func Test_ack_per_message_means_the_broker_accepted_it(t *testing.T) {
	run(t, "ack.per_message_means_the_broker_accepted_it", func(t *testing.T, fx *Fx) {
		c, _ := fx.scLinkClient(nil)
		tp := fx.topic(fx.LinkStream)
		fx.scPublish(c, tp, fx.key("warm"))
		// Through a stalled link the ack comes late; the call waits for it.
		const stall = 2000
		fx.scLink("stall", stall)
		p := fx.key("acked")
		began := time.Now()
		res, err := c.Publish(fx.ctx(), tp, []byte(p), client.PublishOptions{Ack: felix.AckPerMessage})
		took := time.Since(began)
		require.NoError(t, err)
		require.True(t, res.HasOffset)
		require.GreaterOrEqual(t, took, stall*time.Millisecond/2, "the ack crossed the stalled link: the call waited for it")
		acked := res.Offset
		// Once it returned, the broker has the record.
		require.Equal(t, p, string(fx.scRead(tp, res.Offset, 1)[0].Payload))
		batch := [][]byte{[]byte(fx.key("b0")), []byte(fx.key("b1"))}
		res, err = c.PublishBatch(fx.ctx(), tp, batch, client.PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
		var offs []uint64
		for i, ev := range fx.scRead(tp, res.Offset, 2) {
			require.Equal(t, batch[i], ev.Payload)
			offs = append(offs, ev.Offset)
		}
		fx.Pass(conformance.Evidence{"call_ms": scMS(took), "offset": acked, "batch": offs})
	})
}

func Test_ack_carries_the_offset(t *testing.T) {
	run(t, "ack.carries_the_offset", func(t *testing.T, fx *Fx) {
		tp := fx.topic(fx.DurableStream)
		bin, _ := fx.scClient(fx.Addrs, nil)
		js, _ := fx.scClient(fx.Addrs, func(cfg *client.Config) { cfg.Conn.ForceJSON = true })
		var all [][]byte
		batch := func(c *client.Client, n int) client.PublishResult {
			t.Helper()
			var ps [][]byte
			for range n {
				ps = append(ps, []byte(fx.key("off")))
			}
			res, err := c.PublishBatch(fx.ctx(), tp, ps, client.PublishOptions{Ack: felix.AckPerBatch})
			require.NoError(t, err)
			require.True(t, res.HasOffset, "the ack carries the first record's offset")
			all = append(all, ps...)
			return res
		}
		r1 := batch(bin, 3)
		r2 := batch(bin, 2)
		require.Equal(t, r1.Offset+3, r2.Offset, "binary acks: an n-record batch at o, the next at o+n")
		r3 := batch(js, 2)
		require.Equal(t, r2.Offset+2, r3.Offset, "JSON publish_ok alike")
		r4 := batch(js, 1)
		require.Equal(t, r3.Offset+2, r4.Offset)
		r5 := batch(bin, 1)
		require.Equal(t, r4.Offset+1, r5.Offset)
		prod, err := bin.NewProducer(fx.ctx())
		require.NoError(t, err)
		idem := [][]byte{[]byte(fx.key("idem")), []byte(fx.key("idem"))}
		r6, err := prod.PublishBatch(fx.ctx(), tp, idem, client.PublishOptions{})
		require.NoError(t, err)
		require.True(t, r6.HasOffset, "always for idempotent batches")
		require.Equal(t, r5.Offset+1, r6.Offset)
		all = append(all, idem...)
		var offs []uint64
		for i, ev := range fx.scRead(tp, r1.Offset, len(all)) {
			require.Equal(t, r1.Offset+uint64(i), ev.Offset)
			require.Equal(t, all[i], ev.Payload)
			offs = append(offs, ev.Offset)
		}
		fx.Pass(conformance.Evidence{"offsets": offs, "batches": len([]client.PublishResult{r1, r2, r3, r4, r5, r6})})
	})
}

func Test_ack_offset_negotiated(t *testing.T) {
	run(t, "ack.offset_negotiated", func(t *testing.T, fx *Fx) {
		tp := fx.topic(fx.DurableStream)
		noOffset := felix.DefaultClientFlags() &^ felix.FlagBinaryPublishAckOffset
		without := 0
		for _, forceJSON := range []bool{false, true} {
			c, _ := fx.scClient(fx.Addrs, func(cfg *client.Config) {
				cfg.Conn.Flags = noOffset
				cfg.Conn.ForceJSON = forceJSON
			})
			res, err := c.Publish(fx.ctx(), tp, []byte(fx.key("old")), client.PublishOptions{Ack: felix.AckPerMessage})
			require.NoError(t, err)
			require.False(t, res.HasOffset, "not offered: no offset (JSON %v)", forceJSON)
			require.Zero(t, res.Offset)
			without++
		}
		c, _ := fx.scClient(fx.Addrs, nil)
		res, err := c.Publish(fx.ctx(), tp, []byte(fx.key("new")), client.PublishOptions{Ack: felix.AckPerMessage})
		require.NoError(t, err)
		require.True(t, res.HasOffset, "offered: the offset")
		fx.Pass(conformance.Evidence{"answers_without_offset": without, "offset_when_offered": res.Offset})
	})
}

// scDoc returns the doc comment of the client package's function or
// method name, read from the package's source.
func scDoc(t *testing.T, name string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "client", "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		af, err := parser.ParseFile(fset, f, src, parser.ParseComments)
		require.NoError(t, err)
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == name && fd.Doc != nil {
				return fd.Doc.Text()
			}
		}
	}
	t.Fatalf("no documented %s in package client", name)
	return ""
}

func Test_ack_at_least_once_may_duplicate_and_says_so(t *testing.T) {
	run(t, "ack.at_least_once_may_duplicate_and_says_so", func(t *testing.T, fx *Fx) {
		if fx.QuorumStream == "" {
			fx.Skip("the fixture has no quorum_stream (no ambiguous outcome to re-send)")
		}
		// Where it is called: the name says it; in its documentation: the
		// doc comment says it.
		doc := strings.ToLower(scDoc(t, "PublishBatchMayDuplicate"))
		require.Contains(t, doc, "twice")
		require.Contains(t, doc, "duplicate")
		require.NotContains(t, strings.ToLower(scDoc(t, "PublishBatch")), "may be written twice",
			"the default publish does not re-send")

		// It re-sends an outcome_unknown answer (quorum_timeout while the
		// quorum stream's leader is cut off) once the link heals.
		tp := fx.topic(fx.QuorumStream)
		c, n := fx.scClient(fx.Addrs, nil)
		fx.scPublish(c, tp, fx.key("before"))
		body, _ := json.Marshal(map[string]any{"stream": fx.QuorumStream})
		fx.control("/partition", string(body))
		t.Cleanup(func() { fx.control("/heal", "{}") })
		p := fx.key("dup")
		type out struct {
			res client.PublishResult
			err error
		}
		done := make(chan out, 1)
		go func() {
			res, err := c.PublishBatchMayDuplicate(fx.ctx(), tp, [][]byte{[]byte(p)}, client.PublishOptions{Ack: felix.AckPerMessage})
			done <- out{res, err}
		}()
		ev := n.wait(fx, 0, client.NoticeRetry, func(ev client.Notice) bool { return ev.Op == "publish" })
		require.Equal(t, felix.RetryOutcomeUnknown, client.RetryClassOf(ev.Err), "re-sent although it may have been applied")
		fx.control("/heal", "{}")
		o := <-done
		require.NoError(t, o.err)
		require.True(t, o.res.HasOffset)
		require.Equal(t, p, string(fx.scRead(tp, o.res.Offset, 1)[0].Payload))
		fx.Pass(conformance.Evidence{"retries": n.count(0, client.NoticeRetry), "retry_class": client.RetryClassOf(ev.Err).String(),
			"offset": o.res.Offset})
	})
}

// ---- error ----

func Test_error_unauthorized_is_typed(t *testing.T) {
	run(t, "error.unauthorized_is_typed", func(t *testing.T, fx *Fx) {
		c, _ := fx.scClient(fx.Addrs, func(cfg *client.Config) { cfg.Conn.Token = fx.UnauthorizedToken })
		tp := fx.topic(fx.DurableStream)
		_, err := c.Publish(fx.ctx(), tp, []byte("x"), client.PublishOptions{Ack: felix.AckPerMessage})
		be := fx.brokerError(err)
		require.Equal(t, felix.CodeForbidden, be.Code)
		require.Equal(t, felix.RetryFatal, be.RetryClass(), "not retryable")
		require.Equal(t, felix.RetryFatal, client.RetryClassOf(err))
		_, err = c.Subscribe(fx.ctx(), tp, client.SubscribeOptions{})
		sbe := fx.brokerError(err)
		require.Equal(t, felix.CodeForbidden, sbe.Code)
		fx.Pass(conformance.Evidence{"publish_code": be.Code.String(), "subscribe_code": sbe.Code.String(),
			"retry_class": be.RetryClass().String()})
	})
}

// ---- sharded ----

// scKeys returns one routing key per shard of t.
func (fx *Fx) scKeys(c *client.Client, t felix.Topic) [][]byte {
	fx.t.Helper()
	n, routing, err := shardsOf(c.StreamShards(fx.ctx(), t))
	require.NoError(fx.t, err)
	require.Greater(fx.t, n, uint32(1), "a multi-shard stream")
	keys := make([][]byte, n)
	for i, left := 0, int(n); left > 0; i++ {
		require.Less(fx.t, i, 100000, "no key for some shard")
		k := []byte("key-" + strconv.Itoa(i))
		if s := routing.ShardOf(k, true, n); keys[s] == nil {
			keys[s] = k
			left--
		}
	}
	return keys
}

// scPublishShards publishes one record to every shard and returns the
// payloads, by shard.
func (fx *Fx) scPublishShards(c *client.Client, t felix.Topic, keys [][]byte, tag string) []string {
	fx.t.Helper()
	out := make([]string, len(keys))
	for s, k := range keys {
		out[s] = fx.key(tag + "-" + strconv.Itoa(s))
		_, err := c.Publish(fx.ctx(), t, []byte(out[s]), client.PublishOptions{Ack: felix.AckPerMessage, Key: k})
		require.NoError(fx.t, err)
	}
	return out
}

// scShardNext reads the next record of ss.
func (fx *Fx) scShardNext(ss *client.ShardedSubscription) client.ShardEvent {
	fx.t.Helper()
	ev, err := ss.Next(fx.ctx())
	require.NoError(fx.t, err)
	return ev
}

func Test_sharded_delivers_every_shard(t *testing.T) {
	run(t, "sharded.delivers_every_shard", func(t *testing.T, fx *Fx) {
		tp := fx.topic(fx.DurableStream)
		c, _ := fx.scClient(fx.Addrs, nil)
		keys := fx.scKeys(c, tp)
		ss, err := c.SubscribeSharded(fx.ctx(), tp, client.ShardedOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ss.Close() })
		require.Equal(t, len(keys), ss.Shards())
		want := fx.scPublishShards(c, tp, keys, "every")
		got := make([]string, len(keys))
		for range keys {
			ev := fx.scShardNext(ss)
			require.Empty(t, got[ev.Shard], "one record per shard")
			got[ev.Shard] = string(ev.Payload)
		}
		require.Equal(t, want, got, "every shard's record arrived, on its shard")
		fx.Pass(conformance.Evidence{"shards": len(keys), "delivered": len(got)})
	})
}

func Test_sharded_resumes_per_shard(t *testing.T) {
	run(t, "sharded.resumes_per_shard", func(t *testing.T, fx *Fx) {
		tp := fx.topic(fx.DurableStream)
		c, _ := fx.scClient(fx.Addrs, nil)
		keys := fx.scKeys(c, tp)
		ss, err := c.SubscribeSharded(fx.ctx(), tp, client.ShardedOptions{})
		require.NoError(t, err)
		fx.scPublishShards(c, tp, keys, "first")
		for range keys {
			fx.scShardNext(ss)
		}
		from := ss.Offsets()
		require.Len(t, from, len(keys), "a map from shard to offset")
		require.NoError(t, ss.Close())
		// Missed while nobody listened.
		want := fx.scPublishShards(c, tp, keys, "missed")
		ss, err = c.SubscribeSharded(fx.ctx(), tp, client.ShardedOptions{From: from})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ss.Close() })
		got := make([]string, len(keys))
		for range keys {
			ev := fx.scShardNext(ss)
			require.Empty(t, got[ev.Shard], "no duplicate")
			require.Equal(t, from[ev.Shard], ev.Offset, "each shard resumes at its own offset")
			got[ev.Shard] = string(ev.Payload)
		}
		require.Equal(t, want, got)
		resumed := make([]string, 0, len(from))
		for s := range len(keys) {
			resumed = append(resumed, fmt.Sprintf("%d@%d", s, from[uint32(s)]))
		}
		fx.Pass(conformance.Evidence{"shards": len(keys), "resumed_from": resumed})
	})
}

func Test_sharded_a_lost_shard_is_surfaced(t *testing.T) {
	run(t, "sharded.a_lost_shard_is_surfaced", func(t *testing.T, fx *Fx) {
		tp := fx.topic(fx.DurableStream)
		c, _ := fx.scClient(fx.Addrs, nil)
		keys := fx.scKeys(c, tp)
		// Shard 0 starts at a discarded offset and is lost; the others
		// start at their tails.
		sub := fx.subscribe(fx.client(), tp, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
		if sub.Info().StartOffset.V == 0 {
			fx.Skip("the fixture's durable stream has discarded no offset of shard 0")
		}
		from := map[uint32]uint64{0: 0}
		ss, err := c.SubscribeSharded(fx.ctx(), tp, client.ShardedOptions{From: from})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ss.Close() })
		_, err = ss.Next(fx.ctx())
		var lost *client.ShardLostError
		require.ErrorAs(t, err, &lost, "the lost shard is reported")
		require.Equal(t, uint32(0), lost.Shard)
		var ce *felix.CursorError
		require.ErrorAs(t, err, &ce, "with its cause")
		want := fx.scPublishShards(c, tp, keys, "alive")
		got := make(map[uint32]string)
		for range len(keys) - 1 {
			ev := fx.scShardNext(ss)
			got[ev.Shard] = string(ev.Payload)
		}
		for s := 1; s < len(keys); s++ {
			require.Equal(t, want[s], got[uint32(s)], "the other shards keep delivering")
		}
		fx.Pass(conformance.Evidence{"lost_shard": lost.Shard, "cause": ce.Reason, "others_delivered": len(got)})
	})
}

// ---- fault ----

// scStep returns the catalogue's fault step of id.
func scStep(t *testing.T, id string) conformance.Step {
	t.Helper()
	s, ok := conformance.Lookup(id)
	require.True(t, ok && s.Step != nil, "%s is a fault scenario", id)
	return *s.Step
}

// scFaultPublish runs a "publish" fault step: records published one at a
// time through the interposed client, the fault injected after
// after_records; every call returns, a publish succeeds again after the
// fault, and every acknowledged record reads back.
func scFaultPublish(t *testing.T, fx *Fx, id string) {
	st := scStep(t, id)
	c, _ := fx.scLinkClient(nil)
	tp := fx.topic(fx.LinkStream)
	acked := make(map[uint64]string)
	var order []uint64 // acknowledged offsets, in publish order
	var first uint64
	var last uint64
	errs := 0
	for i := range st.Records {
		if i == st.AfterRecords {
			fx.scLink(st.Fault, st.HoldMS)
		}
		for try := 0; ; try++ {
			p := fmt.Sprintf("%s-%d-%d", fx.key("rec"), i, try)
			res, err := c.Publish(fx.ctx(), tp, []byte(p), client.PublishOptions{Ack: felix.AckPerMessage})
			if err == nil {
				require.True(t, res.HasOffset)
				if len(acked) == 0 {
					first = res.Offset
				}
				acked[res.Offset] = p
				order = append(order, res.Offset)
				last = res.Offset
				break
			}
			errs++
			require.NoError(t, fx.ctx().Err(), "gave up: %v", err)
			if st.Fault == "stall" {
				t.Fatalf("a stalled link makes publishes slower, not failed: %v", err)
			}
			// An error is an answer; the next attempt must get through once
			// the link works again.
			require.True(t, errors.Is(err, client.ErrAmbiguous) || isTransport(err) || client.RetryClassOf(err) != felix.RetryFatal,
				"a typed failure of the link: %v", err)
		}
	}
	require.Len(t, acked, st.Records)
	evs := fx.scRead(tp, first, int(last-first+1))
	readBack := 0
	for _, ev := range evs {
		if p, ok := acked[ev.Offset]; ok {
			require.Equal(t, p, string(ev.Payload), "acknowledged record at %d reads back", ev.Offset)
			delete(acked, ev.Offset)
			readBack++
		}
	}
	require.Empty(t, acked, "every acknowledged record reads back")
	fx.Pass(conformance.Evidence{"acked": order, "read_back": readBack, "errors": errs})
}

// scFaultSubscribe runs a "subscribe" fault step: subscribed through the
// interposed client, records published through an ordinary one, the fault
// injected after after_records arrived (the rest is published after it).
// Upstream's catalogue lets a client fail such a subscription with an
// error; the cluster-aware client promises more (it resumes after a lost
// connection), so here the rest must arrive, contiguous: no gap, no
// duplicate, no error and no end. Through a drop or a reset the
// subscription must have resumed (a resumed notice): records that arrive
// only because the connection survived prove nothing about resuming.
func scFaultSubscribe(t *testing.T, fx *Fx, id string) {
	st := scStep(t, id)
	c, n := fx.scLinkClient(nil)
	w, _ := fx.scClient(fx.Addrs, nil)
	tp := fx.topic(fx.LinkStream)
	start := fx.scPublish(w, tp, fx.key("start"))
	sub := fx.scSubscribe(c, tp, client.SubscribeOptions{Start: felix.StartAt(start + 1)})
	var want []string
	publish := func(n int) {
		for range n {
			p := fmt.Sprintf("%s-%d", fx.key("sub"), len(want))
			fx.scPublish(w, tp, p)
			want = append(want, p)
		}
	}
	publish(st.AfterRecords)
	var before, after []uint64
	for i := range st.AfterRecords {
		ev := fx.scNext(sub)
		require.Equal(t, start+1+uint64(i), ev.Offset)
		require.Equal(t, want[i], string(ev.Payload))
		before = append(before, ev.Offset)
	}
	// The rest is published once the link is faulty: it has to cross it.
	m := n.mark()
	fx.scLink(st.Fault, st.HoldMS)
	publish(st.Records - st.AfterRecords)
	for i := st.AfterRecords; i < st.Records; i++ {
		ev, err := sub.Next(fx.ctx())
		require.NotErrorIs(t, err, io.EOF, "a clean end is a failure")
		require.NoError(t, err, "the subscription ended instead of resuming after the %s", st.Fault)
		require.Equal(t, start+1+uint64(i), ev.Offset, "contiguous: no gap, no duplicate")
		require.Equal(t, want[i], string(ev.Payload))
		after = append(after, ev.Offset)
	}
	ev := conformance.Evidence{"before": before, "after": after, "resumes": n.count(m, client.NoticeResumed)}
	if st.Fault == conformance.FaultStall {
		require.Zero(t, ev["resumes"], "a stall is ridden out on the same connection, never resumed from")
	} else {
		res := n.wait(fx, m, client.NoticeResumed, nil)
		require.Equal(t, before[len(before)-1]+1, res.Offset, "resumed after the last delivered record")
		ev["resumed_at"] = res.Offset
	}
	fx.Pass(ev)
}

// scFaultCache runs a "cache" fault step: records rounds of a put of key
// <id>-<n> (value: its name) and an add of 1 to counter <id>-count
// through the interposed client, the fault injected after after_records
// rounds; every call returns, a put succeeds after the fault, every
// acknowledged put reads back through the same client, and the counter
// lies between the acknowledged adds and records.
func scFaultCache(t *testing.T, fx *Fx, id string) {
	st := scStep(t, id)
	c, _ := fx.scLinkClient(nil)
	ref := fx.cache(fx.Cache)
	prefix := fx.key(id)
	var puts []string
	adds := 0
	for i := range st.Records {
		if i == st.AfterRecords {
			fx.scLink(st.Fault, st.HoldMS)
		}
		k := prefix + "-" + strconv.Itoa(i)
		if err := c.CachePut(fx.ctx(), ref, k, []byte(k), 0); err == nil {
			puts = append(puts, k)
		} else {
			require.NoError(t, fx.ctx().Err(), "gave up: %v", err)
			t.Logf("put %s: %v", k, err)
		}
		if _, _, err := c.CounterAdd(fx.ctx(), ref, prefix+"-count", 1); err == nil {
			adds++
		} else {
			require.NoError(t, fx.ctx().Err(), "gave up: %v", err)
			t.Logf("add %d: %v", i, err)
		}
	}
	after := prefix + "-after"
	for {
		err := c.CachePut(fx.ctx(), ref, after, []byte(after), 0)
		if err == nil {
			break
		}
		require.NoError(t, fx.ctx().Err(), "a put never succeeded again: %v", err)
	}
	for _, k := range puts {
		v, found, err := c.CacheGet(fx.ctx(), ref, k)
		require.NoError(t, err)
		require.True(t, found, "acknowledged put %s reads back", k)
		require.Equal(t, k, string(v))
	}
	v, found, err := c.CounterGet(fx.ctx(), ref, prefix+"-count")
	require.NoError(t, err)
	require.True(t, found || adds == 0)
	require.GreaterOrEqual(t, v, int64(adds), "at least the acknowledged adds")
	require.LessOrEqual(t, v, int64(st.Records), "at most one per round")
	fx.Pass(conformance.Evidence{"acked_puts": len(puts), "read_back": len(puts), "counter": v})
}

func Test_fault_publish_through_a_dropped_link(t *testing.T) {
	run(t, "fault.publish_through_a_dropped_link", func(t *testing.T, fx *Fx) {
		scFaultPublish(t, fx, "fault.publish_through_a_dropped_link")
	})
}

func Test_fault_publish_through_a_reset_link(t *testing.T) {
	run(t, "fault.publish_through_a_reset_link", func(t *testing.T, fx *Fx) {
		scFaultPublish(t, fx, "fault.publish_through_a_reset_link")
	})
}

func Test_fault_publish_through_a_stalled_link(t *testing.T) {
	run(t, "fault.publish_through_a_stalled_link", func(t *testing.T, fx *Fx) {
		scFaultPublish(t, fx, "fault.publish_through_a_stalled_link")
	})
}

func Test_fault_subscription_through_a_dropped_link(t *testing.T) {
	run(t, "fault.subscription_through_a_dropped_link", func(t *testing.T, fx *Fx) {
		scFaultSubscribe(t, fx, "fault.subscription_through_a_dropped_link")
	})
}

func Test_fault_subscription_through_a_reset_link(t *testing.T) {
	run(t, "fault.subscription_through_a_reset_link", func(t *testing.T, fx *Fx) {
		scFaultSubscribe(t, fx, "fault.subscription_through_a_reset_link")
	})
}

func Test_fault_subscription_through_a_stalled_link(t *testing.T) {
	run(t, "fault.subscription_through_a_stalled_link", func(t *testing.T, fx *Fx) {
		scFaultSubscribe(t, fx, "fault.subscription_through_a_stalled_link")
	})
}

func Test_fault_cache_through_a_reset_link(t *testing.T) {
	run(t, "fault.cache_through_a_reset_link", func(t *testing.T, fx *Fx) {
		scFaultCache(t, fx, "fault.cache_through_a_reset_link")
	})
}

// ---- idempotent producer ----

// scLostAck is the outcome of scResendAfterLostAck.
type scLostAck struct {
	c        *client.Client
	prod     *client.Producer
	tp       felix.Topic
	payload  string
	res      client.PublishResult // what the producer's call returned
	written  uint64               // where the broker wrote the batch first
	retries  int
	notices  *scNotices
	nextSeqs uint64 // the sequence of the batch after the lost one (warm 0, lost 1)
}

// scResendAfterLostAck publishes a batch through an idempotent producer of
// the interposed client and loses its ack: the request is held by a
// stall, a drop longer than the idle timeout starts before the stall
// releases it, so the broker writes the batch (an ordinary subscriber sees
// it) while its ack, and everything else on that connection, is
// discarded. The producer must re-send on a new connection once the link
// works again.
//
// It needs the interposer's counters (the in-process cluster's, or GET
// /link/stats of the control endpoint) to start the drop once the request
// is held.
func scResendAfterLostAck(t *testing.T, fx *Fx) scLostAck {
	t.Helper()
	stalled := fx.scStalledCounter()
	c, n := fx.scLinkClient(nil)
	tp := fx.topic(fx.LinkStream)
	prod, err := c.NewProducer(fx.ctx())
	if errors.Is(err, felix.ErrNotAdvertised) {
		fx.Skip("the broker has no idempotent producers")
	}
	require.NoError(t, err)
	_, err = prod.PublishBatch(fx.ctx(), tp, [][]byte{[]byte(fx.key("warm"))}, client.PublishOptions{})
	require.NoError(t, err)
	r, _ := fx.scClient(fx.Addrs, nil)
	sub := fx.scSubscribe(r, tp, client.SubscribeOptions{})

	held := stalled()
	fx.scLink("stall", 1000)
	p := fx.key("lost-ack")
	type out struct {
		res client.PublishResult
		err error
	}
	done := make(chan out, 1)
	m := n.mark()
	go func() {
		res, err := prod.PublishBatch(fx.ctx(), tp, [][]byte{[]byte(p)}, client.PublishOptions{})
		done <- out{res, err}
	}()
	for stalled() == held { // the request is held
		select {
		case <-fx.ctx().Done():
			t.Fatal("the publish never reached the interposer")
		case <-time.After(time.Millisecond): // a polling pace, not a timing assertion
		}
	}
	body, _ := json.Marshal(map[string]any{"fault": "drop", "hold_ms": 8000})
	fx.control("/link", string(body))
	ev := fx.scNext(sub)
	require.Equal(t, p, string(ev.Payload), "the broker wrote the batch; its ack is being dropped")
	o := <-done
	require.NoError(t, o.err, "re-sent until answered")
	return scLostAck{c: c, prod: prod, tp: tp, payload: p, res: o.res, written: ev.Offset,
		retries: n.count(m, client.NoticeRetry), notices: n, nextSeqs: 2}
}

// scStalledCounter returns a function reading the interposer's count of
// stalled datagrams: from the in-process cluster, or from GET /link/stats
// of the fixture's control endpoint; it skips the scenario when neither
// is available.
func (fx *Fx) scStalledCounter() func() uint64 {
	fx.t.Helper()
	if fx.LinkAddr == "" {
		fx.Skip("the fixture has no link interposer (link_addr)")
	}
	if inProcess != nil {
		return func() uint64 { return inProcess.Link().Stats().Stalled }
	}
	if fx.ControlURL == "" {
		fx.Skip("the fixture has no control endpoint (control_url)")
	}
	get := func() (uint64, int) {
		code, answer, err := fx.Control(fx.ctx(), http.MethodGet, "/link/stats", nil)
		require.NoError(fx.t, err)
		var st struct {
			Stalled *uint64 `json:"stalled"`
		}
		if code != http.StatusOK {
			return 0, code
		}
		if json.Unmarshal(answer, &st) != nil || st.Stalled == nil {
			return 0, 0 // not the counters
		}
		return *st.Stalled, http.StatusOK
	}
	if _, code := get(); code != http.StatusOK {
		fx.Skip("the control endpoint has no interposer counters (GET /link/stats: " + strconv.Itoa(code) + ")")
	}
	return func() uint64 { v, _ := get(); return v }
}

func Test_retry_idempotent_producers_re_send_ambiguous_outcomes(t *testing.T) {
	run(t, "retry.idempotent_producers_re_send_ambiguous_outcomes", func(t *testing.T, fx *Fx) {
		la := scResendAfterLostAck(t, fx)
		require.Positive(t, la.retries, "re-sent after the lost ack")
		require.Equal(t, la.written, la.res.Offset, "the same sequence: answered as the batch already written")
		// The sequence moved on only after the ack: the next batch is new.
		next := fx.key("next")
		res, err := la.prod.PublishBatch(fx.ctx(), la.tp, [][]byte{[]byte(next)}, client.PublishOptions{})
		require.NoError(t, err)
		require.Greater(t, res.Offset, la.written)
		evs := fx.scRead(la.tp, la.written, int(res.Offset-la.written+1))
		copies := 0
		for _, ev := range evs {
			if string(ev.Payload) == la.payload {
				copies++
			}
		}
		require.Equal(t, 1, copies, "the batch is written once")
		require.Equal(t, next, string(evs[len(evs)-1].Payload))
		// A refusal cannot be mended by re-sending: another writer takes
		// the producer's next sequence, and the producer stops.
		owner := fx.dial(fx.scOwner(fx.LinkStream, 0), nil)
		_, err = owner.PublishIdempotent(fx.ctx(), la.tp, [][]byte{[]byte(fx.key("intruder"))}, nil, la.prod.ID(), la.nextSeqs+1)
		require.NoError(t, err)
		m := la.notices.mark()
		_, err = la.prod.PublishBatch(fx.ctx(), la.tp, [][]byte{[]byte(fx.key("refused"))}, client.PublishOptions{})
		var refused *felix.PublishRefusedError
		require.ErrorAs(t, err, &refused, "publish_refused stops the producer")
		scNoRetry(t, la.notices, m)
		_, err = la.prod.PublishBatch(fx.ctx(), la.tp, [][]byte{[]byte(fx.key("after"))}, client.PublishOptions{})
		require.ErrorIs(t, err, client.ErrProducerStopped)
		fx.Pass(conformance.Evidence{"retries": la.retries, "written_at": la.written, "answered": la.res.Offset, "copies": copies,
			"refused": refused.Reason})
	})
}

func Test_ack_duplicate_reports_the_original_offset(t *testing.T) {
	run(t, "ack.duplicate_reports_the_original_offset", func(t *testing.T, fx *Fx) {
		la := scResendAfterLostAck(t, fx)
		require.True(t, la.res.HasOffset)
		require.Equal(t, la.written, la.res.Offset, "answered from memory with the offset of the first write")
		evs := fx.scRead(la.tp, la.written, 1)
		require.Equal(t, la.payload, string(evs[0].Payload))
		// Not appended again: the next record is the next batch's.
		res, err := la.prod.PublishBatch(fx.ctx(), la.tp, [][]byte{[]byte(fx.key("next"))}, client.PublishOptions{})
		require.NoError(t, err)
		require.Equal(t, la.written+1, res.Offset, "nothing was appended in between")
		fx.Pass(conformance.Evidence{"written_at": la.written, "answered": la.res.Offset, "next": res.Offset})
	})
}
