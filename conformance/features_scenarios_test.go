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
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/conn"
)

// The queue.*, commit.*, publish_if.* and sharded.reports_the_shard_count
// scenarios, written against the cluster-aware client (package client),
// the client a user should use, and a fixture description. Each scenario
// body returns what it observed (the evidence its catalogue entry names)
// when the behaviour holds and an error saying what did not; errSkip wraps
// the reason a scenario cannot be run against a fixture.

// scenarioEnv is what a scenario body needs: the fixture and a way to
// get a cluster-aware client of it.
type scenarioEnv struct {
	fx *conformance.Fixture
	// client returns a cluster-aware client seeded with the fixture's
	// brokers and token (adjust may change the configuration), failing
	// the test when there is none; it is closed when the test ends.
	client func(t testing.TB, adjust func(*client.Config)) *client.Client
	// dial connects the building block to the fixture's first broker,
	// for what only the wire shows (the authentication answer); closed
	// when the test ends.
	dial func(t testing.TB, adjust func(*conn.Config)) (*conn.Client, error)
}

var errSkip = errors.New("skip")

func skipf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errSkip}, args...)...)
}

// notAdvertised turns a call the broker did not advertise into a skip.
func notAdvertised(err error, what string) error {
	if errors.Is(err, felix.ErrNotAdvertised) {
		return skipf("the broker does not advertise %s", what)
	}
	return err
}

// scenario is one catalogue scenario.
type scenario struct {
	id  string
	run func(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error)
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

func (e *scenarioEnv) topic() felix.Topic {
	return felix.Topic{TenantID: e.fx.TenantID, Namespace: e.fx.Namespace, Stream: e.fx.DurableStream}
}

// freshGroup returns a group on shard 0 of the durable stream (where
// unkeyed publishes land) positioned at the tail, so that records
// published by other scenarios are not in its way.
func (e *scenarioEnv) freshGroup(ctx context.Context, c *client.Client) (*api.Group, error) {
	g := c.Group(api.GroupRef{Topic: e.topic(), Group: uniqueName("conformance")})
	if _, err := g.Seek(ctx, felix.StartPosition{Kind: felix.StartLatest}, false); err != nil {
		return nil, notAdvertised(fmt.Errorf("seek to latest: %w", err), "consumer groups with group_seek (needed to start a group at the tail)")
	}
	return g, nil
}

func publishN(ctx context.Context, c *client.Client, t felix.Topic, n int, tag string) ([]string, error) {
	var out []string
	for i := range n {
		p := fmt.Sprintf("%s-%d", tag, i)
		if _, err := c.Publish(ctx, t, []byte(p), client.PublishOptions{Ack: felix.AckPerMessage}); err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// pollAll polls until n records arrived (or a poll comes back empty).
func pollAll(ctx context.Context, g *api.Group, n int) ([]api.GroupRecord, error) {
	var out []api.GroupRecord
	for len(out) < n {
		recs, err := g.Poll(ctx, api.PollOptions{Max: uint32(n - len(out)), Wait: time.Second})
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

func queuePollReturnsClaimedRecords(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	c := e.client(t, nil)
	g, err := e.freshGroup(ctx, c)
	if err != nil {
		return nil, err
	}
	recs, err := g.Poll(ctx, api.PollOptions{Max: 5})
	if err != nil {
		return nil, fmt.Errorf("an empty poll must be an answer, got %w", err)
	}
	if len(recs) != 0 {
		return nil, fmt.Errorf("poll of a group at the tail returned %d records", len(recs))
	}
	emptyPolls := 1
	sent, err := publishN(ctx, c, e.topic(), 3, uniqueName("poll"))
	if err != nil {
		return nil, err
	}
	recs, err = g.Poll(ctx, api.PollOptions{Max: 2, Wait: time.Second})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || len(recs) > 2 {
		return nil, fmt.Errorf("poll for up to 2 returned %d records", len(recs))
	}
	more, err := pollAll(ctx, g, 3-len(recs))
	if err != nil {
		return nil, err
	}
	recs = append(recs, more...)
	var claimed []uint64
	var attempts []uint32
	for i, r := range recs {
		if i >= len(sent) || string(r.Payload) != sent[i] {
			return nil, fmt.Errorf("record %d: payload %q, want %q", i, r.Payload, sent[min(i, len(sent)-1)])
		}
		if r.Attempts != 1 {
			return nil, fmt.Errorf("record at %d: delivery count %d, want 1", r.Offset, r.Attempts)
		}
		if i > 0 && r.Offset != recs[i-1].Offset+1 {
			return nil, fmt.Errorf("offsets %d then %d", recs[i-1].Offset, r.Offset)
		}
		claimed = append(claimed, r.Offset)
		attempts = append(attempts, r.Attempts)
	}
	if len(recs) != 3 {
		return nil, fmt.Errorf("got %d of 3 records", len(recs))
	}
	again, err := g.Poll(ctx, api.PollOptions{Max: 5})
	if err != nil || len(again) != 0 {
		return nil, fmt.Errorf("poll with every record claimed: %d records, %v (want an empty answer)", len(again), err)
	}
	emptyPolls++
	return conformance.Evidence{"claimed": claimed, "attempts": attempts, "empty_polls": emptyPolls}, nil
}

func queueAckedNotRedelivered(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	c := e.client(t, nil)
	g, err := e.freshGroup(ctx, c)
	if err != nil {
		return nil, err
	}
	if _, err := publishN(ctx, c, e.topic(), 3, uniqueName("ack")); err != nil {
		return nil, err
	}
	recs, err := pollAll(ctx, g, 3)
	if err != nil {
		return nil, err
	}
	if len(recs) != 3 {
		return nil, fmt.Errorf("got %d of 3 records", len(recs))
	}
	acked := map[uint64]bool{}
	var ackedList []uint64
	for _, r := range recs[:2] {
		if err := g.Ack(ctx, r.Offset); err != nil {
			return nil, fmt.Errorf("ack %d: %w", r.Offset, err)
		}
		acked[r.Offset] = true
		ackedList = append(ackedList, r.Offset)
	}
	// Hand the third back: the next poll redelivers it, and only it.
	if err := g.Nack(ctx, recs[2].Offset, api.NackOptions{}); err != nil {
		return nil, fmt.Errorf("nack: %w", err)
	}
	again, err := g.Poll(ctx, api.PollOptions{Max: 10, Wait: time.Second})
	if err != nil {
		return nil, err
	}
	var redelivered []uint64
	for _, r := range again {
		if acked[r.Offset] {
			return nil, fmt.Errorf("acked record %d delivered again", r.Offset)
		}
		redelivered = append(redelivered, r.Offset)
	}
	if len(again) != 1 || again[0].Offset != recs[2].Offset {
		return nil, fmt.Errorf("after acking 2 of 3 and nacking 1, a poll returned %d records", len(again))
	}
	if err := g.Ack(ctx, again[0].Offset); err != nil {
		return nil, err
	}
	return conformance.Evidence{"acked": ackedList, "redelivered": redelivered}, nil
}

func queueNackedRedelivered(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	c := e.client(t, nil)
	g, err := e.freshGroup(ctx, c)
	if err != nil {
		return nil, err
	}
	sent, err := publishN(ctx, c, e.topic(), 1, uniqueName("nack"))
	if err != nil {
		return nil, err
	}
	recs, err := pollAll(ctx, g, 1)
	if err != nil || len(recs) != 1 {
		return nil, fmt.Errorf("first poll: %d records, %v", len(recs), err)
	}
	first := recs[0]
	if err := g.Nack(ctx, first.Offset, api.NackOptions{}); err != nil {
		return nil, fmt.Errorf("nack: %w", err)
	}
	// At once, not after the visibility timeout: a poll that does not
	// wait must return it.
	again, err := g.Poll(ctx, api.PollOptions{Max: 1})
	if err != nil {
		return nil, err
	}
	if len(again) != 1 || again[0].Offset != first.Offset || string(again[0].Payload) != sent[0] {
		return nil, fmt.Errorf("nacked record not redelivered at once (got %d records)", len(again))
	}
	if again[0].Attempts <= first.Attempts {
		return nil, fmt.Errorf("redelivery count %d, not above the first delivery's %d", again[0].Attempts, first.Attempts)
	}
	if err := g.Ack(ctx, first.Offset); err != nil {
		return nil, err
	}
	return conformance.Evidence{"offset": first.Offset, "attempts": []uint32{first.Attempts, again[0].Attempts}}, nil
}

func queueDeadLetters(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	c := e.client(t, nil)
	g, err := e.freshGroup(ctx, c)
	if err != nil {
		return nil, err
	}
	if _, err := g.DeadLetters(ctx); err != nil {
		return nil, notAdvertised(err, "dead letters")
	}
	if _, err := publishN(ctx, c, e.topic(), 2, uniqueName("dead")); err != nil {
		return nil, err
	}
	// Nack both records until the attempt bound sets them aside.
	var offsets []uint64
	const maxRounds = 50
	for round := 0; ; round++ {
		recs, err := g.Poll(ctx, api.PollOptions{Max: 2})
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			break
		}
		if round == maxRounds {
			return nil, fmt.Errorf("records still delivered after %d nacks: no attempt bound", maxRounds)
		}
		for _, r := range recs {
			if !slices.Contains(offsets, r.Offset) {
				offsets = append(offsets, r.Offset)
			}
			if err := g.Nack(ctx, r.Offset, api.NackOptions{}); err != nil {
				return nil, fmt.Errorf("nack: %w", err)
			}
		}
	}
	slices.Sort(offsets)
	if len(offsets) != 2 {
		return nil, fmt.Errorf("delivered offsets %v, want the 2 published", offsets)
	}
	dead, err := g.DeadLetters(ctx)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	if !slices.Equal(dead, offsets) {
		return nil, fmt.Errorf("dead letters %v, want %v", dead, offsets)
	}
	if err := g.Redrive(ctx, offsets[0]); err != nil {
		return nil, fmt.Errorf("redrive: %w", err)
	}
	if err := g.Discard(ctx, offsets[1]); err != nil {
		return nil, fmt.Errorf("discard: %w", err)
	}
	if left, err := g.DeadLetters(ctx); err != nil || len(left) != 0 {
		return nil, fmt.Errorf("dead letters after redrive and discard: %v, %v", left, err)
	}
	recs, err := g.Poll(ctx, api.PollOptions{Max: 2, Wait: time.Second})
	if err != nil {
		return nil, err
	}
	if len(recs) != 1 || recs[0].Offset != offsets[0] || recs[0].Attempts != 1 {
		return nil, fmt.Errorf("after redrive: %v, want offset %d with its attempts reset to 1", offAtt(recs), offsets[0])
	}
	if err := g.Ack(ctx, recs[0].Offset); err != nil {
		return nil, err
	}
	return conformance.Evidence{"dead": dead, "redriven": offsets[0], "discarded": offsets[1]}, nil
}

func offAtt(recs []api.GroupRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%d(attempt %d)", r.Offset, r.Attempts))
	}
	return out
}

// commitOn commits one event and a put of key under entity.
func (e *scenarioEnv) commitOn(ctx context.Context, c *client.Client, entity []byte, event []byte, key string, value []byte) (uint64, error) {
	off, err := c.Commit(ctx, api.CommitRequest{Topic: e.topic(), EntityKey: entity, Ops: []api.CommitOp{
		api.PublishEvent("", event), api.PutState("", key, value)}})
	return off, notAdvertised(err, "atomic commits")
}

func commitReturnsTheOffset(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	c := e.client(t, nil)
	entity := []byte(uniqueName("entity"))
	event := []byte("committed \x00\xff event " + string(entity))
	off, err := e.commitOn(ctx, c, entity, event, "k", []byte("v"))
	if err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	n, routing, err := shardsOf(c.StreamShards(ctx, e.topic()))
	if err != nil {
		return nil, fmt.Errorf("stream_shards: %w", err)
	}
	shard := routing.ShardOf(entity, true, n)
	sub, err := c.Subscribe(ctx, e.topic(), client.SubscribeOptions{Shard: shard, Start: felix.StartAt(off)})
	if err != nil {
		return nil, fmt.Errorf("subscribe at %d on shard %d: %w", off, shard, err)
	}
	defer sub.Close()
	ev, err := sub.Next(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the event: %w", err)
	}
	if !ev.HasOffset || ev.Offset != off || !bytes.Equal(ev.Payload, event) {
		return nil, fmt.Errorf("event at %d: %q (offset %d, %v), want %q", off, ev.Payload, ev.Offset, ev.HasOffset, event)
	}
	return conformance.Evidence{"offset": off, "delivered_at": ev.Offset, "shard": shard}, nil
}

func commitStateGetReturnsTheVersion(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	c := e.client(t, nil)
	entity := []byte(uniqueName("entity"))
	off, err := e.commitOn(ctx, c, entity, []byte("put"), "balance", []byte("10"))
	if err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	v, err := c.StateGet(ctx, e.topic(), entity, "balance")
	if err != nil {
		return nil, fmt.Errorf("state_get: %w", err)
	}
	if !v.Found || string(v.Value) != "10" || !v.HasVersion || v.Version != off || !v.HasAsOf || v.AsOf < off {
		return nil, fmt.Errorf("state_get after a commit at %d: %+v", off, v)
	}
	never, err := c.StateGet(ctx, e.topic(), entity, "never-written")
	if err != nil || never.Found || never.Value != nil {
		return nil, fmt.Errorf("never-written key: %+v, %v (want absent)", never, err)
	}
	if _, err := c.Commit(ctx, api.CommitRequest{Topic: e.topic(), EntityKey: entity, Ops: []api.CommitOp{
		api.PublishEvent("", []byte("delete")), api.DeleteState("", "balance")}}); err != nil {
		return nil, fmt.Errorf("commit a delete: %w", err)
	}
	gone, err := c.StateGet(ctx, e.topic(), entity, "balance")
	if err != nil || gone.Found || gone.Value != nil {
		return nil, fmt.Errorf("deleted key: %+v, %v (want absent, not empty)", gone, err)
	}
	return conformance.Evidence{"version": v.Version, "as_of": v.AsOf}, nil
}

func commitExpectedOffsetRefuses(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	c := e.client(t, nil)
	entity := []byte(uniqueName("entity"))
	off, err := e.commitOn(ctx, c, entity, []byte("first"), "k", []byte("1"))
	if err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	_, err = c.Commit(ctx, api.CommitRequest{Topic: e.topic(), EntityKey: entity, ExpectedOffset: felix.Some(off),
		Ops: []api.CommitOp{api.PublishEvent("", []byte("stale")), api.PutState("", "k", []byte("2"))}})
	if err := notAdvertised(err, "conditional publishes (expected_offset)"); errors.Is(err, errSkip) {
		return nil, err
	}
	var rf *felix.PublishRefusedError
	if !errors.As(err, &rf) || rf.Reason != "offset_mismatch" {
		return nil, fmt.Errorf("stale commit: %v (want publish_refused offset_mismatch)", err)
	}
	tail, ok := rf.Tail()
	if !ok || tail <= off {
		return nil, fmt.Errorf("offset_mismatch names tail %d, want one past %d", tail, off)
	}
	v, err := c.StateGet(ctx, e.topic(), entity, "k")
	if err != nil || string(v.Value) != "1" || v.Version != off {
		return nil, fmt.Errorf("after the refused commit: %+v, %v (nothing may be written)", v, err)
	}
	return conformance.Evidence{"reason": rf.Reason, "tail": tail}, nil
}

// commitRefusals checks that each commit of ops (on the durable stream) is
// refused by the client with want, naming the operation of index. The
// fixture's brokers are never asked: the request is refused whatever the
// cluster looks like.
func commitRefusals(ctx context.Context, t testing.TB, e *scenarioEnv, want error, ops [][]api.CommitOp, indexes []int) (conformance.Evidence, error) {
	c := e.client(t, nil)
	var first string
	for i, o := range ops {
		_, err := c.Commit(ctx, api.CommitRequest{Topic: e.topic(), EntityKey: []byte("e"), Ops: o})
		var ce *api.CommitError
		if !errors.Is(err, want) || !errors.As(err, &ce) {
			return nil, fmt.Errorf("commit %v: %v, want %v", o, err, want)
		}
		if ce.Index != indexes[i] {
			return nil, fmt.Errorf("the error names operation %d, want %d (%v)", ce.Index, indexes[i], err)
		}
		if i == 0 {
			first = err.Error()
		}
	}
	return conformance.Evidence{"error": first, "indexes": indexes}, nil
}

func commitAnotherStreamRefused(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	return commitRefusals(ctx, t, e, api.ErrCommitNotOnOwningShard, [][]api.CommitOp{
		{api.PublishEvent("", []byte("x")), api.PutState(e.fx.DurableStream, "k", nil), api.PutState("another-stream", "k", nil)},
		{api.PublishEvent("another-stream", []byte("x"))},
	}, []int{2, 0})
}

func commitExactlyOneEvent(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	return commitRefusals(ctx, t, e, api.ErrCommitEventCount, [][]api.CommitOp{
		{api.PutState("", "k", nil)},
		{api.PublishEvent("", []byte("a")), api.EnqueueEvent("", []byte("b"))},
	}, []int{-1, 1})
}

func commitNegotiated(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	// A peer offering no capabilities authenticates as always (plain ok):
	// what the broker answered is seen on the building block's handshake.
	lc, err := e.dial(t, func(cfg *conn.Config) { cfg.Legacy = true })
	if err != nil {
		return nil, fmt.Errorf("a client offering no capabilities: %w", err)
	}
	caps := lc.Capabilities()
	if !caps.Legacy || caps.Features != 0 {
		return nil, fmt.Errorf("a client offering nothing got %+v, want the plain ok", caps)
	}
	// The cluster-aware client offering nothing never sends commit or
	// state_get: the broker did not advertise them to it.
	c := e.client(t, func(cfg *client.Config) { cfg.Conn.Legacy = true })
	_, err = c.Commit(ctx, api.CommitRequest{Topic: e.topic(), EntityKey: []byte("e"), Ops: []api.CommitOp{api.PublishEvent("", nil)}})
	if !errors.Is(err, felix.ErrNotAdvertised) {
		return nil, fmt.Errorf("commit without FEATURE_ATOMIC_COMMIT: %v, want ErrNotAdvertised", err)
	}
	refused := err.Error()
	if _, err = c.StateGet(ctx, e.topic(), []byte("e"), "k"); !errors.Is(err, felix.ErrNotAdvertised) {
		return nil, fmt.Errorf("state_get without FEATURE_ATOMIC_COMMIT: %v, want ErrNotAdvertised", err)
	}
	return conformance.Evidence{"legacy_answer": fmt.Sprintf("legacy %v, features %#x", caps.Legacy, uint64(caps.Features)), "refused": refused}, nil
}

// tailOf learns the next offset of the shard key routes to from a
// publish_if that expects an offset no shard can have.
func tailOf(ctx context.Context, c *client.Client, t felix.Topic, key []byte) (uint64, error) {
	_, err := c.PublishIf(ctx, t, [][]byte{[]byte("probe")}, key, 1<<63)
	if err := notAdvertised(err, "publish_if"); errors.Is(err, errSkip) {
		return 0, err
	}
	var rf *felix.PublishRefusedError
	if !errors.As(err, &rf) {
		return 0, fmt.Errorf("publish_if at an impossible offset: %v (want publish_refused)", err)
	}
	tail, ok := rf.Tail()
	if !ok {
		return 0, fmt.Errorf("publish_refused %s, want offset_mismatch", rf.Reason)
	}
	return tail, nil
}

func publishIfLands(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	c := e.client(t, nil)
	key := []byte(uniqueName("key"))
	tail, err := tailOf(ctx, c, e.topic(), key)
	if err != nil {
		return nil, err
	}
	res, err := c.PublishIf(ctx, e.topic(), [][]byte{[]byte("conditional")}, key, tail)
	if err != nil {
		return nil, fmt.Errorf("publish_if at the tail %d: %w", tail, err)
	}
	if !res.HasOffset || res.Offset != tail {
		return nil, fmt.Errorf("publish_if at %d answered offset %d (set %v)", tail, res.Offset, res.HasOffset)
	}
	return conformance.Evidence{"expected": tail, "landed": res.Offset}, nil
}

func publishIfRefusedWithTheTail(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	c := e.client(t, nil)
	key := []byte(uniqueName("key"))
	tail, err := tailOf(ctx, c, e.topic(), key)
	if err != nil {
		return nil, err
	}
	if _, err := c.PublishIf(ctx, e.topic(), [][]byte{[]byte("first")}, key, tail); err != nil {
		return nil, fmt.Errorf("first publish_if: %w", err)
	}
	_, err = c.PublishIf(ctx, e.topic(), [][]byte{[]byte("second")}, key, tail)
	var rf *felix.PublishRefusedError
	if !errors.As(err, &rf) || rf.Reason != "offset_mismatch" {
		return nil, fmt.Errorf("second publish_if expecting %d: %v (want publish_refused offset_mismatch)", tail, err)
	}
	got, ok := rf.Tail()
	if !ok || got != tail+1 {
		return nil, fmt.Errorf("refusal names tail %d, want %d", got, tail+1)
	}
	if now, err := tailOf(ctx, c, e.topic(), key); err != nil || now != tail+1 {
		return nil, fmt.Errorf("tail after the refusal: %d, %v (nothing may be written)", now, err)
	}
	return conformance.Evidence{"reason": rf.Reason, "tail": got}, nil
}

func shardedReportsTheShardCount(ctx context.Context, t testing.TB, e *scenarioEnv) (conformance.Evidence, error) {
	c := e.client(t, nil)
	n, _, err := shardsOf(c.StreamShards(ctx, e.topic()))
	if err := notAdvertised(err, "stream_shards"); errors.Is(err, errSkip) {
		return nil, err
	}
	if err != nil || n == 0 {
		return nil, fmt.Errorf("shard count of %s: %d, %v (want at least 1)", e.fx.DurableStream, n, err)
	}
	missing := felix.Topic{TenantID: e.fx.TenantID, Namespace: e.fx.Namespace, Stream: e.fx.MissingStream}
	m, _, err := shardsOf(c.StreamShards(ctx, missing))
	if err != nil || m != 0 {
		return nil, fmt.Errorf("shard count of the missing stream: %d, %v (want 0, not 1)", m, err)
	}
	ss, err := c.SubscribeSharded(ctx, missing, client.ShardedOptions{})
	switch {
	case err == nil:
		_ = ss.Close()
		return nil, errors.New("a sharded subscription to a 0-shard stream was not refused")
	case !errors.Is(err, client.ErrUnknownStream):
		return nil, fmt.Errorf("a sharded subscription to a 0-shard stream: refused with %w, want client.ErrUnknownStream", err)
	}
	return conformance.Evidence{"shards": n, "missing_stream_shards": m, "refused": err.Error()}, nil
}
