package client_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
)

// recorder keeps every notice it observes.
type recorder struct {
	mu  sync.Mutex
	evs []client.Notice
}

func (r *recorder) add(ev client.Notice) { r.mu.Lock(); r.evs = append(r.evs, ev); r.mu.Unlock() }

func (r *recorder) all() []client.Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]client.Notice(nil), r.evs...)
}

// lagHooks records the conn-level SubscriptionLagged events.
type lagHooks struct {
	mu   sync.Mutex
	lags []conn.LagInfo
}

func (h *lagHooks) hooks() *conn.Hooks {
	return &conn.Hooks{SubscriptionLagged: func(e conn.LagInfo) { h.mu.Lock(); h.lags = append(h.lags, e); h.mu.Unlock() }}
}

// Several notice observers (client.JoinNotices) see the same notices in
// the same order, the logger built on the same mechanism writes them, two
// joined conn hook sets (conn.JoinHooks) both see the lag, and Stats
// counts exactly one redirect and one lag.
func TestObserversJoinedRedirectAndLag(t *testing.T) {
	real := startBroker(t)
	fake := startFake(t, real.addr, false)
	var second recorder
	var h1, h2 lagHooks
	var logged bytes.Buffer
	var logMu sync.Mutex
	c, n := newClient(t, []string{fake.addr()}, func(cfg *client.Config) {
		cfg.NoDiscovery = true
		cfg.OnNotice = client.JoinNotices(cfg.OnNotice, nil, second.add)
		cfg.Conn.Hooks = conn.JoinHooks(h1.hooks(), nil, h2.hooks())
		cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logged}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	sub, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{})
	require.NoError(t, err)
	sub.Close()
	r := n.wait(t, client.NoticeRedirect, nil)
	require.Equal(t, "subscribe", r.Op)
	require.Equal(t, fake.addr(), r.Addr)
	require.Equal(t, real.addr, r.Target)

	// The fake ends shard 1 at once with subscription_lagged.
	lagged, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{Shard: 1, LagAsError: true})
	require.NoError(t, err)
	defer lagged.Close()
	_, err = lagged.Next(ctxT(t))
	var le *felix.LaggedError
	require.ErrorAs(t, err, &le)
	ln := n.wait(t, client.NoticeLagged, nil)
	require.Equal(t, uint64(5), ln.Offset)

	first := n.snapshot()
	require.Equal(t, first, second.all(), "every joined observer sees every notice, in order")
	for _, h := range []*lagHooks{&h1, &h2} {
		h.mu.Lock()
		require.Equal(t, []conn.LagInfo{{SubscriptionID: 77, ResumeFrom: 5}}, h.lags)
		h.mu.Unlock()
	}
	logMu.Lock()
	out := logged.String()
	logMu.Unlock()
	require.Contains(t, out, "event=redirect op=subscribe addr="+fake.addr()+" target="+real.addr)
	require.Contains(t, out, "event=lagged op=subscribe")
	require.Equal(t, len(first), strings.Count(out, `msg="felix client" event=`),
		"the logger writes each notice once")

	st := c.Stats()
	require.Equal(t, uint64(1), st.Redirects)
	require.Equal(t, uint64(1), st.Lagged)
	require.Equal(t, uint64(0), st.Retries)
	require.Equal(t, uint64(n.count(client.NoticeConnected)), st.Connects)
	require.Equal(t, 2, st.Connections, "the fake and the real broker")
	require.Zero(t, st.InFlight)
}

// snapshot returns every notice n has received so far.
func (n *notices) snapshot() []client.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]client.Notice(nil), n.list...)
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// A subscription resumed on another broker after its broker stopped, and
// a publish retried against a stopped broker, are counted by Stats.
func TestStatsResumeAndRetry(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	c, n := newClient(t, []string{a.addr, b.addr}, nil)
	sub, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	serving := a
	if n.wait(t, client.NoticeConnected, nil).Addr == b.addr {
		serving = b
	}
	got := make(chan error, 1)
	go func() { _, err := sub.Next(ctxT(t)); got <- err }()
	serving.stop()
	rn := n.wait(t, client.NoticeResumed, nil)
	require.NotEqual(t, serving.addr, rn.Addr)
	sub.Close()
	<-got
	st := c.Stats()
	require.Equal(t, uint64(1), st.Resumes)
	require.Equal(t, uint64(1), st.Disconnects)
	require.Equal(t, 1, st.Connections, "the stopped broker's connection is gone")

	// A publish to the stopped broker alone fails after its one dial (the
	// only broker failed to connect: no retry dials it again), counted.
	dead, n2 := newClient(t, []string{serving.addr}, func(cfg *client.Config) {
		cfg.MaxAttempts = 1
		cfg.DialTimeout = 200 * time.Millisecond
	})
	_, err = dead.Publish(ctxT(t), topic, []byte("x"), acked)
	require.ErrorIs(t, err, conn.ErrNoAnswer)
	st = dead.Stats()
	require.Zero(t, st.Retries)
	require.Zero(t, n2.count(client.NoticeRetry))
	require.Equal(t, uint64(n2.count(client.NoticeDialFailed)), st.DialFailures)
	require.Equal(t, uint64(1), st.DialFailures)
	require.Zero(t, st.PublishesAcked)
	require.Zero(t, st.Connections)
	require.Zero(t, st.InFlight)
}

// Stats over a real broker: exact publish counts, the connection, bytes
// that grow with what was sent and survive Close, and an ambiguous publish
// against a scripted broker that drops the connection before its ack.
func TestStatsPublishesAndBytes(t *testing.T) {
	b := startBroker(t)
	c, _ := newClient(t, []string{b.addr}, nil)
	require.Zero(t, c.Stats().Connections)
	payload := bytes.Repeat([]byte("p"), 10_000)
	const acks, fires = 5, 3
	for range acks {
		_, err := c.Publish(ctxT(t), topic, payload, acked)
		require.NoError(t, err)
	}
	for range fires {
		_, err := c.Publish(ctxT(t), topic, payload, client.PublishOptions{NoAck: true})
		require.NoError(t, err)
	}
	require.NoError(t, c.Flush(ctxT(t)))
	st := c.Stats()
	require.Equal(t, uint64(acks), st.PublishesAcked)
	require.Zero(t, st.PublishesAmbiguous)
	require.Equal(t, 1, st.Connections)
	require.Equal(t, uint64(1), st.Connects)
	require.Zero(t, st.InFlight)
	require.Greater(t, st.BytesSent, uint64((acks+fires)*len(payload)), "every payload crossed the transport")
	require.NotZero(t, st.BytesReceived)
	require.NoError(t, c.Close())
	after := c.Stats()
	require.Zero(t, after.Connections)
	require.GreaterOrEqual(t, after.BytesSent, st.BytesSent, "a closed connection's bytes stay counted")
	require.GreaterOrEqual(t, after.BytesReceived, st.BytesReceived)

	fake := startFake(t, b.addr, true)
	fc, _ := newClient(t, []string{fake.addr()}, func(cfg *client.Config) { cfg.NoDiscovery = true })
	_, err := fc.Publish(ctxT(t), topic, []byte("once"), acked)
	require.ErrorIs(t, err, client.ErrAmbiguous)
	fst := fc.Stats()
	require.Equal(t, uint64(1), fst.PublishesAmbiguous)
	require.Equal(t, uint64(1), fst.Ambiguous)
	require.Zero(t, fst.PublishesAcked)
	require.Zero(t, fst.Retries, "an ambiguous publish is not retried")
}

// InFlight counts a call while it waits for its answer (once, through the
// publish fast path and the retry loop alike) and not after it returns.
func TestStatsInFlight(t *testing.T) {
	real := startBroker(t)
	fake := startFake(t, real.addr, false) // leaves publishes unanswered
	c, _ := newClient(t, []string{fake.addr()}, func(cfg *client.Config) { cfg.NoDiscovery = true })
	require.NoError(t, c.Connect(ctxT(t)))
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 2)
	for range 2 {
		go func() { _, err := c.Publish(ctx, topic, []byte("x"), acked); done <- err }()
	}
	waitFor(t, func() bool { return c.Stats().InFlight == 2 }, "two publishes in flight")
	cancel()
	for range 2 {
		require.Error(t, <-done)
	}
	require.Zero(t, c.Stats().InFlight)
}
