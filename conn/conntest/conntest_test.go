package conntest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/conn/conntest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, cl *conntest.Cluster, i int) *conn.Client {
	t.Helper()
	cfg := cl.ClientConfig()
	c, err := conn.Dial(ctxT(t), cl.Nodes[i].Addr, &cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// Scripted answers are used once each, in order, before the standing
// answer and the defaults; every request is recorded.
func TestScriptOrderAndRecord(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{Nodes: 2})
	tp := conntest.Topic("s")
	n0 := cl.Nodes[0]
	n0.On("publish",
		func(x *conntest.Exchange) error {
			return x.AnswerPublish(felix.PublishResult{}, &felix.BrokerError{Message: "busy", Code: felix.CodeOverloaded, Retry: felix.RetryAfter, RetryAfter: time.Second})
		},
		func(x *conntest.Exchange) error {
			return x.AnswerPublish(felix.PublishResult{Offset: 41, HasOffset: true}, nil)
		})
	c := dial(t, cl, 0)
	ack := conn.PublishOptions{Ack: felix.AckPerBatch}
	_, err := c.Publish(ctxT(t), tp, []byte("a"), ack)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, time.Second, be.RetryAfter)
	res, err := c.Publish(ctxT(t), tp, []byte("b"), ack)
	require.NoError(t, err)
	require.Equal(t, uint64(41), res.Offset)
	res, err = c.Publish(ctxT(t), tp, []byte("c"), ack) // default: appended
	require.NoError(t, err)
	require.Equal(t, uint64(0), res.Offset)
	require.Equal(t, [][]byte{[]byte("c")}, cl.Log("s", 0))

	got := cl.Await(ctxT(t), 3, func(r conntest.Received) bool { return r.Publish != nil })
	for i, want := range []string{"a", "b", "c"} {
		require.Equal(t, 0, got[i].Node)
		require.Equal(t, 1, got[i].Conn)
		require.True(t, got[i].Publish.Binary)
		require.Equal(t, want, string(got[i].Publish.Payloads[0]))
	}

	// A node that does not own the shard redirects to its owner.
	cl.SetOwner("s", 0, 1)
	_, err = c.Publish(ctxT(t), tp, []byte("d"), ack)
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotLeader, be.Code)
	require.Equal(t, cl.Nodes[1].Addr, be.Owner.Addr)
}

// The default publish handler writes an idempotent batch once per
// sequence and answers a re-send with the original offset.
func TestIdempotentDefault(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	c := dial(t, cl, 0)
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	tp := conntest.Topic("s")
	r0, err := c.PublishIdempotent(ctxT(t), tp, [][]byte{[]byte("a")}, nil, p.ID(), 0)
	require.NoError(t, err)
	r1, err := c.PublishIdempotent(ctxT(t), tp, [][]byte{[]byte("b")}, nil, p.ID(), 1)
	require.NoError(t, err)
	again, err := c.PublishIdempotent(ctxT(t), tp, [][]byte{[]byte("b")}, nil, p.ID(), 1)
	require.NoError(t, err)
	require.Equal(t, r1.Offset, again.Offset)
	require.Equal(t, uint64(0), r0.Offset)
	_, err = c.PublishIdempotent(ctxT(t), tp, [][]byte{[]byte("z")}, nil, p.ID(), 5)
	var pr *felix.PublishRefusedError
	require.ErrorAs(t, err, &pr)
	require.Equal(t, "sequence_gap", pr.Reason)
	require.Len(t, cl.Log("s", 0), 2)
}

// A scripted subscription delivers what the test writes and ends with the
// terminal frame it names.
func TestSubscriptionScript(t *testing.T) {
	cl := conntest.Start(t, conntest.Options{})
	cl.Nodes[0].On("subscribe", func(x *conntest.Exchange) error {
		es, err := x.Subscribe(&felix.Subscribed{SubscriptionID: 9})
		if err != nil {
			return err
		}
		if err := es.Batch(7, 2, []byte("x"), []byte("y")); err != nil {
			return err
		}
		return es.End(&felix.ShardMovedError{HasResumeFrom: true, ResumeFrom: 12, NodeID: "n1", Addr: "127.0.0.1:1", Generation: 3})
	})
	c := dial(t, cl, 0)
	sub, err := c.Subscribe(ctxT(t), conntest.Topic("s"), conn.SubscribeOptions{Start: felix.StartAt(7)})
	require.NoError(t, err)
	defer sub.Close()
	ev, err := sub.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(7), ev.Offset)
	require.Equal(t, uint64(2), ev.SkippedBefore)
	ev, err = sub.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(8), ev.Offset)
	_, err = sub.Next(ctxT(t))
	var moved *felix.ShardMovedError
	require.ErrorAs(t, err, &moved)
	require.Equal(t, uint64(12), moved.ResumeFrom)
	require.Equal(t, "n1", moved.NodeID)
}

// A scripted node answers a publish with retry_after, then the default
// acknowledgement; the test reads what the client sent.
// exampleTB stands for the *testing.T of a test.
type exampleTB struct{ cleanups []func() }

func (*exampleTB) Helper()                      {}
func (*exampleTB) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (e *exampleTB) Cleanup(f func())           { e.cleanups = append(e.cleanups, f) }

func Example() {
	t := &exampleTB{}
	cl := conntest.Start(t, conntest.Options{})
	defer cl.Close()
	cl.Nodes[0].On("publish", func(x *conntest.Exchange) error {
		return x.AnswerPublish(felix.PublishResult{}, &felix.BrokerError{Message: "busy", Code: felix.CodeOverloaded,
			Retry: felix.RetryAfter, RetryAfter: 50 * time.Millisecond})
	})
	cfg := cl.ClientConfig()
	ctx := context.Background()
	c, err := conn.Dial(ctx, cl.Nodes[0].Addr, &cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ack := conn.PublishOptions{Ack: felix.AckPerBatch}
	_, err = c.Publish(ctx, conntest.Topic("s"), []byte("hello"), ack)
	fmt.Println(err)
	res, _ := c.Publish(ctx, conntest.Topic("s"), []byte("hello"), ack)
	fmt.Println("offset", res.Offset, "publishes seen", len(cl.ReceivedOf("publish_binary")))
	// Output:
	// felix: broker publish_ack (request 1): busy [overloaded, retry_after]
	// offset 0 publishes seen 2
}
