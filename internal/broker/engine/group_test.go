package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

func groupEngine(t *testing.T, gc GroupConfig) (*Engine, *fakeClock, GroupRef) {
	clk := newFakeClock()
	e := New(Config{DefaultStream: durable, Now: clk.Now, Groups: gc})
	t.Cleanup(e.Close)
	return e, clk, GroupRef{Topic: Topic{"t", "ns", "jobs"}, Group: "g"}
}

func poll(t *testing.T, e *Engine, ref GroupRef, n int) []GroupRecord {
	t.Helper()
	recs, err := e.GroupPoll(ctxT(t), GroupPollRequest{GroupRef: ref, Max: n})
	require.NoError(t, err)
	return recs
}

type oa struct {
	off uint64
	att uint32
}

func offsAtt(recs []GroupRecord) []oa {
	out := []oa{}
	for _, r := range recs {
		out = append(out, oa{r.Offset, r.Attempts})
	}
	return out
}

func requireCode(t *testing.T, err error, code felix.ErrorCode, retry felix.RetryClass) {
	t.Helper()
	var ee *Error
	require.True(t, errors.As(err, &ee), "want *Error, got %v", err)
	require.Equal(t, code, ee.Code)
	require.Equal(t, retry, ee.Retry)
}

func TestGroupPollClaimsAckNack(t *testing.T) {
	e, _, ref := groupEngine(t, GroupConfig{})
	require.Empty(t, poll(t, e, ref, 10), "empty poll is an empty answer")
	pub(t, e, ref.Topic, "a", "b", "c")
	recs := poll(t, e, ref, 2)
	require.Equal(t, []oa{{0, 1}, {1, 1}}, offsAtt(recs))
	require.Equal(t, "a", string(recs[0].Payload))
	require.Equal(t, "alice", recs[0].Publisher)
	require.NotZero(t, recs[0].Timestamp)
	require.Equal(t, []oa{{2, 1}}, offsAtt(poll(t, e, ref, 10)))
	require.Empty(t, poll(t, e, ref, 10), "claimed records are not handed out twice")

	require.NoError(t, e.GroupAck(ref, 0))
	requireCode(t, e.GroupAck(ref, 0), felix.CodeStaleClaim, felix.RetryRetry)
	require.NoError(t, e.GroupNack(ref, 1, 0, 0))
	require.Equal(t, []oa{{1, 2}}, offsAtt(poll(t, e, ref, 10)), "nacked record comes back at once, attempts+1")
	// nack naming a stale attempt count: fatal stale_claim.
	requireCode(t, e.GroupNack(ref, 1, 1, 0), felix.CodeStaleClaim, felix.RetryFatal)
	require.NoError(t, e.GroupNack(ref, 1, 2, 0))

	info, err := e.GroupDescribe(ref)
	require.NoError(t, err)
	require.Equal(t, GroupInfo{Committed: 1, HasCommitted: true, Tail: 3, InFlight: 1, Owed: 1}, info)
}

func TestGroupVisibilityTimeoutAndExtend(t *testing.T) {
	e, clk, ref := groupEngine(t, GroupConfig{Visibility: 10 * time.Second})
	pub(t, e, ref.Topic, "a", "b")
	require.Len(t, poll(t, e, ref, 2), 2)
	got, err := e.GroupExtend(ref, 1, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, time.Minute, got)
	_, err = e.GroupExtend(ref, 1, 1, 0)
	requireCode(t, err, felix.CodeInvalidRequest, felix.RetryFatal)
	_, err = e.GroupExtend(ref, 1, 7, time.Second)
	requireCode(t, err, felix.CodeStaleClaim, felix.RetryFatal)

	clk.Advance(10 * time.Second)
	require.Equal(t, []oa{{0, 2}}, offsAtt(poll(t, e, ref, 10)), "timed-out claim redelivered; extended one kept")
	require.NoError(t, e.GroupAck(ref, 0))
	require.NoError(t, e.GroupAck(ref, 1))
}

func TestGroupNackDelay(t *testing.T) {
	e, clk, ref := groupEngine(t, GroupConfig{})
	pub(t, e, ref.Topic, "a")
	poll(t, e, ref, 1)
	require.NoError(t, e.GroupNack(ref, 0, 1, 5*time.Second))
	require.Empty(t, poll(t, e, ref, 1))
	clk.Advance(5 * time.Second)
	require.Equal(t, []oa{{0, 2}}, offsAtt(poll(t, e, ref, 1)))
}

func TestGroupDeadLettersRedriveDiscard(t *testing.T) {
	e, clk, ref := groupEngine(t, GroupConfig{MaxAttempts: 2, Visibility: time.Second})
	pub(t, e, ref.Topic, "a", "b", "c")
	require.Len(t, poll(t, e, ref, 3), 3)
	for _, off := range []uint64{0, 1} {
		require.NoError(t, e.GroupNack(ref, off, 1, 0))
	}
	require.Equal(t, []oa{{0, 2}, {1, 2}}, offsAtt(poll(t, e, ref, 3)))
	require.NoError(t, e.GroupNack(ref, 0, 2, 0)) // past the bound: dead letter
	clk.Advance(time.Second)                      // 1 and 2 time out: 1 is at the bound, 2 is owed
	dl, err := e.GroupDeadLetters(ref)
	require.NoError(t, err)
	require.Equal(t, []uint64{0, 1}, dl)
	requireCode(t, e.GroupDeadLetter(ref, 2), felix.CodeStaleClaim, felix.RetryRetry) // owed, not claimed
	require.Equal(t, []oa{{2, 2}}, offsAtt(poll(t, e, ref, 3)))
	require.NoError(t, e.GroupDeadLetter(ref, 2))
	dl, err = e.GroupDeadLetters(ref)
	require.NoError(t, err)
	require.Equal(t, []uint64{0, 1, 2}, dl)

	require.NoError(t, e.GroupRedrive(ref, 1))
	require.Equal(t, []oa{{1, 1}}, offsAtt(poll(t, e, ref, 3)), "redriven record starts again at attempt 1")
	require.NoError(t, e.GroupDiscard(ref, 0))
	requireCode(t, e.GroupDiscard(ref, 0), felix.CodeInvalidRequest, felix.RetryFatal)
	requireCode(t, e.GroupRedrive(ref, 1), felix.CodeInvalidRequest, felix.RetryFatal)
	dl, err = e.GroupDeadLetters(ref)
	require.NoError(t, err)
	require.Equal(t, []uint64{2}, dl)
	info, err := e.GroupDescribe(ref)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.DeadLetters)
	require.Equal(t, uint64(1), info.InFlight)
	require.Equal(t, uint64(1), info.Committed)
}

func TestGroupDeadLetterBound(t *testing.T) {
	e, _, ref := groupEngine(t, GroupConfig{MaxDeadLetters: 1})
	pub(t, e, ref.Topic, "a", "b")
	poll(t, e, ref, 2)
	require.NoError(t, e.GroupDeadLetter(ref, 0))
	require.NoError(t, e.GroupDeadLetter(ref, 1))
	dl, err := e.GroupDeadLetters(ref)
	require.NoError(t, err)
	require.Equal(t, []uint64{0}, dl)
	require.Equal(t, uint64(1), e.Stats().DeadLettersDropped)
}

func TestGroupPendingAndGroupBounds(t *testing.T) {
	e, _, ref := groupEngine(t, GroupConfig{MaxPending: 2, MaxGroups: 1})
	pub(t, e, ref.Topic, "a", "b", "c")
	require.Len(t, poll(t, e, ref, 10), 2)
	require.Empty(t, poll(t, e, ref, 10), "no fresh record while the group holds MaxPending")
	require.NoError(t, e.GroupAck(ref, 0))
	require.Equal(t, []oa{{2, 1}}, offsAtt(poll(t, e, ref, 10)))
	other := ref
	other.Group = "other"
	_, err := e.GroupPoll(ctxT(t), GroupPollRequest{GroupRef: other, Max: 1})
	requireCode(t, err, felix.CodeLimitExceeded, felix.RetryFatal)
	bad := ref
	bad.Group = ""
	_, err = e.GroupPoll(ctxT(t), GroupPollRequest{GroupRef: bad, Max: 1})
	requireCode(t, err, felix.CodeInvalidRequest, felix.RetryFatal)
}

func TestGroupSeekDescribeDelete(t *testing.T) {
	e, _, ref := groupEngine(t, GroupConfig{})
	pub(t, e, ref.Topic, "a", "b", "c")
	info, err := e.GroupDescribe(ref)
	require.NoError(t, err)
	require.Equal(t, GroupInfo{Tail: 3}, info, "unknown group: no committed offset")

	off, moved, err := e.GroupSeek(ref, felix.StartPosition{Kind: felix.StartLatest}, false)
	require.NoError(t, err)
	require.Equal(t, uint64(3), off)
	require.True(t, moved)
	require.Empty(t, poll(t, e, ref, 10))
	off, moved, err = e.GroupSeek(ref, felix.StartPosition{Kind: felix.StartEarliest}, true)
	require.NoError(t, err)
	require.Equal(t, uint64(3), off)
	require.False(t, moved, "if_new leaves an existing group alone")
	off, moved, err = e.GroupSeek(ref, felix.StartPosition{Kind: felix.StartOffset, Offset: 1}, false)
	require.NoError(t, err)
	require.Equal(t, uint64(1), off)
	require.True(t, moved)
	require.Equal(t, []oa{{1, 1}, {2, 1}}, offsAtt(poll(t, e, ref, 10)))
	_, _, err = e.GroupSeek(ref, felix.StartPosition{Kind: felix.StartOffset, Offset: 9}, false)
	requireCode(t, err, felix.CodeInvalidRequest, felix.RetryFatal)

	existed, err := e.GroupDelete(ref)
	require.NoError(t, err)
	require.True(t, existed)
	existed, err = e.GroupDelete(ref)
	require.NoError(t, err)
	require.False(t, existed)
	require.Equal(t, []oa{{0, 1}, {1, 1}, {2, 1}}, offsAtt(poll(t, e, ref, 10)), "a new group starts at the oldest record")
}

func TestGroupNeedsDurableStream(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	_, err := e.GroupPoll(ctxT(t), GroupPollRequest{GroupRef: GroupRef{Topic: Topic{"t", "n", "s"}, Group: "g"}, Max: 1})
	requireCode(t, err, felix.CodeInvalidRequest, felix.RetryFatal)
}

func TestGroupLongPollWakesOnPublish(t *testing.T) {
	e, _, ref := groupEngine(t, GroupConfig{MaxWait: time.Hour})
	got := make(chan []GroupRecord, 1)
	go func() {
		recs, _ := e.GroupPoll(ctxT(t), GroupPollRequest{GroupRef: ref, Max: 5, Wait: time.Hour})
		got <- recs
	}()
	// The poll may or may not be waiting yet; either way it must return
	// the record published now.
	pub(t, e, ref.Topic, "late")
	recs := <-got
	require.Equal(t, []oa{{0, 1}}, offsAtt(recs))
}
