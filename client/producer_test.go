package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
)

// loseNextAck runs publish while the relay drops broker → client traffic:
// the request reaches the broker, its answer never comes back; the link
// heals once the broker holds want records and the client noticed the
// loss. It returns what publish returned. The client must be connected
// (a dial cannot complete while answers are dropped).
func loseNextAck[T any](t *testing.T, r *relay, b *broker, n *notices, want int, publish func() (T, error)) (T, error) {
	t.Helper()
	before := n.count(client.NoticeDisconnected)
	r.dropDown.Store(true)
	type out struct {
		v   T
		err error
	}
	ch := make(chan out, 1)
	go func() { v, err := publish(); ch <- out{v, err} }()
	waitFor(t, func() bool { return len(readLog(t, b, topic)) >= want }, "the broker got the batch")
	waitFor(t, func() bool { return n.count(client.NoticeDisconnected) > before }, "the client noticed the lost link")
	r.dropDown.Store(false)
	o := <-ch
	return o.v, o.err
}

// retry.idempotent_producers_re_send_ambiguous_outcomes and
// ack.duplicate_reports_the_original_offset: the ack of a batch is lost;
// the producer re-sends it under the SAME sequence on a new connection and
// the broker answers from memory with the original offset; the batch
// lands once.
func TestProducerResendsSameSequence(t *testing.T) {
	b := startBroker(t)
	r := startRelay(t, b.addr)
	c, n := newClient(t, []string{r.addr()}, nil)
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	res, err := p.PublishBatch(ctxT(t), topic, [][]byte{[]byte("one")}, client.PublishOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(0), res.Offset)

	res, err = loseNextAck(t, r, b, n, 2, func() (client.PublishResult, error) {
		return p.PublishBatch(ctxT(t), topic, [][]byte{[]byte("two")}, client.PublishOptions{})
	})
	require.NoError(t, err)
	require.True(t, res.HasOffset)
	require.Equal(t, uint64(1), res.Offset, "the duplicate is answered with the original offset")
	require.Equal(t, []string{"one", "two"}, readLog(t, b, topic), "landed once")
	require.Positive(t, n.count(client.NoticeRetry))

	// The sequence advanced only on the ack: the next batch is sequence 2.
	res, err = p.PublishBatch(ctxT(t), topic, [][]byte{[]byte("three")}, client.PublishOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(2), res.Offset)
	require.Equal(t, []string{"one", "two", "three"}, readLog(t, b, topic))
}

// A refusal (here sequence_reused: another writer took the producer's next
// sequence with other payloads) stops the producer: no re-send mends it.
func TestProducerStopsOnRefusal(t *testing.T) {
	b := startBroker(t)
	c, _ := newClient(t, []string{b.addr}, nil)
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	_, err = p.PublishBatch(ctxT(t), topic, [][]byte{[]byte("a")}, client.PublishOptions{})
	require.NoError(t, err)
	cfg := connConfig(t)
	other, err := conn.Dial(ctxT(t), b.addr, &cfg)
	require.NoError(t, err)
	defer other.Close()
	_, err = other.PublishIdempotent(ctxT(t), topic, [][]byte{[]byte("intruder")}, nil, p.ID(), 1)
	require.NoError(t, err)

	_, err = p.PublishBatch(ctxT(t), topic, [][]byte{[]byte("b")}, client.PublishOptions{})
	var refused *felix.PublishRefusedError
	require.ErrorAs(t, err, &refused)
	require.Equal(t, "sequence_reused", refused.Reason)
	_, err = p.PublishBatch(ctxT(t), topic, [][]byte{[]byte("c")}, client.PublishOptions{})
	require.ErrorIs(t, err, client.ErrProducerStopped)
	require.Equal(t, []string{"a", "intruder"}, readLog(t, b, topic))
}

// A plain acked publish whose ack is lost is reported as ambiguous and not
// re-sent; the at-least-once variant re-sends it and so writes it twice,
// as its name says.
func TestLostAckAmbiguousAndMayDuplicate(t *testing.T) {
	b := startBroker(t)
	r := startRelay(t, b.addr)
	c, n := newClient(t, []string{r.addr()}, nil)
	publishN(t, c, topic, 0, 1)
	_, err := loseNextAck(t, r, b, n, 2, func() (client.PublishResult, error) {
		return c.Publish(ctxT(t), topic, []byte("maybe"), acked)
	})
	require.ErrorIs(t, err, client.ErrAmbiguous)
	require.Equal(t, []string{"r0", "maybe"}, readLog(t, b, topic), "applied once, not re-sent")

	publishN(t, c, topic, 1, 1) // reconnected
	_, err = loseNextAck(t, r, b, n, 4, func() (client.PublishResult, error) {
		return c.PublishBatchMayDuplicate(ctxT(t), topic, [][]byte{[]byte("dup")}, acked)
	})
	require.NoError(t, err)
	require.Equal(t, []string{"r0", "maybe", "r1", "dup", "dup"}, readLog(t, b, topic), "re-sent: a duplicate")
}

// ack.none_does_not_wait_for_the_broker: a fire-and-forget publish returns
// while the link drops everything (no round trip).
func TestAckNoneDoesNotWait(t *testing.T) {
	b := startBroker(t)
	r := startRelay(t, b.addr)
	c, _ := newClient(t, []string{r.addr()}, nil)
	require.NoError(t, c.Connect(ctxT(t)))
	r.dropAll.Store(true)
	defer r.dropAll.Store(false)
	_, err := c.Publish(context.Background(), topic, []byte("x"), client.PublishOptions{NoAck: true})
	require.NoError(t, err)
}

// A batch still in doubt when its call gives up (here: cancelled) is
// re-sent under its sequence before the route's next batch.
func TestProducerResendsInDoubtBatchFirst(t *testing.T) {
	b := startBroker(t)
	r := startRelay(t, b.addr)
	c, _ := newClient(t, []string{r.addr()}, nil)
	p, err := c.NewProducer(ctxT(t))
	require.NoError(t, err)
	_, err = p.PublishBatch(ctxT(t), topic, [][]byte{[]byte("one")}, client.PublishOptions{})
	require.NoError(t, err)

	r.dropDown.Store(true)
	ctx, cancel := context.WithCancel(ctxT(t))
	errc := make(chan error, 1)
	buf := []byte("two")
	go func() {
		_, err := p.PublishBatch(ctx, topic, [][]byte{buf}, client.PublishOptions{})
		errc <- err
	}()
	waitFor(t, func() bool { return len(readLog(t, b, topic)) == 2 }, "the broker got the batch")
	cancel()
	err = <-errc
	require.ErrorIs(t, err, context.Canceled, "the real cause")
	var amb *client.AmbiguousError
	require.ErrorAs(t, err, &amb, "in doubt: the caller must not re-send")
	require.Equal(t, p.ID(), amb.Producer)
	require.Equal(t, uint64(1), amb.Sequence)
	copy(buf, "XXX") // the caller reuses its buffer: the producer kept a copy
	r.dropDown.Store(false)

	res, err := p.PublishBatch(ctxT(t), topic, [][]byte{[]byte("three")}, client.PublishOptions{})
	require.NoError(t, err)
	require.Equal(t, uint64(2), res.Offset)
	require.Equal(t, []string{"one", "two", "three"}, readLog(t, b, topic))
}
