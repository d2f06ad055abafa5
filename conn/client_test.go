package conn

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/flxproto/felix"
)

// leakCheck registers a goroutine leak check that runs after every other
// cleanup of the test (brokers and clients are closed by then).
func leakCheck(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// waitFor polls cond until it holds. It fails the test only when the
// test's deadline comes first: no guess of how long a loaded machine takes.
func waitFor(t *testing.T, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	ctx := testCtx(t)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			require.FailNow(t, "condition not met within the wait's bound", msgAndArgs...)
		case <-tick.C:
		}
	}
}

// testCtx returns the context of one of a test's blocking calls (see
// deadlineCtx: 10 s, generous for a loaded machine, not minutes).
func testCtx(t *testing.T) context.Context {
	return deadlineCtx(t)
}

// recv receives from ch within the wait's bound, failing the test with
// what when nothing comes.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	ctx := deadlineCtx(t)
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		require.FailNow(t, "nothing received", "%s: %v", what, context.Cause(ctx))
		panic("unreachable")
	}
}

// deadlineCtx returns a context for one wait of t: cancelled when t
// ends, 10 s from now (generous for QUIC end to end under -race on two
// cores) or shortly before the test binary's -timeout, whichever comes
// first, so that a hang fails the test in seconds with a context error
// naming the test rather than at the package's timeout.
func deadlineCtx(t testing.TB) context.Context {
	end := time.Now().Add(10 * time.Second)
	// *testing.T and *testing.B have Deadline; testing.TB does not.
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			if soon := d.Add(-time.Until(d) / 10); soon.Before(end) {
				end = soon
			}
		}
	}
	ctx, cancel := context.WithDeadlineCause(context.Background(), end, errors.New(t.Name()+": a wait of the test ran past its 10 s bound"))
	t.Cleanup(cancel)
	return ctx
}

var topic = felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}

func nextN(t *testing.T, ctx context.Context, sub *Subscription, n int) []Event {
	t.Helper()
	var out []Event
	for len(out) < n {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		out = append(out, ev.Clone()) // kept beyond the next Next
	}
	return out
}

func payloads(evs []Event) []string {
	var s []string
	for _, e := range evs {
		s = append(s, string(e.Payload))
	}
	return s
}

func TestPublishSubscribeBinary(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), ackOffsets: true})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	caps := c.Capabilities()
	require.False(t, caps.Legacy)
	require.Equal(t, felix.KnownFlags, caps.Flags)
	require.EqualValues(t, 64, caps.PublishWindow)

	res, err := c.PublishBatch(ctx, topic, [][]byte{[]byte("a"), []byte("b")}, PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	require.True(t, res.HasOffset)
	require.EqualValues(t, 0, res.Offset)
	res, err = c.Publish(ctx, topic, []byte("c"), PublishOptions{Ack: felix.AckPerMessage})
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Offset)
	_, err = c.Publish(ctx, topic, []byte("d"), PublishOptions{Key: []byte("k"), Ack: felix.AckPerBatch})
	require.NoError(t, err)
	_, err = c.Publish(ctx, topic, []byte("e"), PublishOptions{NoAck: true}) // fire-and-forget
	require.NoError(t, err)

	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	evs := nextN(t, ctx, sub, 5)
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, payloads(evs))
	for i, e := range evs {
		require.True(t, e.HasOffset)
		require.EqualValues(t, i, e.Offset)
		// Publisher and timestamps were not offered by default.
		require.Nil(t, e.Publisher)
		require.False(t, e.HasTimestamp)
	}
	require.Equal(t, []felix.Flags{0x0009, 0x0009, 0x0049, 0x0001}, b.seenFlags())
	require.Empty(t, b.seenTypes()[1:]) // only the subscribe was JSON

	// Live delivery after the history.
	_, err = c.Publish(ctx, topic, []byte("f"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "f", string(ev.Payload))
	require.EqualValues(t, 5, ev.Offset)
	require.NoError(t, sub.Close())
	require.NoError(t, sub.Close())
	_, err = sub.Next(ctx)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	_, err = c.Publish(ctx, topic, []byte("x"), PublishOptions{NoAck: true})
	require.ErrorIs(t, err, ErrClosed)
}

func TestPublisherAndTimestampsWhenOffered(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, func(c *Config) { c.Flags = felix.KnownFlags })
	ctx := testCtx(t)
	_, err := c.Publish(ctx, topic, []byte("a"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartAt(0)})
	require.NoError(t, err)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "pub", string(ev.Publisher))
	require.True(t, ev.HasTimestamp)
	require.Equal(t, uint64(1_700_000_000_000_000), ev.TimestampMicros)
}

func TestSubscribeHelloEitherOrder(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("helloLate=%v", late), func(t *testing.T) {
			leakCheck(t)
			b := startBroker(t, brokerOpts{offer: fullOffer(), helloLate: late})
			c := b.dial(t, nil)
			ctx := testCtx(t)
			sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
			require.NoError(t, err)
			require.NotZero(t, sub.ID())
			_, err = c.Publish(ctx, topic, []byte("x"), PublishOptions{Ack: felix.AckPerBatch})
			require.NoError(t, err)
			ev, err := sub.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, "x", string(ev.Payload))
		})
	}
}

func TestLegacyBrokerFallsBackToJSON(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), legacy: true})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	caps := c.Capabilities()
	require.True(t, caps.Legacy)
	require.Equal(t, felix.OriginalV1Flags, caps.Flags)

	_, err := c.Publish(ctx, topic, []byte("a"), PublishOptions{Ack: felix.AckPerMessage})
	require.NoError(t, err)
	_, err = c.PublishBatch(ctx, topic, [][]byte{[]byte("b"), []byte("c")}, PublishOptions{Ack: felix.AckPerBatch, Key: []byte("k")})
	require.NoError(t, err)
	_, err = c.Publish(ctx, topic, []byte("d"), PublishOptions{NoAck: true}) // unacked: binary 0x0001 is original v1
	require.NoError(t, err)
	_, err = c.Publish(ctx, topic, []byte("e"), PublishOptions{NoAck: true, Key: []byte("k")}) // keyed unacked: JSON
	require.NoError(t, err)
	// Start positions and feature requests are refused locally.
	_, err = c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, _, err = cacheDelete(ctx, c, felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "c"}, "k")
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	_, err = c.NewProducer(ctx)
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
	// An acked publish on the same stream: the broker has handled the
	// fire-and-forget ones before it answers.
	_, err = c.Publish(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "barrier"}, []byte("-"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)

	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
	require.NoError(t, err)
	_, err = c.Publish(ctx, topic, []byte("f"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "f", string(ev.Payload))
	require.False(t, ev.HasOffset) // the broker treats the client as v1: no offsets

	require.Equal(t, []felix.Flags{0x0001}, b.seenFlags())
	require.Equal(t, []string{"publish", "publish_batch", "publish", "publish", "subscribe", "publish"}, b.seenTypes())
}

func TestForceJSON(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), ackOffsets: true})
	c := b.dial(t, func(c *Config) { c.ForceJSON = true })
	ctx := testCtx(t)
	res, err := c.PublishBatch(ctx, topic, [][]byte{[]byte("a"), []byte("b")}, PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	require.True(t, res.HasOffset)
	_, err = c.Publish(ctx, topic, []byte("c"), PublishOptions{NoAck: true})
	require.NoError(t, err)
	p, err := c.NewProducer(ctx)
	require.NoError(t, err)
	_, err = p.PublishBatch(ctx, topic, [][]byte{[]byte("d")}, nil)
	require.NoError(t, err)
	require.Empty(t, b.seenFlags())
	require.Equal(t, []string{"publish_batch", "publish", "producer_init", "publish_idempotent"}, b.seenTypes())
}

func TestIdempotentProducerBinary(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), ackOffsets: true})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	p, err := c.NewProducer(ctx)
	require.NoError(t, err)
	require.NotZero(t, p.ID())
	res, err := p.PublishBatch(ctx, topic, [][]byte{[]byte("a")}, []byte("k"))
	require.NoError(t, err)
	require.True(t, res.HasOffset)
	require.Equal(t, []felix.Flags{0x0149}, b.seenFlags())
}

func TestPublishErrors(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	ctx := testCtx(t)
	missing := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "missing"}
	for _, force := range []bool{false, true} {
		c := b.dial(t, func(c *Config) { c.ForceJSON = force })
		_, err := c.Publish(ctx, missing, []byte("a"), PublishOptions{Ack: felix.AckPerBatch})
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.CodeNotFound, be.Code)
		require.Equal(t, felix.RetryAfter, be.RetryClass())
		require.NotZero(t, be.RequestID)
		// The stream stays usable.
		_, err = c.Publish(ctx, topic, []byte("b"), PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	// Without FeatureErrorCodes (JSON) or the ack code flag (binary) the
	// broker's answer is shaped to carry no code.
	for _, force := range []bool{false, true} {
		c := b.dial(t, func(c *Config) {
			c.NoFeatures = true
			c.Flags = felix.DefaultClientFlags() &^ (felix.FlagBinaryPublishAckCode | felix.FlagBinaryPublishAckDetail)
			c.ForceJSON = force
		})
		_, err := c.Publish(ctx, missing, []byte("a"), PublishOptions{Ack: felix.AckPerBatch})
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.ErrorCode(""), be.Code)
		require.Equal(t, felix.RetryFatal, be.RetryClass())
		require.Equal(t, "stream not found", be.Message)
	}
}

func TestSubscribeErrors(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	_, err := c.Subscribe(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "missing"}, SubscribeOptions{})
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotFound, be.Code)
	_, err = c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartAt(99)})
	var ce *felix.CursorError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "in_future", ce.Reason)
	require.EqualValues(t, 99, ce.Requested)
	// queue_capacity where advertised.
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{QueueCapacity: 8})
	require.NoError(t, err)
	require.Equal(t, felix.Some[uint32](8), sub.Info().QueueCapacity)
	// ... and refused where not.
	b2 := startBroker(t, brokerOpts{offer: felix.BrokerOffer{Flags: felix.KnownFlags}})
	c2 := b2.dial(t, nil)
	_, err = c2.Subscribe(ctx, topic, SubscribeOptions{QueueCapacity: 8})
	require.ErrorIs(t, err, felix.ErrNotAdvertised)
}

func TestTerminalFrames(t *testing.T) {
	cases := []struct {
		name  string
		msg   func(id uint64) felix.Message
		check func(t *testing.T, err error)
	}{
		{"shard_moved", func(id uint64) felix.Message {
			return &felix.ShardMoved{SubscriptionID: id, ResumeFrom: felix.Some[uint64](7), NodeID: felix.Some("b2"), Generation: 3}
		}, func(t *testing.T, err error) {
			var e *felix.ShardMovedError
			require.ErrorAs(t, err, &e)
			require.True(t, e.HasResumeFrom)
			require.EqualValues(t, 7, e.ResumeFrom)
			require.Equal(t, "b2", e.NodeID)
		}},
		{"subscription_lagged", func(id uint64) felix.Message {
			return &felix.SubscriptionLagged{SubscriptionID: id, ResumeFrom: 9}
		}, func(t *testing.T, err error) {
			var e *felix.LaggedError
			require.ErrorAs(t, err, &e)
			require.EqualValues(t, 9, e.ResumeFrom)
		}},
		{"stream_deleted", func(id uint64) felix.Message {
			return &felix.StreamDeleted{SubscriptionID: id}
		}, func(t *testing.T, err error) {
			var e *felix.StreamDeletedError
			require.ErrorAs(t, err, &e)
		}},
		{"error", func(id uint64) felix.Message {
			return &felix.ErrorMessage{Message: "revoked", Code: felix.Some(felix.CodeRevoked)}
		}, func(t *testing.T, err error) {
			var e *felix.BrokerError
			require.ErrorAs(t, err, &e)
			require.Equal(t, felix.CodeRevoked, e.Code)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			b := startBroker(t, brokerOpts{offer: fullOffer()})
			c := b.dial(t, nil)
			ctx := testCtx(t)
			sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
			require.NoError(t, err)
			waitFor(t, func() bool { return b.subscribers(topicKey("t1", "ns", "s")) == 1 })
			b.terminate(topicKey("t1", "ns", "s"), tc.msg)
			_, err = sub.Next(ctx)
			tc.check(t, err)
			_, err2 := sub.Next(ctx)
			require.Equal(t, err, err2) // sticky
			var n int
			for _, err := range sub.All(ctx) {
				require.Equal(t, err, err2)
				n++
			}
			require.Equal(t, 1, n)
		})
	}
}

func TestSubscriptionCleanEnd(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
	require.NoError(t, err)
	_, err = c.Publish(ctx, topic, []byte("a"), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	waitFor(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for s := range b.topic(topicKey("t1", "ns", "s")).subs {
			return len(s.ch) == 0
		}
		return false
	})
	b.terminate(topicKey("t1", "ns", "s"), func(uint64) felix.Message { return nil }) // FIN
	var got []string
	for ev, err := range sub.All(ctx) {
		require.NoError(t, err) // io.EOF ends the loop without an error
		got = append(got, string(ev.Payload))
	}
	require.Equal(t, []string{"a"}, got)
	_, err = sub.Next(ctx)
	require.ErrorIs(t, err, io.EOF)

	// A broker going away is a transport error wrapping the close code.
	sub, err = c.Subscribe(ctx, topic, SubscribeOptions{})
	require.NoError(t, err)
	b.close()
	for {
		_, err = sub.Next(ctx)
		if err != nil {
			break
		}
	}
	if !errors.Is(err, io.EOF) { // the broker's FIN may win the race
		var te *TransportError
		require.ErrorAs(t, err, &te)
	}
}

func TestPublishBatchAsync(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), ackOffsets: true})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	type res struct {
		r   felix.PublishResult
		err error
	}
	results := make(chan res, 10)
	done := func(r felix.PublishResult, err error) { results <- res{r, err} }
	require.NoError(t, c.PublishBatchAsync(ctx, topic, [][]byte{[]byte("a"), []byte("b")}, PublishOptions{Ack: felix.AckPerBatch}, done))
	require.NoError(t, c.PublishBatchAsync(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "missing"}, [][]byte{[]byte("x")}, PublishOptions{Ack: felix.AckPerBatch}, done))
	require.NoError(t, c.PublishBatchAsync(ctx, topic, [][]byte{[]byte("c")}, PublishOptions{NoAck: true}, done))
	require.NoError(t, c.PublishBatchAsync(ctx, topic, [][]byte{[]byte("d")}, PublishOptions{Ack: felix.AckPerMessage}, done))
	var offsets []uint64
	var brokerErrs int
	for range 4 {
		r := recv(t, results, "a concurrent call's result")
		if r.err != nil {
			var be *felix.BrokerError
			require.ErrorAs(t, r.err, &be)
			require.NotZero(t, be.RequestID)
			brokerErrs++
			continue
		}
		if r.r.HasOffset {
			offsets = append(offsets, r.r.Offset)
		}
	}
	require.Equal(t, 1, brokerErrs)
	require.ElementsMatch(t, []uint64{0, 3}, offsets)

	// Pending asynchronous publishes fail when the client closes.
	require.NoError(t, c.PublishBatchAsync(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "stall"}, [][]byte{[]byte("s")}, PublishOptions{Ack: felix.AckPerBatch}, done))
	c.Close()
	require.Error(t, (<-results).err)
	require.ErrorIs(t, c.PublishBatchAsync(ctx, topic, nil, PublishOptions{NoAck: true}, done), ErrClosed)
}

func TestServerName(t *testing.T) {
	for _, tc := range []struct {
		cfg  *Config
		addr string
		want string
	}{
		{&Config{}, "127.0.0.1:5000", "localhost"},
		{&Config{}, "[::1]:5000", "localhost"},
		{&Config{}, "broker.example:5000", "broker.example"},
		{&Config{ServerName: "x"}, "broker.example:5000", "x"},
		{&Config{TLS: &tls.Config{ServerName: "y"}}, "127.0.0.1:5000", "y"},
	} {
		require.Equal(t, tc.want, serverName(tc.cfg, tc.addr))
		require.Equal(t, tc.want, clientTLS(tc.cfg.TLS, serverName(tc.cfg, tc.addr), false).ServerName)
	}
	c := clientTLS(&tls.Config{NextProtos: []string{"h3"}}, "x", false)
	require.Empty(t, c.NextProtos)
	require.Equal(t, []string{ALPN}, clientTLS(nil, "x", true).NextProtos)
	require.EqualValues(t, tls.VersionTLS13, c.MinVersion)
}

func TestPublishRefused(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	ctx := testCtx(t)
	for _, force := range []bool{false, true} {
		c := b.dial(t, func(c *Config) { c.ForceJSON = force })
		p, err := c.NewProducer(ctx)
		require.NoError(t, err)
		_, err = p.PublishBatch(ctx, topic, [][]byte{[]byte("refuse")}, nil)
		var pr *felix.PublishRefusedError
		require.ErrorAs(t, err, &pr)
		require.Equal(t, "sequence_reused", pr.Reason)
		require.Equal(t, felix.RefusalSequenceReused, pr.Refusal.Reason.Kind)
		require.Contains(t, pr.Error(), "sequence_reused")
		_, err = p.PublishBatch(ctx, topic, [][]byte{[]byte("ok")}, nil)
		require.NoError(t, err)
	}
	require.Equal(t, []felix.Flags{0x0109, 0x0109}, b.seenFlags())
}

func TestErrorStrings(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{&felix.BrokerError{Type: "error", RequestID: 3, Message: "no", Code: felix.CodeOverloaded, Retry: felix.RetryAfter, Reason: "busy"},
			[]string{"request 3", "no", "overloaded", "retry_after", "busy"}},
		{&felix.NotLeaderError{NodeID: "b2", Addr: "h:1", Generation: 4}, []string{"b2", "h:1", "4"}},
		{&felix.CursorError{Reason: "too_old", Requested: 1, Available: 5}, []string{"too_old", "1", "5"}},
		{&felix.ShardMovedError{SubscriptionID: 7, NodeID: "b3"}, []string{"7", "b3"}},
		{&felix.LaggedError{SubscriptionID: 8, ResumeFrom: 9}, []string{"8", "9"}},
		{&felix.LaggedError{ResumeFrom: 9, Watch: true}, []string{"watch", "9"}},
		{&felix.StreamDeletedError{SubscriptionID: 10}, []string{"10", "deleted"}},
		{&TransportError{Op: "dial", Err: io.ErrUnexpectedEOF}, []string{"dial", "unexpected EOF"}},
	} {
		for _, w := range tc.want {
			require.Contains(t, tc.err.Error(), w)
		}
	}
	require.ErrorIs(t, &TransportError{Op: "x", Err: io.ErrUnexpectedEOF}, io.ErrUnexpectedEOF)
	require.ErrorIs(t, &felix.BrokerError{Auth: true}, felix.ErrAuthRefused)
	require.NotErrorIs(t, &felix.BrokerError{}, felix.ErrAuthRefused)
	require.Equal(t, felix.RetryRetry, (&felix.BrokerError{Code: felix.CodeDraining}).RetryClass())
}

func TestQUICConfigDefaults(t *testing.T) {
	q := quicConfig(nil, false)
	require.Equal(t, DefaultKeepAlive, q.KeepAlivePeriod)
	require.Equal(t, DefaultIdleTimeout, q.MaxIdleTimeout)
	require.EqualValues(t, DefaultMaxEventStreams, q.MaxIncomingUniStreams) // one per subscription
	require.EqualValues(t, -1, q.MaxIncomingStreams)                        // brokers open no bidi streams
	require.GreaterOrEqual(t, q.MaxStreamReceiveWindow, uint64(felix.DefaultMaxFrameBytes))
	s := quicConfig(nil, true)
	require.EqualValues(t, 1024, s.MaxIncomingStreams, "docs/transport.md §4: 1024 per direction")
	require.EqualValues(t, 1024, s.MaxIncomingUniStreams)
	require.EqualValues(t, DefaultMaxConnReceiveWindow, s.MaxConnectionReceiveWindow, "the window after auth, not the request budget")
	// Overrides are cloned; zero keep-alive and stream limits are raised.
	base := &quic.Config{MaxIdleTimeout: time.Second, MaxIncomingUniStreams: 5}
	o := quicConfig(base, false)
	require.Equal(t, time.Second, o.MaxIdleTimeout)
	require.EqualValues(t, 5, o.MaxIncomingUniStreams)
	require.Equal(t, DefaultKeepAlive, o.KeepAlivePeriod)
	require.Zero(t, base.KeepAlivePeriod)
}

func TestProducerSequencesPerRoute(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	ctx := testCtx(t)
	for _, force := range []bool{false, true} {
		c := b.dial(t, func(c *Config) { c.ForceJSON = force })
		p, err := c.NewProducer(ctx)
		require.NoError(t, err)
		a, bt := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "a"}, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "b"}
		for _, step := range []struct {
			t   felix.Topic
			key []byte
		}{{a, nil}, {a, nil}, {bt, nil}, {a, []byte("k")}, {a, nil}} {
			_, err := p.PublishBatch(ctx, step.t, [][]byte{[]byte("x")}, step.key)
			require.NoError(t, err)
		}
		// Cancelled before the write: the sequence is not consumed.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = p.PublishBatch(cctx, a, [][]byte{[]byte("x")}, nil)
		require.ErrorIs(t, err, context.Canceled)
		_, err = p.PublishBatch(ctx, a, [][]byte{[]byte("x")}, nil)
		require.NoError(t, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	want := []string{"a/:0", "a/:1", "b/:0", "a/k:0", "a/:2", "a/:3"}
	require.Equal(t, append(append([]string{}, want...), want...), b.seqs)
}

// TestSubscribeRecycledBuffers reads frames of varying sizes through the
// default subscription's one recycled buffer.
func TestSubscribeRecycledBuffers(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	for i := range 20 {
		_, err := c.PublishBatch(ctx, topic, [][]byte{[]byte(fmt.Sprint(i)), make([]byte, 100*i)}, PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
	}
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartAt(0)})
	require.NoError(t, err)
	for i := range 40 {
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.EqualValues(t, i, ev.Offset)
		if i%2 == 0 {
			require.Equal(t, fmt.Sprint(i/2), string(ev.Payload))
		} else {
			require.Len(t, ev.Payload, 100*(i/2))
		}
	}
	// Live frames of varying sizes through the one buffer.
	for i := range 6 {
		_, err := c.Publish(ctx, topic, bytes.Repeat([]byte{byte('a' + i)}, 1+(5-i)*3000), PublishOptions{Ack: felix.AckPerBatch})
		require.NoError(t, err)
		ev, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, bytes.Repeat([]byte{byte('a' + i)}, 1+(5-i)*3000), ev.Payload)
	}
}
