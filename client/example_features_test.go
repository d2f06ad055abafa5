package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
)

// The examples below run against a three-node reference cluster started
// in-process (internal/broker/cluster); the client is seeded with one node
// and finds each shard's leader itself.

// exampleCluster starts a cluster and returns a client on it (token
// picks the credentials) and a function that stops both.
func exampleCluster(token string) (*client.Client, *cluster.Cluster, func()) {
	cfg := cluster.Config{Nodes: 3}
	// Strict (-strict): unknown names stay unknown, as the tests ask.
	cfg.Engine.NoAutoCreateStreams, cfg.Engine.NoAutoCreateCaches = true, true
	cfg.Engine.Groups.MaxAttempts = 3
	cl, err := cluster.Start(context.Background(), cfg)
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(context.Background(), client.Config{
		Seeds: []string{cl.Addr(0)},
		Conn:  conn.Config{TLS: cl.TLS(), TenantID: cluster.DefaultTenant, Token: token},
	})
	if err != nil {
		log.Fatal(err)
	}
	return c, cl, func() { c.Close(); cl.Close() }
}

// exampleStream is the fixture's durable 4-shard stream.
var exampleStream = client.Topic{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Stream: cluster.DurableStream}

func ExampleClient_Group() {
	c, _, stop := exampleCluster(cluster.DefaultToken)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A group on shard 2, started at the tail; unkeyed records land on
	// shard 0, so publish with a key that routes to shard 2.
	g := c.Group(api.GroupRef{Topic: exampleStream, Shard: 2, Group: "billing"})
	if _, err := g.Seek(ctx, felix.StartPosition{Kind: felix.StartLatest}, false); err != nil {
		log.Fatal(err)
	}
	v, err := c.StreamShards(ctx, exampleStream)
	if err != nil {
		log.Fatal(err)
	}
	n, routing := v.Shards, v.Routing.V
	var key []byte
	for i := 0; key == nil; i++ {
		if k := []byte(fmt.Sprint("customer-", i)); routing.ShardOf(k, true, n) == 2 {
			key = k
		}
	}
	if _, err := c.Publish(ctx, exampleStream, []byte("invoice #1"), client.PublishOptions{Ack: felix.AckPerBatch, Key: key}); err != nil {
		log.Fatal(err)
	}
	recs, err := g.Poll(ctx, api.PollOptions{Max: 10, Wait: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Printf("%s (attempt %d)\n", r.Payload, r.Attempts)
		if err := g.Ack(ctx, r.Offset); err != nil {
			log.Fatal(err)
		}
	}
	recs, _ = g.Poll(ctx, api.PollOptions{Max: 10})
	fmt.Println("after the ack:", len(recs), "records")
	// Output:
	// invoice #1 (attempt 1)
	// after the ack: 0 records
}

func ExampleGroup_Records() {
	c, _, stop := exampleCluster(cluster.DefaultToken)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := client.Topic{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Stream: cluster.MovableStream}
	g := c.Group(api.GroupRef{Topic: stream, Group: "mailer"})
	for _, p := range []string{"welcome", "reminder", "bye"} {
		if _, err := c.Publish(ctx, stream, []byte(p), client.PublishOptions{Ack: felix.AckPerBatch}); err != nil {
			log.Fatal(err)
		}
	}
	handled := 0
	for d, err := range g.Records(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		if string(d.Payload) == "reminder" && d.Attempts == 1 {
			_ = d.Nack(ctx, 0) // failed: redelivered at once
			continue
		}
		fmt.Printf("%s (attempt %d)\n", d.Payload, d.Attempts) // acked when the loop continues
		if handled++; handled == 3 {
			break
		}
	}
	// Output:
	// welcome (attempt 1)
	// bye (attempt 1)
	// reminder (attempt 2)
}

func ExampleClient_Commit() {
	c, _, stop := exampleCluster(cluster.DefaultToken)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	account := []byte("account-42")
	// One event and the state it implies, atomically, on the leader of
	// the shard the entity routes to.
	off, err := c.Commit(ctx, api.CommitRequest{Topic: exampleStream, EntityKey: account, Ops: []api.CommitOp{
		api.PublishEvent("", []byte(`{"deposit":10}`)),
		api.PutState("", "balance", []byte("10")),
	}})
	if err != nil {
		log.Fatal(err)
	}
	v, err := c.StateGet(ctx, exampleStream, account, "balance")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(v.Value), v.Version == off)

	// Validated before sending: two events are refused, naming the op.
	_, err = c.Commit(ctx, api.CommitRequest{Topic: exampleStream, EntityKey: account, Ops: []api.CommitOp{
		api.PublishEvent("", nil), api.EnqueueEvent("", nil)}})
	var ce *api.CommitError
	fmt.Println(errors.Is(err, api.ErrCommitEventCount), errors.As(err, &ce) && ce.Index == 1)

	// A commit expecting a stale offset writes nothing.
	_, err = c.Commit(ctx, api.CommitRequest{Topic: exampleStream, EntityKey: account, ExpectedOffset: felix.Some(off),
		Ops: []api.CommitOp{api.PublishEvent("", nil), api.PutState("", "balance", []byte("0"))}})
	var rf *felix.PublishRefusedError
	if errors.As(err, &rf) {
		tail, _ := rf.Tail()
		fmt.Println(rf.Reason, tail == off+1)
	}
	// Output:
	// 10 true
	// true true
	// offset_mismatch true
}

func ExampleClient_StateGet() {
	c, _, stop := exampleCluster(cluster.DefaultToken)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := c.StateGet(ctx, exampleStream, []byte("nobody"), "balance")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.Found, v.Value == nil)
	// Output: false true
}

func ExampleClient_PublishIf() {
	c, _, stop := exampleCluster(cluster.DefaultToken)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := client.Topic{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Stream: cluster.MovableStream}
	res, err := c.PublishIf(ctx, stream, [][]byte{[]byte("first")}, nil, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("landed at", res.Offset)
	_, err = c.PublishIf(ctx, stream, [][]byte{[]byte("again")}, nil, 0)
	var rf *felix.PublishRefusedError
	if errors.As(err, &rf) {
		tail, _ := rf.Tail()
		fmt.Println(rf.Reason, "tail", tail)
	}
	// Output:
	// landed at 0
	// offset_mismatch tail 1
}

func ExampleClient_CachePutIf() {
	c, _, stop := exampleCluster(cluster.DefaultToken)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cache := client.CacheRef{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Cache: cluster.Cache}
	r, err := c.CachePutIf(ctx, cache, "leader", []byte("worker-1"), felix.CacheCondition{Kind: felix.CondAbsent}, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker-1 applied:", r.Applied)
	r2, err := c.CachePutIf(ctx, cache, "leader", []byte("worker-2"), felix.CacheCondition{Kind: felix.CondAbsent}, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("worker-2 applied:", r2.Applied)
	d, err := c.CacheDeleteIf(ctx, cache, "leader", r.Version)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", d.Applied)
	// Output:
	// worker-1 applied: true
	// worker-2 applied: false
	// released: true
}

func ExampleClient_ShardOwners() {
	c, cl, stop := exampleCluster(cluster.DefaultToken)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owners, err := c.ShardOwners(ctx, cluster.DefaultTenant, cluster.DefaultNamespace, cluster.DurableStream, felix.ShardKindStream)
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range owners {
		node, _ := cl.Owner(cluster.DurableStream, o.Shard)
		fmt.Println(o.Shard, o.NodeID.V == cl.NodeID(node))
	}
	brokers, err := c.Topology(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(brokers), "brokers")
	cs, err := c.CacheShards(ctx, client.CacheRef{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Cache: "nope"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("unknown cache:", cs, "shards")
	// Output:
	// 0 true
	// 1 true
	// 2 true
	// 3 true
	// 3 brokers
	// unknown cache: 0 shards
}

func ExampleClient_StreamRead() {
	c, _, stop := exampleCluster(cluster.DefaultToken)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream := client.Topic{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace, Stream: cluster.MovableStream}
	start := time.Now().Add(-time.Second)
	for _, p := range []string{"a", "b", "c"} {
		if _, err := c.Publish(ctx, stream, []byte(p), client.PublishOptions{Ack: felix.AckPerBatch}); err != nil {
			log.Fatal(err)
		}
	}
	off, found, err := c.OffsetForTime(ctx, stream, 0, start)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first record since start:", off, found)
	page, err := c.StreamRead(ctx, stream, 0, api.ReadOptions{From: 1})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range page.Records {
		fmt.Println(r.Offset, string(r.Payload))
	}
	fmt.Println("next page from", page.Next)
	// Output:
	// first record since start: 0 true
	// 1 b
	// 2 c
	// next page from 3
}

func ExampleClient_ShardInspect() {
	// The operator token holds node.view:cluster:* and no data permission.
	ops, cl, stop := exampleCluster(cluster.InspectToken)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	view, err := ops.ShardInspect(ctx, cluster.DefaultTenant, cluster.DefaultNamespace, cluster.DurableStream, felix.ShardKindStream, 1)
	if err != nil {
		log.Fatal(err)
	}
	leader, _ := cl.Owner(cluster.DurableStream, 1)
	fmt.Println(view.Role, view.Phase, view.Serving, view.NodeID == cl.NodeID(leader))
	// Output: leader active true true
}

func ExampleClient_Subscriptions() {
	c, cl, stop := exampleCluster(cluster.DefaultToken)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := c.Subscribe(ctx, exampleStream, client.SubscribeOptions{Shard: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	ops, err := client.Dial(ctx, client.Config{Seeds: cl.Addrs(),
		Conn: conn.Config{TLS: cl.TLS(), TenantID: cluster.DefaultTenant, Token: cluster.InspectToken}})
	if err != nil {
		log.Fatal(err)
	}
	defer ops.Close()
	// Each broker lists its own subscriptions: ask every one (At pins a
	// broker: never redirected, never moved to another).
	for _, addr := range cl.Addrs() {
		var cursor *felix.SubscriptionsCursor
		for {
			page, err := api.New(ops.At(addr)).Subscriptions(ctx, felix.SubscriptionsFilter{Stream: felix.Some(cluster.DurableStream)}, 100, cursor)
			if err != nil {
				log.Fatal(err)
			}
			for _, s := range page.Subscriptions {
				fmt.Println(s.Stream, "shard", s.Shard, "dropped", s.Dropped)
			}
			if cursor = page.Next; cursor == nil {
				break
			}
		}
	}
	// Output: durable shard 3 dropped 0
}

func ExampleClient_Request() {
	c, _, stop := exampleCluster(cluster.DefaultToken)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A request of felix.Requests() without a typed call; the client sets
	// its request id, routes and retries it.
	ans, err := c.Request(ctx, &felix.StreamShards{TenantID: cluster.DefaultTenant, Namespace: cluster.DefaultNamespace,
		Stream: cluster.DurableStream})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ans.MessageType(), ans.(*felix.StreamShardsView).Shards)
	// Output: stream_shards_view 4
}
