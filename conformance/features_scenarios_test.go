package conformance_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/conn"
)

// The queue.*, commit.*, publish_if.* and sharded.reports_the_shard_count
// scenarios, written against the public conn API and a fixture
// description. Each scenario body returns nil when the behaviour holds and
// an error saying what did not; errSkip wraps the reason a scenario cannot
// be run against a fixture.

// scenarioEnv is what a scenario body needs: the fixture and a way to
// connect to one of its brokers.
type scenarioEnv struct {
	fx *conformance.Fixture
	// dial connects to addr with the fixture's token (adjust may change
	// the configuration); the connection is closed when the test ends.
	dial func(t testing.TB, addr string, adjust func(*conn.Config)) (*conn.Client, error)
	// refuseSharded, when set, opens a sharded subscription (every shard
	// of a stream through one iterator) to a stream with 0 shards and
	// returns nil when it was refused as an unknown stream, else an error
	// saying what happened: the last clause of
	// sharded.reports_the_shard_count. conn subscribes one shard at a
	// time, so without it that scenario is skipped.
	refuseSharded func(ctx context.Context, t conn.Topic) error
}

var errSkip = errors.New("skip")

func skipf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errSkip}, args...)...)
}

// scenario is one catalogue scenario.
type scenario struct {
	id  string
	run func(ctx context.Context, t testing.TB, e *scenarioEnv) error
}

var featureScenarios = []scenario{
	{"queue.poll_returns_claimed_records", queuePollReturnsClaimedRecords},
	{"queue.acknowledged_records_are_not_redelivered", queueAckedNotRedelivered},
	{"queue.unacknowledged_records_are_redelivered", queueNackedRedelivered},
	{"queue.dead_letters_are_listable_and_redrivable", queueDeadLetters},
	{"commit.returns_the_offset", commitReturnsTheOffset},
	{"commit.state_get_returns_the_version", commitStateGetReturnsTheVersion},
	{"commit.expected_offset_refuses_a_stale_write", commitExpectedOffsetRefuses},
	{"commit.another_stream_is_refused", commitAnotherStreamRefused},
	{"commit.exactly_one_event", commitExactlyOneEvent},
	{"commit.negotiated", commitNegotiated},
	{"publish_if.lands_at_the_expected_offset", publishIfLands},
	{"publish_if.refused_with_the_tail", publishIfRefusedWithTheTail},
	{"sharded.reports_the_shard_count", shardedReportsTheShardCount},
}

// uniqueName returns a fresh name for a group or entity of one run.
func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func (e *scenarioEnv) topic() conn.Topic {
	return conn.Topic{TenantID: e.fx.TenantID, Namespace: e.fx.Namespace, Stream: e.fx.DurableStream}
}

// leader runs call on a client connected to the broker that serves the
// shard: it starts at the fixture's first broker and follows not_leader
// answers (at most a few hops), so settling goes to the shard leader.
func (e *scenarioEnv) leader(ctx context.Context, t testing.TB, call func(c *conn.Client) error) error {
	addr := e.fx.Addrs[0]
	for hop := 0; ; hop++ {
		c, err := e.dial(t, addr, nil)
		if err != nil {
			return err
		}
		err = call(c)
		var nl *conn.NotLeaderError
		if !errors.As(err, &nl) || nl.Addr == "" || hop == 4 {
			return err
		}
		addr = nl.Addr
	}
}

// freshGroup returns a group positioned at the durable stream's tail, so
// that records published by other scenarios are not in its way.
func (e *scenarioEnv) freshGroup(ctx context.Context, c *conn.Client) (*conn.Group, error) {
	if !c.Capabilities().Features.Has(felix.FeatureConsumerGroup) {
		return nil, skipf("the broker does not advertise consumer groups")
	}
	g := c.Group(conn.GroupRef{Topic: e.topic(), Group: uniqueName("conformance")})
	if !c.Capabilities().Features.Has(felix.FeatureGroupAdmin) {
		return nil, skipf("the broker does not advertise group_seek, needed to start a group at the tail")
	}
	if _, err := g.Seek(ctx, felix.StartPosition{Kind: felix.StartLatest}, false); err != nil {
		return nil, fmt.Errorf("seek to latest: %w", err)
	}
	return g, nil
}

func publishN(ctx context.Context, c *conn.Client, t conn.Topic, n int, tag string) ([]string, error) {
	var out []string
	for i := range n {
		p := fmt.Sprintf("%s-%d", tag, i)
		if _, err := c.Publish(ctx, t, []byte(p), conn.PublishOptions{Ack: felix.AckPerMessage}); err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// pollAll polls until n records arrived (or a poll comes back empty).
func pollAll(ctx context.Context, g *conn.Group, n int) ([]conn.GroupRecord, error) {
	var out []conn.GroupRecord
	for len(out) < n {
		recs, err := g.Poll(ctx, conn.PollOptions{Max: uint32(n - len(out)), Wait: time.Second})
		if err != nil {
			return nil, fmt.Errorf("poll: %w", err)
		}
		if len(recs) == 0 {
			break
		}
		out = append(out, recs...)
	}
	return out, nil
}

func queuePollReturnsClaimedRecords(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	return e.leader(ctx, t, func(c *conn.Client) error {
		g, err := e.freshGroup(ctx, c)
		if err != nil {
			return err
		}
		recs, err := g.Poll(ctx, conn.PollOptions{Max: 5})
		if err != nil {
			return fmt.Errorf("an empty poll must be an answer, got %w", err)
		}
		if len(recs) != 0 {
			return fmt.Errorf("poll of a group at the tail returned %d records", len(recs))
		}
		sent, err := publishN(ctx, c, e.topic(), 3, uniqueName("poll"))
		if err != nil {
			return err
		}
		recs, err = g.Poll(ctx, conn.PollOptions{Max: 2, Wait: time.Second})
		if err != nil {
			return err
		}
		if len(recs) == 0 || len(recs) > 2 {
			return fmt.Errorf("poll for up to 2 returned %d records", len(recs))
		}
		more, err := pollAll(ctx, g, 3-len(recs))
		if err != nil {
			return err
		}
		recs = append(recs, more...)
		for i, r := range recs {
			if i >= len(sent) || string(r.Payload) != sent[i] {
				return fmt.Errorf("record %d: payload %q, want %q", i, r.Payload, sent[min(i, len(sent)-1)])
			}
			if r.Attempts != 1 {
				return fmt.Errorf("record at %d: delivery count %d, want 1", r.Offset, r.Attempts)
			}
			if i > 0 && r.Offset != recs[i-1].Offset+1 {
				return fmt.Errorf("offsets %d then %d", recs[i-1].Offset, r.Offset)
			}
		}
		if len(recs) != 3 {
			return fmt.Errorf("got %d of 3 records", len(recs))
		}
		again, err := g.Poll(ctx, conn.PollOptions{Max: 5})
		if err != nil || len(again) != 0 {
			return fmt.Errorf("poll with every record claimed: %d records, %v (want an empty answer)", len(again), err)
		}
		return nil
	})
}

func queueAckedNotRedelivered(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	return e.leader(ctx, t, func(c *conn.Client) error {
		g, err := e.freshGroup(ctx, c)
		if err != nil {
			return err
		}
		if _, err := publishN(ctx, c, e.topic(), 3, uniqueName("ack")); err != nil {
			return err
		}
		recs, err := pollAll(ctx, g, 3)
		if err != nil {
			return err
		}
		if len(recs) != 3 {
			return fmt.Errorf("got %d of 3 records", len(recs))
		}
		acked := map[uint64]bool{}
		for _, r := range recs[:2] {
			if err := g.Ack(ctx, r.Offset); err != nil {
				return fmt.Errorf("ack %d: %w", r.Offset, err)
			}
			acked[r.Offset] = true
		}
		// Hand the third back: the next poll redelivers it, and only it.
		if err := g.Nack(ctx, recs[2].Offset, conn.NackOptions{}); err != nil {
			return fmt.Errorf("nack: %w", err)
		}
		again, err := g.Poll(ctx, conn.PollOptions{Max: 10, Wait: time.Second})
		if err != nil {
			return err
		}
		for _, r := range again {
			if acked[r.Offset] {
				return fmt.Errorf("acked record %d delivered again", r.Offset)
			}
		}
		if len(again) != 1 || again[0].Offset != recs[2].Offset {
			return fmt.Errorf("after acking 2 of 3 and nacking 1, a poll returned %d records", len(again))
		}
		return g.Ack(ctx, again[0].Offset)
	})
}

func queueNackedRedelivered(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	return e.leader(ctx, t, func(c *conn.Client) error {
		g, err := e.freshGroup(ctx, c)
		if err != nil {
			return err
		}
		sent, err := publishN(ctx, c, e.topic(), 1, uniqueName("nack"))
		if err != nil {
			return err
		}
		recs, err := pollAll(ctx, g, 1)
		if err != nil || len(recs) != 1 {
			return fmt.Errorf("first poll: %d records, %v", len(recs), err)
		}
		first := recs[0]
		if err := g.Nack(ctx, first.Offset, conn.NackOptions{}); err != nil {
			return fmt.Errorf("nack: %w", err)
		}
		// At once, not after the visibility timeout: a poll that does not
		// wait must return it.
		again, err := g.Poll(ctx, conn.PollOptions{Max: 1})
		if err != nil {
			return err
		}
		if len(again) != 1 || again[0].Offset != first.Offset || string(again[0].Payload) != sent[0] {
			return fmt.Errorf("nacked record not redelivered at once (got %d records)", len(again))
		}
		if again[0].Attempts <= first.Attempts {
			return fmt.Errorf("redelivery count %d, not above the first delivery's %d", again[0].Attempts, first.Attempts)
		}
		return g.Ack(ctx, first.Offset)
	})
}

func queueDeadLetters(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	return e.leader(ctx, t, func(c *conn.Client) error {
		if !c.Capabilities().Features.Has(felix.FeatureGroupDeadLetters) {
			return skipf("the broker does not advertise dead letters")
		}
		g, err := e.freshGroup(ctx, c)
		if err != nil {
			return err
		}
		if _, err := publishN(ctx, c, e.topic(), 2, uniqueName("dead")); err != nil {
			return err
		}
		// Nack both records until the attempt bound sets them aside.
		var offsets []uint64
		const maxRounds = 50
		for round := 0; ; round++ {
			recs, err := g.Poll(ctx, conn.PollOptions{Max: 2})
			if err != nil {
				return err
			}
			if len(recs) == 0 {
				break
			}
			if round == maxRounds {
				return fmt.Errorf("records still delivered after %d nacks: no attempt bound", maxRounds)
			}
			for _, r := range recs {
				if !slices.Contains(offsets, r.Offset) {
					offsets = append(offsets, r.Offset)
				}
				if err := g.Nack(ctx, r.Offset, conn.NackOptions{}); err != nil {
					return fmt.Errorf("nack: %w", err)
				}
			}
		}
		slices.Sort(offsets)
		dead, err := g.DeadLetters(ctx)
		if err != nil {
			return fmt.Errorf("list dead letters: %w", err)
		}
		if !slices.Equal(dead, offsets) {
			return fmt.Errorf("dead letters %v, want %v", dead, offsets)
		}
		if err := g.Redrive(ctx, offsets[0]); err != nil {
			return fmt.Errorf("redrive: %w", err)
		}
		if err := g.Discard(ctx, offsets[1]); err != nil {
			return fmt.Errorf("discard: %w", err)
		}
		if dead, err = g.DeadLetters(ctx); err != nil || len(dead) != 0 {
			return fmt.Errorf("dead letters after redrive and discard: %v, %v", dead, err)
		}
		recs, err := g.Poll(ctx, conn.PollOptions{Max: 2, Wait: time.Second})
		if err != nil {
			return err
		}
		if len(recs) != 1 || recs[0].Offset != offsets[0] || recs[0].Attempts != 1 {
			return fmt.Errorf("after redrive: %v, want offset %d with its attempts reset to 1", offAtt(recs), offsets[0])
		}
		return g.Ack(ctx, recs[0].Offset)
	})
}

func offAtt(recs []conn.GroupRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%d(attempt %d)", r.Offset, r.Attempts))
	}
	return out
}

// commitOn commits one event and a put of key under a fresh entity.
func (e *scenarioEnv) commitOn(ctx context.Context, c *conn.Client, entity []byte, event []byte, key string, value []byte) (uint64, error) {
	return c.Commit(ctx, conn.CommitRequest{Topic: e.topic(), EntityKey: entity, Ops: []conn.CommitOp{
		conn.PublishEvent("", event), conn.PutState("", key, value)}})
}

func needCommit(c *conn.Client) error {
	if !c.Capabilities().Features.Has(felix.FeatureAtomicCommit) {
		return skipf("the broker does not advertise atomic commits")
	}
	return nil
}

func commitReturnsTheOffset(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	entity := []byte(uniqueName("entity")) // the same on every hop: it decides the shard
	return e.leader(ctx, t, func(c *conn.Client) error {
		if err := needCommit(c); err != nil {
			return err
		}
		event := []byte("committed \x00\xff event " + string(entity))
		off, err := e.commitOn(ctx, c, entity, event, "k", []byte("v"))
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		shards, err := c.StreamShards(ctx, e.topic())
		if err != nil {
			return fmt.Errorf("stream_shards: %w", err)
		}
		shard := shards.Routing.V.Shard(entity, shards.Shards)
		sub, err := c.Subscribe(ctx, e.topic(), conn.SubscribeOptions{Shard: felix.Some(shard),
			Start: felix.StartPosition{Kind: felix.StartOffset, Offset: off}})
		if err != nil {
			return fmt.Errorf("subscribe at %d on shard %d: %w", off, shard, err)
		}
		defer sub.Close()
		ev, err := sub.Next(ctx)
		if err != nil {
			return fmt.Errorf("read the event: %w", err)
		}
		if !ev.HasOffset || ev.Offset != off || !bytes.Equal(ev.Payload, event) {
			return fmt.Errorf("event at %d: %q (offset %d, %v), want %q", off, ev.Payload, ev.Offset, ev.HasOffset, event)
		}
		return nil
	})
}

func commitStateGetReturnsTheVersion(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	entity := []byte(uniqueName("entity")) // the same on every hop: it decides the shard
	return e.leader(ctx, t, func(c *conn.Client) error {
		if err := needCommit(c); err != nil {
			return err
		}
		off, err := e.commitOn(ctx, c, entity, []byte("put"), "balance", []byte("10"))
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		v, err := c.StateGet(ctx, e.topic(), entity, "balance")
		if err != nil {
			return fmt.Errorf("state_get: %w", err)
		}
		if !v.Found || string(v.Value) != "10" || !v.HasVersion || v.Version != off || !v.HasAsOf || v.AsOf < off {
			return fmt.Errorf("state_get after a commit at %d: %+v", off, v)
		}
		never, err := c.StateGet(ctx, e.topic(), entity, "never-written")
		if err != nil || never.Found || never.Value != nil {
			return fmt.Errorf("never-written key: %+v, %v (want absent)", never, err)
		}
		if _, err := c.Commit(ctx, conn.CommitRequest{Topic: e.topic(), EntityKey: entity, Ops: []conn.CommitOp{
			conn.PublishEvent("", []byte("delete")), conn.DeleteState("", "balance")}}); err != nil {
			return fmt.Errorf("commit a delete: %w", err)
		}
		gone, err := c.StateGet(ctx, e.topic(), entity, "balance")
		if err != nil || gone.Found || gone.Value != nil {
			return fmt.Errorf("deleted key: %+v, %v (want absent, not empty)", gone, err)
		}
		return nil
	})
}

func commitExpectedOffsetRefuses(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	entity := []byte(uniqueName("entity")) // the same on every hop: it decides the shard
	return e.leader(ctx, t, func(c *conn.Client) error {
		if err := needCommit(c); err != nil {
			return err
		}
		if !c.Capabilities().CanExpectedOffset() {
			return skipf("the broker does not advertise conditional publishes (expected_offset)")
		}
		off, err := e.commitOn(ctx, c, entity, []byte("first"), "k", []byte("1"))
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		_, err = c.Commit(ctx, conn.CommitRequest{Topic: e.topic(), EntityKey: entity, ExpectedOffset: felix.Some(off),
			Ops: []conn.CommitOp{conn.PublishEvent("", []byte("stale")), conn.PutState("", "k", []byte("2"))}})
		var rf *conn.PublishRefusedError
		if !errors.As(err, &rf) || rf.Reason != "offset_mismatch" {
			return fmt.Errorf("stale commit: %v (want publish_refused offset_mismatch)", err)
		}
		if tail, ok := rf.Tail(); !ok || tail <= off {
			return fmt.Errorf("offset_mismatch names tail %d, want one past %d", tail, off)
		}
		v, err := c.StateGet(ctx, e.topic(), entity, "k")
		if err != nil || string(v.Value) != "1" || v.Version != off {
			return fmt.Errorf("after the refused commit: %+v, %v (nothing may be written)", v, err)
		}
		return nil
	})
}

// refusedBeforeSending checks that a commit is refused by the client with
// want, naming operation index, and that the connection still works
// (nothing half-sent).
func refusedBeforeSending(ctx context.Context, c *conn.Client, req conn.CommitRequest, want error, index int) error {
	_, err := c.Commit(ctx, req)
	var ce *conn.CommitError
	if !errors.Is(err, want) || !errors.As(err, &ce) {
		return fmt.Errorf("commit %v: %v, want %v", req.Ops, err, want)
	}
	if ce.Index != index {
		return fmt.Errorf("the error names operation %d, want %d (%v)", ce.Index, index, err)
	}
	return nil
}

func commitAnotherStreamRefused(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	c, err := e.dial(t, e.fx.Addrs[0], nil)
	if err != nil {
		return err
	}
	req := conn.CommitRequest{Topic: e.topic(), EntityKey: []byte("e"), Ops: []conn.CommitOp{
		conn.PublishEvent("", []byte("x")), conn.PutState(e.fx.DurableStream, "k", nil), conn.PutState("another-stream", "k", nil)}}
	if err := refusedBeforeSending(ctx, c, req, conn.ErrCommitNotOnOwningShard, 2); err != nil {
		return err
	}
	req.Ops = []conn.CommitOp{conn.PublishEvent("another-stream", []byte("x"))}
	return refusedBeforeSending(ctx, c, req, conn.ErrCommitNotOnOwningShard, 0)
}

func commitExactlyOneEvent(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	c, err := e.dial(t, e.fx.Addrs[0], nil)
	if err != nil {
		return err
	}
	req := conn.CommitRequest{Topic: e.topic(), EntityKey: []byte("e"), Ops: []conn.CommitOp{conn.PutState("", "k", nil)}}
	if err := refusedBeforeSending(ctx, c, req, conn.ErrCommitEventCount, -1); err != nil {
		return err
	}
	req.Ops = []conn.CommitOp{conn.PublishEvent("", []byte("a")), conn.EnqueueEvent("", []byte("b"))}
	return refusedBeforeSending(ctx, c, req, conn.ErrCommitEventCount, 1)
}

func commitNegotiated(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	// A peer offering no capabilities authenticates as always (plain ok)
	// and never sends commit or state_get.
	c, err := e.dial(t, e.fx.Addrs[0], func(cfg *conn.Config) { cfg.Legacy = true })
	if err != nil {
		return fmt.Errorf("a client offering no capabilities: %w", err)
	}
	if caps := c.Capabilities(); !caps.Legacy || caps.Features != 0 {
		return fmt.Errorf("a client offering nothing got %+v, want the plain ok", caps)
	}
	_, err = c.Commit(ctx, conn.CommitRequest{Topic: e.topic(), EntityKey: []byte("e"), Ops: []conn.CommitOp{conn.PublishEvent("", nil)}})
	if !errors.Is(err, conn.ErrNotAdvertised) {
		return fmt.Errorf("commit without FEATURE_ATOMIC_COMMIT: %v, want ErrNotAdvertised", err)
	}
	if _, err = c.StateGet(ctx, e.topic(), []byte("e"), "k"); !errors.Is(err, conn.ErrNotAdvertised) {
		return fmt.Errorf("state_get without FEATURE_ATOMIC_COMMIT: %v, want ErrNotAdvertised", err)
	}
	// A negotiating client sends them only when the broker advertised.
	nc, err := e.dial(t, e.fx.Addrs[0], nil)
	if err != nil {
		return err
	}
	if !nc.Capabilities().Features.Has(felix.FeatureAtomicCommit) {
		_, err = nc.Commit(ctx, conn.CommitRequest{Topic: e.topic(), EntityKey: []byte("e"), Ops: []conn.CommitOp{conn.PublishEvent("", nil)}})
		if !errors.Is(err, conn.ErrNotAdvertised) {
			return fmt.Errorf("commit to a broker without FEATURE_ATOMIC_COMMIT: %v", err)
		}
	}
	return nil
}

// tailOf learns the next offset of the shard key routes to from a
// publish_if that expects an offset no shard can have.
func tailOf(ctx context.Context, c *conn.Client, t conn.Topic, key []byte) (uint64, error) {
	_, err := c.PublishIf(ctx, t, [][]byte{[]byte("probe")}, key, 1<<63)
	var rf *conn.PublishRefusedError
	if !errors.As(err, &rf) {
		// %w: a not_leader answer stays visible to leader, which follows it.
		return 0, fmt.Errorf("publish_if at an impossible offset: %w (want publish_refused)", err)
	}
	tail, ok := rf.Tail()
	if !ok {
		return 0, fmt.Errorf("publish_refused %s, want offset_mismatch", rf.Reason)
	}
	return tail, nil
}

func needPublishIf(c *conn.Client) error {
	if !c.Capabilities().Features.Has(felix.FeaturePublishConditional) {
		return skipf("the broker does not advertise publish_if")
	}
	return nil
}

func publishIfLands(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	key := []byte(uniqueName("key")) // the same on every hop: it decides the shard
	return e.leader(ctx, t, func(c *conn.Client) error {
		if err := needPublishIf(c); err != nil {
			return err
		}
		tail, err := tailOf(ctx, c, e.topic(), key)
		if err != nil {
			return err
		}
		res, err := c.PublishIf(ctx, e.topic(), [][]byte{[]byte("conditional")}, key, tail)
		if err != nil {
			return fmt.Errorf("publish_if at the tail %d: %w", tail, err)
		}
		if !res.HasOffset || res.Offset != tail {
			return fmt.Errorf("publish_if at %d answered offset %d (set %v)", tail, res.Offset, res.HasOffset)
		}
		return nil
	})
}

func publishIfRefusedWithTheTail(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	key := []byte(uniqueName("key")) // the same on every hop: it decides the shard
	return e.leader(ctx, t, func(c *conn.Client) error {
		if err := needPublishIf(c); err != nil {
			return err
		}
		tail, err := tailOf(ctx, c, e.topic(), key)
		if err != nil {
			return err
		}
		if _, err := c.PublishIf(ctx, e.topic(), [][]byte{[]byte("first")}, key, tail); err != nil {
			return fmt.Errorf("first publish_if: %w", err)
		}
		_, err = c.PublishIf(ctx, e.topic(), [][]byte{[]byte("second")}, key, tail)
		var rf *conn.PublishRefusedError
		if !errors.As(err, &rf) || rf.Reason != "offset_mismatch" {
			return fmt.Errorf("second publish_if expecting %d: %v (want publish_refused offset_mismatch)", tail, err)
		}
		if got, ok := rf.Tail(); !ok || got != tail+1 {
			return fmt.Errorf("refusal names tail %d, want %d", got, tail+1)
		}
		if now, err := tailOf(ctx, c, e.topic(), key); err != nil || now != tail+1 {
			return fmt.Errorf("tail after the refusal: %d, %v (nothing may be written)", now, err)
		}
		return nil
	})
}

func shardedReportsTheShardCount(ctx context.Context, t testing.TB, e *scenarioEnv) error {
	c, err := e.dial(t, e.fx.Addrs[0], nil)
	if err != nil {
		return err
	}
	if !c.Capabilities().Features.Has(felix.FeatureStreamShards) {
		return skipf("the broker does not advertise stream_shards")
	}
	v, err := c.StreamShards(ctx, e.topic())
	if err != nil || v.Shards == 0 {
		return fmt.Errorf("shard count of %s: %+v, %v (want at least 1)", e.fx.DurableStream, v, err)
	}
	missing := conn.Topic{TenantID: e.fx.TenantID, Namespace: e.fx.Namespace, Stream: e.fx.MissingStream}
	v, err = c.StreamShards(ctx, missing)
	if err != nil || v.Shards != 0 {
		return fmt.Errorf("shard count of the missing stream: %+v, %v (want 0, not 1)", v, err)
	}
	if e.refuseSharded == nil {
		return skipf("shard counts hold; no sharded subscription to check that it refuses a 0-shard stream")
	}
	if err := e.refuseSharded(ctx, missing); err != nil {
		return fmt.Errorf("a sharded subscription to a 0-shard stream: %w", err)
	}
	return nil
}
