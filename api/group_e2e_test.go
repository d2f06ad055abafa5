package api_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

type fakeNow struct{ ns atomic.Int64 }

func (c *fakeNow) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeNow) advance(d time.Duration) { c.ns.Add(int64(d)) }

var jobs = felix.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "jobs"}

func publishAll(t *testing.T, c *conn.Client, topic felix.Topic, payloads ...string) {
	t.Helper()
	for _, p := range payloads {
		_, err := c.Publish(testCtx(t), topic, []byte(p), conn.PublishOptions{Ack: felix.AckPerMessage})
		require.NoError(t, err)
	}
}

type offAtt struct {
	Off uint64
	Att uint32
}

func offsets(recs []api.GroupRecord) []offAtt {
	out := []offAtt{}
	for _, r := range recs {
		out = append(out, offAtt{r.Offset, r.Attempts})
	}
	return out
}

func requireCode(t *testing.T, err error, code felix.ErrorCode) {
	t.Helper()
	var be *felix.BrokerError
	require.True(t, errors.As(err, &be), "want *felix.BrokerError, got %v", err)
	require.Equal(t, code, be.Code)
}

func TestGroupPollAckNackEndToEnd(t *testing.T) {
	clk := &fakeNow{}
	clk.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	srv := startRef(t, func(c *server.Config) {
		c.Engine.Now = clk.now
		c.Engine.Groups.Visibility = 30 * time.Second
	})
	cc := dialRef(t, srv, nil)
	c := api.New(cc)
	ctx := testCtx(t)
	g := c.Group(api.GroupRef{Topic: jobs, Group: "workers"})

	recs, err := g.Poll(ctx, api.PollOptions{Max: 10})
	require.NoError(t, err, "an empty poll is an answer")
	require.Empty(t, recs)

	publishAll(t, cc, jobs, "a", "b", "c")
	recs, err = g.Poll(ctx, api.PollOptions{Max: 2})
	require.NoError(t, err)
	require.Equal(t, []offAtt{{0, 1}, {1, 1}}, offsets(recs))
	require.Equal(t, "a", string(recs[0].Payload))

	require.NoError(t, g.Ack(ctx, 0))
	requireCode(t, g.Ack(ctx, 0), felix.CodeStaleClaim)
	require.NoError(t, g.Nack(ctx, 1, api.NackOptions{}))
	recs, err = g.Poll(ctx, api.PollOptions{Max: 10})
	require.NoError(t, err)
	require.Equal(t, []offAtt{{1, 2}, {2, 1}}, offsets(recs), "nacked record comes back at once, attempts 2; acked 0 never")

	// Visibility timeout (broker clock injected): unacked records return.
	granted, err := g.Extend(ctx, 2, 1, time.Hour)
	require.NoError(t, err)
	require.Equal(t, time.Hour, granted)
	clk.advance(31 * time.Second)
	recs, err = g.Poll(ctx, api.PollOptions{Max: 10})
	require.NoError(t, err)
	require.Equal(t, []offAtt{{1, 3}}, offsets(recs), "timed-out claim redelivered, extended one kept")

	// A nack naming a superseded delivery is refused.
	requireCode(t, g.Nack(ctx, 1, api.NackOptions{Attempts: 2}), felix.CodeStaleClaim)
	require.NoError(t, g.Nack(ctx, 1, api.NackOptions{Attempts: 3, Delay: time.Minute}))
	recs, err = g.Poll(ctx, api.PollOptions{Max: 10})
	require.NoError(t, err)
	require.Empty(t, recs, "delayed nack")

	info, err := g.Describe(ctx)
	require.NoError(t, err)
	require.Equal(t, api.GroupInfo{Committed: 1, HasCommitted: true, Tail: 3, InFlight: 1, Owed: 1}, info)
	pos, err := g.Seek(ctx, felix.StartPosition{Kind: felix.StartLatest}, true)
	require.NoError(t, err)
	require.Equal(t, api.GroupPosition{Offset: 3, Moved: false}, pos)
	existed, err := g.Delete(ctx)
	require.NoError(t, err)
	require.True(t, existed)
	existed, err = g.Delete(ctx)
	require.NoError(t, err)
	require.False(t, existed)
}

func TestGroupDeadLettersEndToEnd(t *testing.T) {
	srv := startRef(t, func(c *server.Config) { c.Engine.Groups.MaxAttempts = 2 })
	cc := dialRef(t, srv, nil)
	c := api.New(cc)
	ctx := testCtx(t)
	g := c.Group(api.GroupRef{Topic: jobs, Group: "dl"})
	publishAll(t, cc, jobs, "a", "b")
	for attempt := uint32(1); attempt <= 2; attempt++ {
		recs, err := g.Poll(ctx, api.PollOptions{Max: 2})
		require.NoError(t, err)
		require.Equal(t, []offAtt{{0, attempt}, {1, attempt}}, offsets(recs))
		for _, r := range recs {
			require.NoError(t, g.Nack(ctx, r.Offset, api.NackOptions{Attempts: r.Attempts}))
		}
	}
	dl, err := g.DeadLetters(ctx)
	require.NoError(t, err)
	require.Equal(t, []uint64{0, 1}, dl)
	require.NoError(t, g.Redrive(ctx, 0))
	require.NoError(t, g.Discard(ctx, 1))
	requireCode(t, g.Discard(ctx, 1), felix.CodeInvalidRequest)
	recs, err := g.Poll(ctx, api.PollOptions{Max: 2})
	require.NoError(t, err)
	require.Equal(t, []offAtt{{0, 1}}, offsets(recs), "redrive resets the attempts")
	require.NoError(t, g.DeadLetter(ctx, 0))
	dl, err = g.DeadLetters(ctx)
	require.NoError(t, err)
	require.Equal(t, []uint64{0}, dl)
}

func TestGroupRecordsLoopSettles(t *testing.T) {
	srv := startRef(t, nil)
	cc := dialRef(t, srv, nil)
	c := api.New(cc)
	ctx := testCtx(t)
	g := c.Group(api.GroupRef{Topic: jobs, Group: "loop"})
	publishAll(t, cc, jobs, "a", "b", "c", "d")

	// "a", "c", "d" are acked by the loop; the body nacks "b" on its first
	// delivery and breaks on its second, so the loop gives it back.
	var seen []string
	for d, err := range g.Records(ctx, api.PollOptions{Max: 4}) {
		require.NoError(t, err)
		seen = append(seen, string(d.Payload))
		if string(d.Payload) == "b" {
			if d.Attempts == 1 {
				require.NoError(t, d.Nack(ctx, 0))
				continue
			}
			break // leaves the redelivered "b" unsettled: nacked by the loop
		}
	}
	require.Equal(t, []string{"a", "b", "c", "d", "b"}, seen)
	recs, err := g.Poll(ctx, api.PollOptions{Max: 10})
	require.NoError(t, err)
	require.Equal(t, []offAtt{{1, 3}}, offsets(recs), "a, c, d acked by the loop; b given back on break")

	// A cancelled context ends the loop with its error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for d, err := range g.Records(cctx, api.PollOptions{}) {
		require.Nil(t, d)
		require.ErrorIs(t, err, context.Canceled)
	}
}

func TestGroupCallsNotAdvertised(t *testing.T) {
	b := startBare(t, felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureErrorCodes | felix.FeatureUnsupported})
	c := api.New(b.Dial(t, nil))
	ctx := testCtx(t)
	g := c.Group(api.GroupRef{Topic: jobs, Group: "g"})
	_, err := g.Poll(ctx, api.PollOptions{})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	require.ErrorIs(t, g.Ack(ctx, 0), felix.ErrNotAdvertised)
	require.ErrorIs(t, g.Nack(ctx, 0, api.NackOptions{}), felix.ErrNotAdvertised)
	_, err = g.Extend(ctx, 0, 1, time.Second)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	require.ErrorIs(t, g.DeadLetter(ctx, 0), felix.ErrNotAdvertised)
	_, err = g.DeadLetters(ctx)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	require.ErrorIs(t, g.Redrive(ctx, 0), felix.ErrNotAdvertised)
	require.ErrorIs(t, g.Discard(ctx, 0), felix.ErrNotAdvertised)
	_, err = g.Seek(ctx, felix.StartPosition{}, false)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = g.Describe(ctx)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = g.Delete(ctx)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	for _, err := range g.Records(ctx, api.PollOptions{}) {
		require.ErrorIs(t, err, felix.ErrNotAdvertised)
	}
	require.Empty(t, b.Received(), "nothing was sent")

	// Groups without claim control: the claim-control fields are refused.
	b2 := startBare(t, felix.BrokerOffer{Flags: felix.KnownFlags, Features: felix.FeatureConsumerGroup})
	g2 := api.New(b2.Dial(t, nil)).Group(api.GroupRef{Topic: jobs, Group: "g"})
	_, err = g2.Poll(ctx, api.PollOptions{Visibility: time.Second})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = g2.Poll(ctx, api.PollOptions{Consumer: "me"})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	require.ErrorIs(t, g2.Nack(ctx, 0, api.NackOptions{Delay: time.Second}), felix.ErrNotAdvertised)
	require.Empty(t, b2.Received())
}
