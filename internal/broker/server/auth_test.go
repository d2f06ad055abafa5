package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

func TestParseTokens(t *testing.T) {
	toks, err := server.ParseTokens("tA:a1, tB:b1:bob\n# comment\ntC:c1:carol:publish|cache.read\ntD:d1::none")
	require.NoError(t, err)
	require.Equal(t, server.Identity{Tenant: "tA", Principal: "tA"}, toks["a1"])
	require.Equal(t, server.Identity{Tenant: "tB", Principal: "bob"}, toks["b1"])
	c := toks["c1"]
	require.True(t, c.Allows(server.PermPublish|server.PermCacheRead))
	require.False(t, c.Allows(server.PermSubscribe))
	require.False(t, c.Allows(server.PermCacheWrite))
	require.Equal(t, server.Identity{Tenant: "tD", Principal: "tD", Deny: server.PermAll}, toks["d1"])

	_, err = server.ParseTokens("tA:shared,tB:shared")
	require.ErrorContains(t, err, "listed twice")
	require.NotContains(t, err.Error(), "shared", "errors never quote a token")
	_, err = server.ParseTokens("tA:same,tA:same")
	require.Error(t, err, "a duplicate is refused even with the same identity")
	_, err = server.ParseTokens("tA:x:p:fly")
	require.ErrorContains(t, err, "unknown permission")
	_, err = server.ParseTokens("tA")
	require.Error(t, err)
}

// authAnswer opens a stream on qc, sends auth and returns the answer.
func authAnswer(t *testing.T, qc *quic.Conn, tenant, token string) felix.Message {
	t.Helper()
	st, err := qc.OpenStreamSync(ctxT(t))
	require.NoError(t, err)
	s := &rawStream{t: t, s: st, r: felix.NewReader(st)}
	s.send(&felix.Auth{TenantID: tenant, Token: token, ClientFlags: felix.Some(uint16(rawFlags)),
		ClientFeatures: felix.Some(uint32(felix.FeatureErrorCodes))})
	m := s.recv()
	st.CancelRead(0)
	st.Close()
	return m
}

// An unknown token and a token of another tenant get the very same
// answer: the refusal tells a guesser nothing.
func TestAuthOneRefusal(t *testing.T) {
	toks, err := server.ParseTokens("tA:tokA,tB:tokB")
	require.NoError(t, err)
	srv := startBroker(t, server.Config{Tokens: toks})
	r := dialRaw(t, srv)
	unknown := authAnswer(t, r.qc, "tA", "nope")
	other := authAnswer(t, r.qc, "tA", "tokB")
	require.Equal(t, unknown, other)
	em, ok := unknown.(*felix.ErrorMessage)
	require.True(t, ok, "%T", unknown)
	require.Equal(t, "auth failed", em.Message)
	require.Equal(t, felix.CodeUnauthenticated, em.Code.V)
	require.IsType(t, &felix.AuthOK{}, authAnswer(t, r.qc, "tA", "tokA"))
}

// logSink collects log records.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// guessAnswer checks that m is one of the two refusals a guess may get.
func guessAnswer(t *testing.T, m felix.Message) (throttled bool) {
	t.Helper()
	em, ok := m.(*felix.ErrorMessage)
	require.True(t, ok, "%T", m)
	if em.Message == "auth failed" {
		require.Equal(t, felix.CodeUnauthenticated, em.Code.V)
		return false
	}
	require.Equal(t, "auth throttled", em.Message, "checked or throttled, nothing else")
	require.Equal(t, felix.CodeOverloaded, em.Code.V)
	require.Equal(t, felix.RetryAfter, em.Retry.V)
	require.True(t, em.Detail.Set && em.Detail.V.RetryAfterMs.Set && em.Detail.V.RetryAfterMs.V > 0, "%+v", em)
	return true
}

// A guesser on many connections from one address gets at most
// burst + rate×elapsed failures answered within the wait, plus one per
// connection (the failure over the budget bars its connection); every
// guess gets one of the two refusals; refusals are logged at warn at most
// once a second, without the token; a client from another address
// authenticates at once; and a client connected before the attack keeps
// being served.
func TestAuthThrottlePerAddress(t *testing.T) {
	const burst, rate, guesses, conns = 10, 50.0, 300, 4
	var sink logSink
	cfg := durableCfg()
	cfg.AuthLimits = server.AuthLimits{AddrBurst: burst, AddrRate: rate, ConnBurst: 1 << 20, ConnRate: 1 << 20,
		GlobalBurst: 1 << 20, GlobalRate: 1 << 20, MaxWait: 50 * time.Millisecond}
	cfg.Logger = slog.New(slog.NewTextHandler(&sink, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv := startBroker(t, cfg)
	good := dial(t, srv, nil)
	ctx := ctxT(t)
	sub, err := good.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()
	checkServing(t, good) // opens its publish and cache streams
	_, err = sub.Next(ctx)
	require.NoError(t, err)

	start := time.Now()
	var wg sync.WaitGroup
	answers := make(chan felix.Message, guesses)
	for c := range conns {
		r := dialRaw(t, srv)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := c*8 + g; i < guesses; i += 32 {
					answers <- authAnswer(t, r.qc, server.DemoTenant, "guess-secret-"+string(rune('a'+i%26)))
				}
			}()
		}
	}
	// Meanwhile: the connected client is served, and a client from
	// another address authenticates a fresh stream at once.
	checkServing(t, good)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "still here", string(ev.Payload))
	other := dialFrom(t, srv, "127.0.0.2")
	require.IsType(t, &felix.AuthOK{}, authAnswer(t, other, server.DemoTenant, server.DemoToken))

	wg.Wait()
	elapsed := time.Since(start)
	close(answers)
	n, throttled := 0, 0
	for m := range answers {
		if guessAnswer(t, m) {
			throttled++
		}
		n++
	}
	require.Equal(t, guesses, n)
	st := srv.Stats()
	require.Equal(t, uint64(throttled), st.AuthThrottled)
	require.LessOrEqual(t, float64(st.AuthFailures), burst+rate*elapsed.Seconds()+conns+1,
		"checked guesses are bounded by the throttle (elapsed %v)", elapsed)
	logs := sink.String()
	lines := strings.Count(logs, "auth refused")
	require.GreaterOrEqual(t, lines, 1)
	require.LessOrEqual(t, float64(lines), 1+time.Since(start).Seconds()+1, "refusal logs are rate-limited")
	require.NotContains(t, logs, "guess-secret")
	require.Contains(t, logs, "level=WARN")
}

// One connection gets its own, smaller budget: beyond it, the connection
// is barred (even a valid token is then refused unchecked on it, or a
// guesser would keep guessing there); another connection from the same
// address is served at once.
func TestAuthThrottlePerConnection(t *testing.T) {
	const guesses = 20
	cfg := durableCfg()
	cfg.AuthLimits = server.AuthLimits{AddrBurst: 1 << 20, AddrRate: 1 << 20, GlobalBurst: 1 << 20, GlobalRate: 1 << 20,
		ConnBurst: 3, ConnRate: 1, MaxWait: 100 * time.Millisecond}
	srv := startBroker(t, cfg)
	r := dialRaw(t, srv)
	start := time.Now()
	throttled := 0
	for range guesses {
		if guessAnswer(t, authAnswer(t, r.qc, server.DemoTenant, "bad")) {
			throttled++
		}
	}
	elapsed := time.Since(start)
	st := srv.Stats()
	require.Equal(t, uint64(throttled), st.AuthThrottled)
	require.Equal(t, uint64(guesses), st.AuthFailures+st.AuthThrottled-1, "one failure both checked and throttled: the one that barred")
	require.LessOrEqual(t, float64(st.AuthFailures), 3+elapsed.Seconds()+1+1)
	require.True(t, guessAnswer(t, authAnswer(t, r.qc, server.DemoTenant, server.DemoToken)), "the barred connection checks nothing more")
	fresh := dialRaw(t, srv)
	require.IsType(t, &felix.AuthOK{}, authAnswer(t, fresh.qc, server.DemoTenant, server.DemoToken))
	checkServing(t, dial(t, srv, nil))
}

// Issue 22 #3: guesses from the legitimate client's own address (one NAT)
// never refuse or delay its valid token: every one of its new connections
// authenticates at once, in less than the wait the guesses get, while the
// guesser's checked failures stay bounded.
func TestAuthThrottleSparesValidTokenBehindOneAddress(t *testing.T) {
	// 8 guessers held one at a time per connection keep the budget
	// 8/rate seconds in debt, over maxWait: failures are throttled.
	const burst, rate, conns = 4, 1.0, 8
	const maxWait = 2 * time.Second
	cfg := durableCfg()
	cfg.AuthLimits = server.AuthLimits{AddrBurst: burst, AddrRate: rate, ConnBurst: 1 << 20, ConnRate: 1 << 20,
		GlobalBurst: burst, GlobalRate: rate, MaxWait: maxWait}
	srv := startBroker(t, cfg)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var dials atomic.Int64
	start := time.Now()
	for range conns {
		wg.Go(func() {
			guessUntil(t, stop, func() *quic.Conn { return dialRaw(t, srv).qc }, "guess", &dials, nil)
		})
	}
	// The guessers are over the budgets once a failure was throttled.
	waitFor(t, func() bool { return srv.Stats().AuthThrottled > 0 })
	for range 13 {
		qc := dialRaw(t, srv).qc
		t0 := time.Now()
		require.IsType(t, &felix.AuthOK{}, authAnswer(t, qc, server.DemoTenant, server.DemoToken))
		require.Less(t, time.Since(t0), maxWait, "a valid token is never held back")
		_ = qc.CloseWithError(0, "")
	}
	checkServing(t, dial(t, srv, nil))
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	st := srv.Stats()
	require.Greater(t, st.AuthDelayed, uint64(0), "failures within the budget are held back")
	require.LessOrEqual(t, float64(st.AuthFailures), burst+rate*elapsed.Seconds()+float64(dials.Load())+1,
		"one check per budget token, or per new connection beyond the budget (elapsed %v)", elapsed)
}

// Issue 22 #2: guessers spread over many source addresses (each under its
// own address budget) are held to the broker-wide budget: at most
// burst + rate×elapsed failures answered, plus one per connection (each
// connection over the budget is barred after one check). The throttle
// remembers at most MaxAddrs addresses, and a valid token from one of the
// guessing addresses authenticates at once throughout.
func TestAuthThrottleBrokerWide(t *testing.T) {
	const burst, rate, addrs, maxAddrs = 8, 10.0, 16, 6
	cfg := durableCfg()
	cfg.AuthLimits = server.AuthLimits{AddrBurst: 1 << 20, AddrRate: 1 << 20, ConnBurst: 1 << 20, ConnRate: 1 << 20,
		GlobalBurst: burst, GlobalRate: rate, MaxWait: 100 * time.Millisecond, MaxAddrs: maxAddrs}
	srv := startBroker(t, cfg)
	good := dial(t, srv, nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var dials, answered atomic.Int64
	maxTracked := 0
	start := time.Now()
	for i := range addrs {
		ip := "127.0.0." + strconv.Itoa(10+i)
		wg.Go(func() {
			guessUntil(t, stop, func() *quic.Conn { return dialFrom(t, srv, ip) }, "guess-"+ip, &dials, &answered)
		})
	}
	for answered.Load() < 400 {
		qc := dialFrom(t, srv, "127.0.0.10")
		t0 := time.Now()
		require.IsType(t, &felix.AuthOK{}, authAnswer(t, qc, server.DemoTenant, server.DemoToken))
		require.Less(t, time.Since(t0), time.Second, "a valid token is never held back")
		_ = qc.CloseWithError(0, "")
		checkServing(t, good)
		a, _ := srv.Snapshot().ThrottledAddrs, 0
		maxTracked = max(maxTracked, a)
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	st := srv.Stats()
	t.Logf("%d guesses answered in %v: %d checked, %d throttled, %d connections", answered.Load(), elapsed,
		st.AuthFailures, st.AuthThrottled, dials.Load())
	require.LessOrEqual(t, float64(st.AuthFailures), burst+rate*elapsed.Seconds()+float64(dials.Load())+1)
	require.LessOrEqual(t, maxTracked, maxAddrs, "address buckets are bounded")
}

// guessUntil guesses token on connections from dial until stop, as a
// guesser does: a barred (or timed out) connection is replaced by a new
// one. It counts the connections in dials and the answers in answered
// (when not nil).
func guessUntil(t *testing.T, stop <-chan struct{}, dial func() *quic.Conn, token string, dials, answered *atomic.Int64) {
	qc := dial()
	dials.Add(1)
	for {
		select {
		case <-stop:
			return
		default:
		}
		m, err := tryAuth(ctxT(t), qc, server.DemoTenant, token)
		if err == nil && answered != nil {
			answered.Add(1)
		}
		if err != nil || guessAnswer(t, m) {
			_ = qc.CloseWithError(0, "")
			qc = dial()
			dials.Add(1)
		}
	}
}

// tryAuth is authAnswer for a goroutine: errors are returned.
func tryAuth(ctx context.Context, qc *quic.Conn, tenant, token string) (felix.Message, error) {
	st, err := qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	defer st.CancelRead(0)
	b, err := felix.AppendMessageFrame(nil, &felix.Auth{TenantID: tenant, Token: token, ClientFlags: felix.Some(uint16(rawFlags)),
		ClientFeatures: felix.Some(uint32(felix.FeatureErrorCodes))})
	if err != nil {
		return nil, err
	}
	if _, err := st.Write(b); err != nil {
		return nil, err
	}
	r := felix.NewReader(st)
	f, err := r.ReadFrame()
	if err != nil {
		return nil, err
	}
	return felix.DecodeMessage(f.Payload)
}

// dialFrom dials the broker from a given local IP (a second loopback
// address stands for another client machine).
func dialFrom(t *testing.T, srv *server.Server, ip string) *quic.Conn {
	t.Helper()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	require.NoError(t, err)
	tr := &quic.Transport{Conn: udp}
	ua, err := net.ResolveUDPAddr("udp", srv.Addr().String())
	require.NoError(t, err)
	qc, err := tr.Dial(ctxT(t), ua, &tls.Config{RootCAs: srv.CertPool(), ServerName: "localhost"},
		&quic.Config{MaxIdleTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = qc.CloseWithError(0, "")
		_ = tr.Close()
		_ = udp.Close()
	})
	return qc
}

// Scoped tokens: a token that authenticates but lacks a permission gets a
// typed forbidden answer (fatal), on every path; what it may do works.
func TestTokenPermissions(t *testing.T) {
	toks, err := server.ParseTokens("t1:full:alice,t1:reader:rita:subscribe|cache.read,t1:nothing:nobody:none")
	require.NoError(t, err)
	cfg := durableCfg()
	cfg.Tokens = toks
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	as := func(tok string) *conn.Client {
		return dial(t, srv, func(c *conn.Config) { c.Token = tok })
	}
	forbidden := func(err error) {
		t.Helper()
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.CodeForbidden, be.Code)
		require.Equal(t, felix.RetryFatal, be.RetryClass())
	}
	full, reader, nothing := as("full"), as("reader"), as("nothing")
	ref := felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "c"}
	require.NoError(t, api.New(full).CachePut(ctx, ref, "k", []byte("v"), 0))

	_, err = reader.Publish(ctx, topic, []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
	forbidden(err)
	forbidden(api.New(reader).CachePut(ctx, ref, "k", []byte("w"), 0))
	v, found, err := api.New(reader).CacheGet(ctx, ref, "k")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "v", string(v))
	sub, err := reader.Subscribe(ctx, topic, conn.SubscribeOptions{})
	require.NoError(t, err)
	defer sub.Close()

	_, err = nothing.Subscribe(ctx, topic, conn.SubscribeOptions{})
	forbidden(err)
	_, err = nothing.Publish(ctx, topic, []byte("x"), conn.PublishOptions{Ack: felix.AckPerBatch})
	forbidden(err)
	_, _, err = api.New(nothing).CacheGet(ctx, ref, "k")
	forbidden(err)

	_, err = full.Publish(ctx, topic, []byte("ok"), conn.PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "ok", string(ev.Payload))
	require.Equal(t, uint64(1), srv.Stats().Engine.PublishedRecords, "nothing forbidden was written")
}
