package cluster_test

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
)

// ackedFrame encodes an acked binary publish of one record.
func ackedFrame(t testing.TB, f conformance.Fixture, stream string, rid uint64, key []byte) []byte {
	b, err := felix.AppendPublishBatch(nil, &felix.PublishBatch{AckMode: felix.AckPerMessage, RequestID: rid,
		HasKey: key != nil, Key: key, TenantID: f.TenantID, Namespace: f.Namespace, Stream: stream,
		Payloads: [][]byte{[]byte("p")}})
	require.NoError(t, err)
	return b
}

func (s *rawStream) ack() felix.PublishAck {
	s.t.Helper()
	fr := s.frame()
	require.Equal(s.t, felix.LayoutPublishAck, fr.Flags.Layout())
	a, err := felix.DecodePublishAck(fr.Flags, fr.Payload)
	require.NoError(s.t, err)
	return a
}

// A publish to a non-owner is forwarded and acked with the owner section
// to a client that offered 0x0080, and without it to one that did not.
func TestForwardedAckOwnerSection(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3})
	f := c.Fixture()
	owner, gen := c.Owner(f.MovableStream, 0)
	other := nonOwner(c, f.MovableStream, 0)
	r := dialRaw(t, c, c.Addr(other))

	s := r.stream(felix.DefaultClientFlags(), allFeatures)
	_, err := s.s.Write(ackedFrame(t, f, f.MovableStream, 7, nil))
	require.NoError(t, err)
	a := s.ack()
	require.Equal(t, felix.AckOK, a.Status)
	require.True(t, a.HasOwner)
	require.Equal(t, felix.AckOwner{NodeID: c.NodeID(owner), Addr: c.Addr(owner), Generation: gen}, a.Owner)
	require.True(t, a.HasOffset)

	plain := r.stream(felix.DefaultClientFlags()&^felix.FlagBinaryPublishAckOwner, allFeatures)
	_, err = plain.s.Write(ackedFrame(t, f, f.MovableStream, 8, nil))
	require.NoError(t, err)
	a = plain.ack()
	require.Equal(t, felix.AckOK, a.Status)
	require.False(t, a.HasOwner)

	// The owner itself serves without the section.
	own := dialRaw(t, c, c.Addr(owner)).stream(felix.DefaultClientFlags(), allFeatures)
	_, err = own.s.Write(ackedFrame(t, f, f.MovableStream, 9, nil))
	require.NoError(t, err)
	a = own.ack()
	require.False(t, a.HasOwner)
	require.Equal(t, uint64(2), a.Offset, "one shared log")

	// An idempotent publish is only taken by the leader.
	idem := r.stream(felix.DefaultClientFlags(), allFeatures)
	idem.send(&felix.PublishIdempotent{TenantID: f.TenantID, Namespace: f.Namespace, Stream: f.MovableStream,
		Payloads: [][]byte{[]byte("x")}, RequestID: 1, ProducerID: 1, Sequence: 0})
	pr := idem.recv().(*felix.PublishRefused)
	require.Equal(t, felix.RefusalNotLeader, pr.Reason.Kind)
	require.Equal(t, c.NodeID(owner), pr.Reason.NodeID)
	require.Equal(t, felix.Some(c.Addr(owner)), pr.Reason.Addr)
}

// A fenced shard refuses publishes and subscribes with shard_unavailable
// (moving, retryable); at cutover the subscription on the old owner ends
// with shard_moved, the log is intact at the new owner.
func TestFenceMoveShardMoved(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3})
	f := c.Fixture()
	tp := topic(c, f.MovableStream)
	old, gen := c.Owner(f.MovableStream, 0)
	oldCl := dial(t, c, c.Addr(old), nil)
	for i := range 3 {
		_, err := oldCl.Publish(ctxT(t), tp, []byte{byte('0' + i)}, conn.PublishOptions{Ack: felix.AckPerMessage})
		require.NoError(t, err)
	}
	sub, err := oldCl.Subscribe(ctxT(t), tp, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer sub.Close()
	for i := range 3 {
		ev, err := sub.Next(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, uint64(i), ev.Offset)
	}

	to, err := c.Fence(f.MovableStream, 0, time.Hour)
	require.NoError(t, err)
	require.NotEqual(t, old, to)
	for _, i := range []int{old, to} {
		_, err = dial(t, c, c.Addr(i), nil).Publish(ctxT(t), tp, []byte("x"), conn.PublishOptions{Ack: felix.AckPerMessage})
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be, "node %d", i)
		require.Equal(t, felix.CodeShardUnavailable, be.Code)
		require.Equal(t, felix.RetryRetry, be.RetryClass())
		require.Equal(t, "moving", be.Reason)
	}
	_, err = dial(t, c, c.Addr(to), nil).Subscribe(ctxT(t), tp, conn.SubscribeOptions{})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeShardUnavailable, be.Code)
	_, err = c.Fence(f.MovableStream, 0, 0)
	require.ErrorIs(t, err, cluster.ErrPlacement, "one move at a time")

	require.NoError(t, c.Move(f.MovableStream, 0, to)) // cut over now
	_, err = sub.Next(ctxT(t))
	var moved *felix.ShardMovedError
	require.ErrorAs(t, err, &moved)
	require.Equal(t, felix.ShardMovedError{SubscriptionID: sub.ID(), ResumeFrom: 3, HasResumeFrom: true,
		NodeID: c.NodeID(to), Addr: c.Addr(to), Generation: gen + 1}, *moved)

	// The old owner now redirects; the new one serves the whole log.
	_, err = oldCl.Subscribe(ctxT(t), tp, conn.SubscribeOptions{})
	var nl *felix.NotLeaderError
	require.ErrorAs(t, err, &nl)
	require.Equal(t, c.Addr(to), nl.Addr)
	newCl := dial(t, c, c.Addr(to), nil)
	_, err = newCl.Publish(ctxT(t), tp, []byte("3"), conn.PublishOptions{Ack: felix.AckPerMessage})
	require.NoError(t, err)
	sub2, err := newCl.Subscribe(ctxT(t), tp, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartOffset, Offset: moved.ResumeFrom}})
	require.NoError(t, err)
	defer sub2.Close()
	ev, err := sub2.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(3), ev.Offset)
	require.Equal(t, "3", string(ev.Payload))
}

// A fence cuts over by itself when its hold ends.
func TestFenceHoldEnds(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 2})
	f := c.Fixture()
	old, _ := c.Owner(f.MovableStream, 0)
	to, err := c.Fence(f.MovableStream, 0, time.Millisecond)
	require.NoError(t, err)
	waitFor(t, func() bool { o, _ := c.Owner(f.MovableStream, 0); return o == to }, "cutover")
	require.NotEqual(t, old, to)
	_, err = dial(t, c, c.Addr(old), nil).Publish(ctxT(t), topic(c, f.MovableStream), []byte("x"),
		conn.PublishOptions{Ack: felix.AckPerMessage})
	require.NoError(t, err, "forwarded to the new owner")
}

// A subscriber without FEATURE_SHARD_MOVED never sees a move as a clean end.
func TestMoveWithoutShardMovedIsNotAnEnd(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 2})
	f := c.Fixture()
	old, _ := c.Owner(f.MovableStream, 0)
	cl := dial(t, c, c.Addr(old), func(cfg *conn.Config) {
		cfg.Features = felix.DefaultClientFeatures() &^ felix.FeatureShardMoved
	})
	sub, err := cl.Subscribe(ctxT(t), topic(c, f.MovableStream), conn.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	require.NoError(t, c.Move(f.MovableStream, 0, (old+1)%2))
	_, err = sub.Next(ctxT(t))
	require.Error(t, err)
	require.False(t, errors.Is(err, io.EOF), "a move must not look like a clean end: %v", err)
}

// While the quorum stream's leader is partitioned its writes fail with
// quorum_timeout, retry class outcome_unknown; after heal they succeed.
func TestQuorumTimeout(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3, QuorumTimeout: 10 * time.Millisecond})
	f := c.Fixture()
	tp := topic(c, f.QuorumStream)
	leader, err := c.Partition(f.QuorumStream)
	require.NoError(t, err)
	for _, i := range []int{leader, (leader + 1) % 3} {
		cl := dial(t, c, c.Addr(i), nil)
		_, err = cl.Publish(ctxT(t), tp, []byte("q"), conn.PublishOptions{Ack: felix.AckPerMessage})
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be, "node %d", i)
		require.Equal(t, felix.CodeQuorumTimeout, be.Code)
		require.Equal(t, felix.RetryOutcomeUnknown, be.RetryClass())
		// JSON publishes get the same answer.
		_, err = dial(t, c, c.Addr(i), func(cfg *conn.Config) { cfg.ForceJSON = true }).
			Publish(ctxT(t), tp, []byte("q"), conn.PublishOptions{Ack: felix.AckPerMessage})
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.CodeQuorumTimeout, be.Code)
		require.Equal(t, "publish_error", be.Type)
	}
	_, err = c.Partition(f.DurableStream)
	require.ErrorIs(t, err, cluster.ErrPlacement)
	c.Heal()
	_, err = dial(t, c, c.Addr(leader), nil).Publish(ctxT(t), tp, []byte("q"), conn.PublishOptions{Ack: felix.AckPerMessage})
	require.NoError(t, err)

	// A majority of replicas lost (2 of 3 nodes down) also times out.
	require.NoError(t, c.Kill((leader+1)%3))
	require.NoError(t, c.Kill((leader+2)%3))
	_, err = dial(t, c, c.Addr(leader), nil).Publish(ctxT(t), tp, []byte("q"), conn.PublishOptions{Ack: felix.AckPerMessage})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeQuorumTimeout, be.Code)
}

// The durable stream's head was trimmed at start: earliest is not 0 and
// a trimmed offset is a too_old cursor error, over QUIC.
func TestTrimmedHead(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3})
	f := c.Fixture()
	owner, _ := c.Owner(f.DurableStream, 0)
	cl := dial(t, c, c.Addr(owner), nil)
	tp := topic(c, f.DurableStream)
	_, err := cl.Subscribe(ctxT(t), tp, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartOffset, Offset: 0}})
	var ce *felix.CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, felix.CursorError{Reason: "too_old", Requested: 0, Available: cluster.TrimmedHead}, *ce)
	sub, err := cl.Subscribe(ctxT(t), tp, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer sub.Close()
	require.Equal(t, felix.Some(uint64(cluster.TrimmedHead)), sub.Info().StartOffset)
	ev, err := sub.Next(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, uint64(cluster.TrimmedHead), ev.Offset)
	require.Equal(t, "seed-2", string(ev.Payload))
}

// Killing a node moves its shards to survivors; restarting it brings its
// pinned shards home. Durable logs survive both moves.
func TestKillRestartMovesShards(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3})
	f := c.Fixture()
	ln := c.LinkNode()
	tp := topic(c, f.LinkStream)
	home, gen := c.Owner(f.LinkStream, 0)
	require.Equal(t, ln, home)
	survivor := dial(t, c, c.Addr((ln+1)%3), nil)
	_, err := survivor.Publish(ctxT(t), tp, []byte("before"), conn.PublishOptions{Ack: felix.AckPerMessage})
	require.NoError(t, err)
	victim := dial(t, c, c.Addr(ln), nil)
	sub, err := victim.Subscribe(ctxT(t), tp, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()

	require.NoError(t, c.Kill(ln))
	require.ErrorIs(t, c.Kill(ln), cluster.ErrNodeState)
	_, err = sub.Next(ctxT(t))
	require.Error(t, err)
	require.NotErrorIs(t, err, io.EOF)
	owner, gen2 := c.Owner(f.LinkStream, 0)
	require.NotEqual(t, ln, owner)
	require.Greater(t, gen2, gen)
	s := dialRaw(t, c, c.Addr((ln+1)%3)).stream(felix.DefaultClientFlags(), allFeatures)
	s.send(&felix.Topology{})
	require.Len(t, s.recv().(*felix.TopologyView).Brokers, 2)
	_, err = survivor.Publish(ctxT(t), tp, []byte("during"), conn.PublishOptions{Ack: felix.AckPerMessage})
	require.NoError(t, err)

	require.NoError(t, c.Restart(ln))
	require.ErrorIs(t, c.Restart(ln), cluster.ErrNodeState)
	o, _ := c.Owner(f.LinkStream, 0)
	require.Equal(t, ln, o, "pinned shard back home")
	back := dial(t, c, c.Addr(ln), nil)
	sub2, err := back.Subscribe(ctxT(t), tp, conn.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer sub2.Close()
	for _, want := range []string{"before", "during"} {
		ev, err := sub2.Next(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, want, string(ev.Payload))
	}
}
