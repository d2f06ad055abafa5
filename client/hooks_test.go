package client_test

import (
	"sync"
	"testing"
	"time"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/stretchr/testify/require"
)

// clientHooks records the cluster-level conn.Hooks.
type clientHooks struct {
	mu        sync.Mutex
	redirects []conn.RedirectInfo
	retries   []conn.RetryInfo
	resumes   []conn.ResumeInfo
	lags      []conn.LagInfo
}

func (h *clientHooks) install(cfg *client.Config) {
	hk := &conn.Hooks{
		Redirect:           func(e conn.RedirectInfo) { h.mu.Lock(); h.redirects = append(h.redirects, e); h.mu.Unlock() },
		Retry:              func(e conn.RetryInfo) { h.mu.Lock(); h.retries = append(h.retries, e); h.mu.Unlock() },
		Resume:             func(e conn.ResumeInfo) { h.mu.Lock(); h.resumes = append(h.resumes, e); h.mu.Unlock() },
		SubscriptionLagged: func(e conn.LagInfo) { h.mu.Lock(); h.lags = append(h.lags, e); h.mu.Unlock() },
	}
	cfg.Conn.Hooks = hk
}

// A redirect and a lag reach the hooks and the notices with the same data.
func TestHooksRedirectAndLag(t *testing.T) {
	real := startBroker(t)
	fake := startFake(t, real.addr, false)
	var h clientHooks
	c, n := newClient(t, []string{fake.addr()}, func(cfg *client.Config) { cfg.NoDiscovery = true; h.install(cfg) })
	sub, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{})
	require.NoError(t, err)
	sub.Close()
	r := n.wait(t, client.NoticeRedirect, nil)
	h.mu.Lock()
	require.Equal(t, []conn.RedirectInfo{{Op: "subscribe", From: fake.addr(), To: real.addr, Attempt: r.Attempt, Err: r.Err}}, h.redirects)
	h.mu.Unlock()

	// The fake ends shard 1 at once with subscription_lagged.
	lagged, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{Shard: 1, LagAsError: true})
	require.NoError(t, err)
	defer lagged.Close()
	_, err = lagged.Next(ctxT(t))
	var le *conn.LaggedError
	require.ErrorAs(t, err, &le)
	ln := n.wait(t, client.NoticeLagged, nil)
	require.Equal(t, uint64(5), ln.Offset)
	require.Equal(t, fake.addr(), ln.Addr)
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, []conn.LagInfo{{SubscriptionID: 77, ResumeFrom: 5}}, h.lags)
}

// A subscription resumed on another broker after its broker stopped, and
// a publish retried against a stopped broker, reach the hooks.
func TestHooksResumeAndRetry(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	var h clientHooks
	c, n := newClient(t, []string{a.addr, b.addr}, func(cfg *client.Config) { h.install(cfg) })
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
	sub.Close()
	<-got
	h.mu.Lock()
	require.Len(t, h.resumes, 1)
	require.Equal(t, conn.ResumeInfo{Op: "subscribe", Addr: rn.Addr, Stream: topic.Stream, Offset: rn.Offset, Err: rn.Err}, h.resumes[0])
	require.NotEqual(t, serving.addr, h.resumes[0].Addr)
	require.Error(t, h.resumes[0].Err)
	h.mu.Unlock()

	// A publish to the stopped broker alone is retried once, then fails.
	var hr clientHooks
	dead, n2 := newClient(t, []string{serving.addr}, func(cfg *client.Config) {
		hr.install(cfg)
		cfg.MaxAttempts = 1
		cfg.DialTimeout = 200 * time.Millisecond
	})
	_, err = dead.Publish(ctxT(t), topic, []byte("x"), acked)
	require.Error(t, err)
	rt := n2.wait(t, client.NoticeRetry, nil)
	hr.mu.Lock()
	defer hr.mu.Unlock()
	require.Equal(t, []conn.RetryInfo{{Op: rt.Op, Addr: serving.addr, Attempt: 1, Delay: rt.Delay, Err: rt.Err}}, hr.retries)
}
