package api_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// The examples below run against one reference broker (examples/broker),
// started on first use, with durable streams, an attempt bound of 2,
// 4-shard streams, the demo token and an operator token.

var (
	refOnce sync.Once
	refSrv  *server.Server
)

func exampleClient(ctx context.Context) *conn.Client {
	refOnce.Do(func() {
		cfg := server.Config{Addr: "127.0.0.1:0"}
		cfg.Engine.DefaultStream.Durable = true
		cfg.Engine.DefaultStream.Shards = 4
		cfg.Engine.Groups.MaxAttempts = 2
		cfg.Tokens = map[string]server.Identity{
			server.DemoToken: {Tenant: server.DemoTenant, Principal: server.DemoTenant},
			// An operator token: node.view:cluster:* and nothing else.
			exampleOpsToken: {Tenant: server.DemoTenant, Principal: "ops", Deny: server.PermAll, Grant: server.PermNodeView},
		}
		srv, err := server.Listen(cfg)
		if err != nil {
			log.Fatal(err)
		}
		go srv.Serve()
		refSrv = srv
	})
	c, err := conn.Dial(ctx, refSrv.Addr().String(), &conn.Config{
		TLS: &tls.Config{RootCAs: refSrv.CertPool()}, TenantID: server.DemoTenant, Token: server.DemoToken})
	if err != nil {
		log.Fatal(err)
	}
	return c
}

const exampleOpsToken = "ops-token"

// exampleOpsClient connects with the operator token.
func exampleOpsClient(ctx context.Context) *conn.Client {
	exampleClient(ctx).Close() // start the broker
	c, err := conn.Dial(ctx, refSrv.Addr().String(), &conn.Config{
		TLS: &tls.Config{RootCAs: refSrv.CertPool()}, TenantID: server.DemoTenant, Token: exampleOpsToken})
	if err != nil {
		log.Fatal(err)
	}
	return c
}

func exampleCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 20*time.Second)
}

// exampleQueue publishes payloads to a fresh stream and returns a group on
// its shard 0 (unkeyed records land there).
func exampleQueue(ctx context.Context, c *conn.Client, stream string, payloads ...string) *api.Group {
	t := felix.Topic{TenantID: server.DemoTenant, Namespace: "examples", Stream: stream}
	for _, p := range payloads {
		if _, err := c.Publish(ctx, t, []byte(p), conn.PublishOptions{Ack: felix.AckPerMessage}); err != nil {
			log.Fatal(err)
		}
	}
	return api.New(c).Group(api.GroupRef{Topic: t, Group: "workers"})
}

func ExampleGroup_Poll() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "poll", "a", "b")
	recs, err := g.Poll(ctx, api.PollOptions{Max: 10, Wait: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Printf("offset %d attempt %d: %s\n", r.Offset, r.Attempts, r.Payload)
	}
	recs, err = g.Poll(ctx, api.PollOptions{Max: 10}) // everything is claimed
	fmt.Println(len(recs), err)
	// Output:
	// offset 0 attempt 1: a
	// offset 1 attempt 1: b
	// 0 <nil>
}

func ExampleGroup_Ack() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "ack", "a")
	recs, _ := g.Poll(ctx, api.PollOptions{})
	fmt.Println(g.Ack(ctx, recs[0].Offset))
	var be *felix.BrokerError
	err := g.Ack(ctx, recs[0].Offset) // no claim any more
	fmt.Println(errors.As(err, &be) && be.Code == felix.CodeStaleClaim)
	// Output:
	// <nil>
	// true
}

func ExampleGroup_Nack() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "nack", "a")
	recs, _ := g.Poll(ctx, api.PollOptions{})
	if err := g.Nack(ctx, recs[0].Offset, api.NackOptions{Attempts: recs[0].Attempts}); err != nil {
		log.Fatal(err)
	}
	recs, _ = g.Poll(ctx, api.PollOptions{}) // redelivered at once
	fmt.Println(recs[0].Offset, recs[0].Attempts)
	// Output: 0 2
}

func ExampleGroup_Extend() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "extend", "slow job")
	recs, _ := g.Poll(ctx, api.PollOptions{Visibility: 10 * time.Second})
	granted, err := g.Extend(ctx, recs[0].Offset, recs[0].Attempts, time.Minute)
	fmt.Println(granted, err)
	// Output: 1m0s <nil>
}

func ExampleGroup_DeadLetters() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "dead", "poison")
	for range 2 { // the example broker's attempt bound is 2
		recs, _ := g.Poll(ctx, api.PollOptions{})
		_ = g.Nack(ctx, recs[0].Offset, api.NackOptions{})
	}
	dead, err := g.DeadLetters(ctx)
	fmt.Println(dead, err)
	// Output: [0] <nil>
}

func ExampleGroup_DeadLetter() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "deadletter", "cannot parse")
	recs, _ := g.Poll(ctx, api.PollOptions{})
	fmt.Println(g.DeadLetter(ctx, recs[0].Offset)) // no point retrying
	dead, _ := g.DeadLetters(ctx)
	fmt.Println(dead)
	// Output:
	// <nil>
	// [0]
}

func ExampleDelivery_Nack() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "delivery", "flaky")
	for d, err := range g.Records(ctx, api.PollOptions{}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("attempt", d.Attempts)
		if d.Attempts == 1 {
			_ = d.Nack(ctx, 0) // failed: redeliver at once
			continue
		}
		_ = d.Ack(ctx) // handled; a record left unsettled at break is given back
		break
	}
	// Output:
	// attempt 1
	// attempt 2
}

func ExampleGroup_Redrive() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "redrive", "retry me")
	recs, _ := g.Poll(ctx, api.PollOptions{})
	_ = g.DeadLetter(ctx, recs[0].Offset)
	if err := g.Redrive(ctx, recs[0].Offset); err != nil {
		log.Fatal(err)
	}
	recs, _ = g.Poll(ctx, api.PollOptions{})
	fmt.Println(string(recs[0].Payload), "attempt", recs[0].Attempts)
	// Output: retry me attempt 1
}

func ExampleGroup_Discard() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "discard", "junk")
	recs, _ := g.Poll(ctx, api.PollOptions{})
	_ = g.DeadLetter(ctx, recs[0].Offset)
	fmt.Println(g.Discard(ctx, recs[0].Offset))
	dead, _ := g.DeadLetters(ctx)
	fmt.Println(len(dead))
	// Output:
	// <nil>
	// 0
}

func ExampleGroup_Seek() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "seek", "old", "older")
	pos, err := g.Seek(ctx, felix.StartPosition{Kind: felix.StartLatest}, false) // skip the backlog
	fmt.Println(pos.Offset, pos.Moved, err)
	// Output: 2 true <nil>
}

func ExampleGroup_Describe() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "describe", "a", "b", "c")
	_, _ = g.Poll(ctx, api.PollOptions{Max: 1})
	info, err := g.Describe(ctx)
	fmt.Printf("committed %d tail %d in flight %d owed %d %v\n", info.Committed, info.Tail, info.InFlight, info.Owed, err)
	// Output: committed 0 tail 3 in flight 1 owed 2 <nil>
}

func ExampleGroup_Delete() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "delete", "a")
	_, _ = g.Poll(ctx, api.PollOptions{})
	existed, err := g.Delete(ctx)
	fmt.Println(existed, err)
	// Output: true <nil>
}

func ExampleGroup_Records() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	g := exampleQueue(ctx, cc, "records", "job-1", "job-2", "stop")
	for d, err := range g.Records(ctx, api.PollOptions{}) {
		if err != nil {
			log.Fatal(err)
		}
		if string(d.Payload) == "stop" {
			_ = d.Ack(ctx)
			break
		}
		fmt.Println("processing", string(d.Payload)) // acked when the body continues
	}
	// Output:
	// processing job-1
	// processing job-2
}

func ExampleCalls_Commit() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	accounts := felix.Topic{TenantID: server.DemoTenant, Namespace: "examples", Stream: "accounts"}
	off, err := c.Commit(ctx, api.CommitRequest{Topic: accounts, EntityKey: []byte("acct-1"), Ops: []api.CommitOp{
		api.PublishEvent("", []byte(`{"deposit":10}`)),
		api.PutState("", "balance", []byte("10")),
	}})
	fmt.Println(off, err)

	// Refused before sending: two events; an operation on another stream.
	_, err = c.Commit(ctx, api.CommitRequest{Topic: accounts, EntityKey: []byte("acct-1"), Ops: []api.CommitOp{
		api.PublishEvent("", nil), api.EnqueueEvent("", nil)}})
	fmt.Println(errors.Is(err, api.ErrCommitEventCount))
	_, err = c.Commit(ctx, api.CommitRequest{Topic: accounts, EntityKey: []byte("acct-1"), Ops: []api.CommitOp{
		api.PublishEvent("", nil), api.PutState("audit", "k", nil)}})
	fmt.Println(err)
	// Output:
	// 0 <nil>
	// true
	// api: commit operation not on the entity's stream and shard: operation 1 (put on stream "audit" key "k"; commit stream "accounts")
}

func ExampleCalls_StateGet() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	carts := felix.Topic{TenantID: server.DemoTenant, Namespace: "examples", Stream: "carts"}
	off, _ := c.Commit(ctx, api.CommitRequest{Topic: carts, EntityKey: []byte("cart-9"), Ops: []api.CommitOp{
		api.PublishEvent("", []byte("added")), api.PutState("", "items", []byte("1"))}})
	v, err := c.StateGet(ctx, carts, []byte("cart-9"), "items")
	fmt.Println(string(v.Value), v.Version == off, v.AsOf >= off, err)
	v, _ = c.StateGet(ctx, carts, []byte("cart-9"), "coupon")
	fmt.Println(v.Found)
	// Output:
	// 1 true true <nil>
	// false
}

func ExampleCalls_PublishIf() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	ledger := felix.Topic{TenantID: server.DemoTenant, Namespace: "examples", Stream: "ledger"}
	res, err := c.PublishIf(ctx, ledger, [][]byte{[]byte("entry")}, nil, 0)
	fmt.Println(res.Offset, err)
	_, err = c.PublishIf(ctx, ledger, [][]byte{[]byte("entry")}, nil, 0) // someone else got 0
	var rf *felix.PublishRefusedError
	if errors.As(err, &rf) {
		tail, _ := rf.Tail()
		fmt.Println(rf.Reason, "tail", tail)
	}
	// Output:
	// 0 <nil>
	// offset_mismatch tail 1
}

func ExampleCalls_CachePutIf() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	ref := felix.CacheRef{TenantID: server.DemoTenant, Namespace: "examples", Cache: "locks"}
	r, _ := c.CachePutIf(ctx, ref, "leader", []byte("node-a"), felix.CacheCondition{Kind: felix.CondAbsent}, time.Minute)
	fmt.Println("a:", r.Applied)
	r2, _ := c.CachePutIf(ctx, ref, "leader", []byte("node-b"), felix.CacheCondition{Kind: felix.CondAbsent}, time.Minute)
	fmt.Println("b:", r2.Applied, r2.Version == r.Version)
	// Output:
	// a: true
	// b: false true
}

func ExampleCalls_CacheDeleteIf() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	ref := felix.CacheRef{TenantID: server.DemoTenant, Namespace: "examples", Cache: "locks2"}
	r, _ := c.CachePutIf(ctx, ref, "leader", []byte("node-a"), felix.CacheCondition{Kind: felix.CondAbsent}, 0)
	d, err := c.CacheDeleteIf(ctx, ref, "leader", r.Version) // release only our own lock
	fmt.Println(d.Applied, err)
	// Output: true <nil>
}

func ExampleCalls_CacheGetVersioned() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	ref := felix.CacheRef{TenantID: server.DemoTenant, Namespace: "examples", Cache: "versioned"}
	r, _ := c.CachePutIf(ctx, ref, "k", []byte("v"), felix.CacheCondition{Kind: felix.CondAbsent}, 0)
	item, err := c.CacheGetVersioned(ctx, ref, "k")
	fmt.Println(string(item.Value), item.Version == r.Version, err)
	// Output: v true <nil>
}

func ExampleCalls_StreamShards() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	s, err := c.StreamShards(ctx, felix.Topic{TenantID: server.DemoTenant, Namespace: "examples", Stream: "orders"})
	fmt.Println(s.Shards, s.Routing.V, err)
	fmt.Println("customer-1 lands on shard", s.Routing.V.Shard([]byte("customer-1"), s.Shards))
	// Output:
	// 4 modulo <nil>
	// customer-1 lands on shard 3
}

func ExampleCalls_CacheShards() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	n, err := c.CacheShards(ctx, felix.CacheRef{TenantID: server.DemoTenant, Namespace: "examples", Cache: "c"})
	fmt.Println(n, err)
	// Output: 1 <nil>
}

func ExampleCalls_OffsetForTime() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	t := felix.Topic{TenantID: server.DemoTenant, Namespace: "examples", Stream: "timeline"}
	_, _ = cc.Publish(ctx, t, []byte("x"), conn.PublishOptions{Ack: felix.AckPerMessage})
	off, found, err := c.OffsetForTime(ctx, t, 0, time.Unix(0, 0))
	fmt.Println(off, found, err)
	_, found, _ = c.OffsetForTime(ctx, t, 0, time.Now().Add(time.Hour))
	fmt.Println(found)
	// Output:
	// 0 true <nil>
	// false
}

func ExampleCalls_StreamRead() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	t := felix.Topic{TenantID: server.DemoTenant, Namespace: "examples", Stream: "history"}
	_, _ = cc.PublishBatch(ctx, t, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, conn.PublishOptions{Ack: felix.AckPerBatch})
	for from := uint64(0); ; {
		page, err := c.StreamRead(ctx, t, 0, api.ReadOptions{From: from, MaxRecords: 2})
		if err != nil {
			log.Fatal(err)
		}
		if len(page.Records) == 0 {
			break
		}
		for _, r := range page.Records {
			fmt.Print(r.Offset, ":", string(r.Payload), " ")
		}
		from = page.Next
	}
	fmt.Println()
	// Output: 0:a 1:b 2:c
}

func ExampleCalls_Topology() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	// A standalone broker is no cluster: it does not advertise topology,
	// and nothing is sent.
	_, err := c.Topology(ctx)
	fmt.Println(errors.Is(err, felix.ErrNotAdvertised))
	// Output: true
}

func ExampleCalls_ShardOwners() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	owners, err := c.ShardOwners(ctx, server.DemoTenant, "examples", "orders", felix.ShardKindStream)
	if errors.Is(err, felix.ErrNotAdvertised) {
		fmt.Println("standalone broker: every shard is local")
		return
	}
	for _, o := range owners {
		fmt.Println(o.Shard, o.NodeID.V, o.Addr.V)
	}
	// Output: standalone broker: every shard is local
}

func ExampleCalls_ShardInspect() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	// The demo token is not granted node.view:cluster:*.
	_, err := c.ShardInspect(ctx, server.DemoTenant, "examples", "orders", felix.ShardKindStream, 0)
	var be *felix.BrokerError
	fmt.Println(errors.As(err, &be) && be.Code == felix.CodeForbidden)
	opsc := exampleOpsClient(ctx)
	defer opsc.Close()
	ops := api.New(opsc)
	view, err := ops.ShardInspect(ctx, server.DemoTenant, "examples", "orders", felix.ShardKindStream, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(view.Shards, view.Role, view.Phase, view.Serving)
	// Output:
	// true
	// 4 leader active true
}

func ExampleCalls_Subscriptions() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	sub, err := cc.Subscribe(ctx, felix.Topic{TenantID: server.DemoTenant, Namespace: "examples", Stream: "watched"},
		conn.SubscribeOptions{Shard: felix.Some(uint32(2))})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	opsc := exampleOpsClient(ctx)
	defer opsc.Close()
	ops := api.New(opsc)
	var cursor *felix.SubscriptionsCursor
	for {
		page, err := ops.Subscriptions(ctx, felix.SubscriptionsFilter{Stream: felix.Some("watched")}, 100, cursor)
		if err != nil {
			log.Fatal(err)
		}
		for _, s := range page.Subscriptions {
			fmt.Println(s.Stream, s.Shard, s.Depth, s.Dropped)
		}
		if cursor = page.Next; cursor == nil {
			return
		}
	}
	// Output: watched 2 0 0
}

// ExampleCalls_CacheGet shows that a cache miss is not an error.
func ExampleCalls_CacheGet() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srvTLS, roots, _ := conn.SelfSigned()
	ln, err := conn.Listen("127.0.0.1:0", &conn.ServerConfig{TLS: srvTLS, Offer: felix.BrokerOffer{Flags: felix.KnownFlags}})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() { // a cache that is always empty
		sc, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		for {
			st, err := sc.AcceptStream(ctx)
			if err != nil {
				return
			}
			go func() {
				defer st.Close()
				for {
					req, err := st.ReadRequest(ctx)
					if err != nil {
						return
					}
					if g, ok := req.Message.(*felix.CacheGet); ok {
						st.WriteMessage(ctx, &felix.CacheValue{TenantID: g.TenantID, Namespace: g.Namespace, Cache: g.Cache, Key: g.Key, RequestID: g.RequestID})
					}
				}
			}()
		}
	}()
	c, err := conn.Dial(ctx, ln.Addr().String(), &conn.Config{TLS: &tls.Config{RootCAs: roots}, TenantID: "t1", Token: "x", CacheStreams: 1})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	v, found, err := api.New(c).CacheGet(ctx, felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "c"}, "k")
	fmt.Println(v, found, err)
	// Output: [] false <nil>
}

func ExampleCalls_CachePut() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	ref := felix.CacheRef{TenantID: server.DemoTenant, Namespace: "examples", Cache: "sessions"}
	if err := c.CachePut(ctx, ref, "user:1", []byte("alice"), time.Hour); err != nil {
		log.Fatal(err)
	}
	v, found, err := c.CacheGet(ctx, ref, "user:1")
	fmt.Println(string(v), found, err)
	// Output: alice true <nil>
}

func ExampleCalls_CacheDelete() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	ref := felix.CacheRef{TenantID: server.DemoTenant, Namespace: "examples", Cache: "carts"}
	_ = c.CachePut(ctx, ref, "cart:9", []byte("3 items"), 0)
	old, found, err := c.CacheDelete(ctx, ref, "cart:9")
	fmt.Println(string(old), found, err)
	_, found, err = c.CacheDelete(ctx, ref, "cart:9") // nothing left to delete
	fmt.Println(found, err)
	// Output:
	// 3 items true <nil>
	// false <nil>
}

func ExampleCalls_CounterAdd() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(cc)
	ref := felix.CacheRef{TenantID: server.DemoTenant, Namespace: "examples", Cache: "metrics"}
	_, _, _ = c.CounterAdd(ctx, ref, "visits", 2)
	n, _, err := c.CounterAdd(ctx, ref, "visits", 3)
	fmt.Println(n, err)
	n, found, err := c.CounterGet(ctx, ref, "visits")
	fmt.Println(n, found, err)
	_, found, _ = c.CounterGet(ctx, ref, "never")
	fmt.Println(found)
	// Output:
	// 5 <nil>
	// 5 true <nil>
	// false
}

// tracing is a Requestor over another that prints each request's type
// and its answer's.
type tracing struct{ r api.Requestor }

func (t tracing) Request(ctx context.Context, req felix.Message) (felix.Message, error) {
	ans, err := t.r.Request(ctx, req)
	if err != nil {
		fmt.Println(req.MessageType(), "failed:", err)
		return nil, err
	}
	fmt.Println(req.MessageType(), "->", ans.MessageType())
	return ans, nil
}

// New makes the typed calls over any Requestor: here a *conn.Client
// wrapped to trace what the calls send.
func ExampleNew() {
	ctx, cancel := exampleCtx()
	defer cancel()
	cc := exampleClient(ctx)
	defer cc.Close()
	c := api.New(tracing{cc})
	ref := felix.CacheRef{TenantID: server.DemoTenant, Namespace: "examples", Cache: "traced"}
	_ = c.CachePut(ctx, ref, "k", []byte("v"), 0)
	_, _, _ = c.CacheGet(ctx, ref, "k")
	_, _ = c.Topology(ctx) // a standalone broker: not advertised, nothing sent
	// Output:
	// cache_put -> cache_ok
	// cache_get -> cache_value
	// topology failed: felix: not advertised by the peer: topology (FEATURE_TOPOLOGY)
}
