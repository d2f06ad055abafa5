package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shardsOf reads a stream_shards answer as its shard count (0 for an
// unknown stream) and routing (absent routing is modulo, the zero value).
func shardsOf(v *felix.StreamShardsView, err error) (uint32, felix.Routing, error) {
	if err != nil {
		return 0, 0, err
	}
	return v.Shards, v.Routing.V, nil
}

// certs is one certificate shared by every test broker, so one client
// trusts them all.
var certs = sync.OnceValues(func() (*tls.Config, error) {
	tc, _, err := conn.SelfSigned("localhost")
	return tc, err
})

// broker is a restartable single-node reference broker on a fixed address.
type broker struct {
	t    testing.TB
	addr string
	cfg  server.Config
	mu   sync.Mutex
	srv  *server.Server
	done chan error
}

func startBroker(t testing.TB) *broker { t.Helper(); return startBrokerCfg(t, nil) }

func startBrokerCfg(t testing.TB, adjust func(*server.Config)) *broker {
	t.Helper()
	tc, err := certs()
	require.NoError(t, err)
	b := &broker{t: t, addr: "127.0.0.1:0"}
	b.cfg.TLS = tc
	b.cfg.Engine.DefaultStream.Durable = true
	if adjust != nil {
		adjust(&b.cfg)
	}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *broker) start() {
	b.t.Helper()
	cfg := b.cfg
	cfg.Addr = b.addr
	srv, err := server.Listen(cfg)
	require.NoError(b.t, err)
	b.addr = srv.Addr().String()
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	b.mu.Lock()
	b.srv, b.done = srv, done
	b.mu.Unlock()
}

// stop shuts the broker down gracefully (idempotent).
func (b *broker) stop() {
	b.mu.Lock()
	srv, done := b.srv, b.done
	b.srv = nil
	b.mu.Unlock()
	if srv == nil {
		return
	}
	require.NoError(b.t, srv.Close())
	require.NoError(b.t, <-done)
}

func (b *broker) server() *server.Server {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.srv
}

// connConfig is the per-connection configuration of the test clients: a
// short idle timeout so that lost links are noticed quickly.
func connConfig(t testing.TB) conn.Config {
	tc, err := certs()
	require.NoError(t, err)
	pool := tc.Certificates[0].Leaf
	roots := newPool(pool.Raw)
	return conn.Config{TLS: &tls.Config{RootCAs: roots, ServerName: "localhost"}, TenantID: server.DemoTenant, Token: server.DemoToken,
		IdleTimeout: 1500 * time.Millisecond, KeepAlive: 300 * time.Millisecond}
}

// notices records a client's notices.
type notices struct {
	mu   sync.Mutex
	list []client.Notice
	ch   chan client.Notice
}

func newNotices() *notices { return &notices{ch: make(chan client.Notice, 1024)} }

func (n *notices) add(ev client.Notice) {
	n.mu.Lock()
	n.list = append(n.list, ev)
	n.mu.Unlock()
	select {
	case n.ch <- ev:
	default:
	}
}

func (n *notices) count(k client.NoticeKind) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, ev := range n.list {
		if ev.Kind == k {
			c++
		}
	}
	return c
}

// wait returns the first notice of kind k whose match holds.
func (n *notices) wait(t testing.TB, k client.NoticeKind, match func(client.Notice) bool) client.Notice {
	t.Helper()
	n.mu.Lock()
	for _, ev := range n.list {
		if ev.Kind == k && (match == nil || match(ev)) {
			n.mu.Unlock()
			return ev
		}
	}
	n.mu.Unlock()
	// Its own short deadline: a notice that never comes fails the test
	// within seconds, not at the package timeout.
	ctx, cancel := context.WithTimeout(ctxT(t), noticeWait)
	defer cancel()
	for {
		select {
		case ev := <-n.ch:
			if ev.Kind == k && (match == nil || match(ev)) {
				return ev
			}
		case <-ctx.Done():
			require.FailNow(t, "notice not seen", "%s: %v", k, context.Cause(ctx))
		}
	}
}

// noticeWait bounds notices.wait (ctxT's own bound may end it first).
const noticeWait = 20 * time.Second

func newClient(t testing.TB, seeds []string, adjust func(*client.Config)) (*client.Client, *notices) {
	t.Helper()
	n := newNotices()
	cfg := client.Config{Seeds: seeds, Conn: connConfig(t), OnNotice: n.add, BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
	if adjust != nil {
		adjust(&cfg)
	}
	c, err := client.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c, n
}

// testWait bounds every wait of a test: one call, one Next, one notice,
// one condition. Generous for -race on two cores (QUIC end to end), short
// enough that a broken rule fails its test in seconds, not at the
// package's timeout.
const testWait = 10 * time.Second

// ctxT is a context for one wait of t: it ends testWait from now (or
// shortly before the test binary's deadline, if sooner), with a cause
// naming the test, and when t ends.
func ctxT(t testing.TB) context.Context {
	return waitCtx(t, testWait)
}

// waitCtx is ctxT with its own bound d, for the few waits that must
// outlast a scripted outage.
func waitCtx(t testing.TB, d time.Duration) context.Context {
	end := time.Now().Add(d)
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := dt.Deadline(); ok {
			end = minTime(end, dl.Add(-time.Until(dl)/10))
		}
	}
	ctx, cancel := context.WithDeadlineCause(context.Background(), end,
		fmt.Errorf("%s: a wait of the test ran past its %v bound", t.Name(), d))
	t.Cleanup(cancel)
	return ctx
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

var topic = client.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: "s"}

// relay is a UDP relay in front of a broker (a small stand-in for the
// cluster's link interposer): it can drop traffic (both ways, or only
// broker → client), stall it, or reset every connection through it.
type relay struct {
	pc       net.PacketConn
	to       *net.UDPAddr
	dropDown atomic.Bool  // discard broker → client datagrams
	dropAll  atomic.Bool  // discard both ways
	stallNs  atomic.Int64 // hold datagrams until this UnixNano
	mu       sync.Mutex
	peers    map[string]*net.UDPConn
	dead     map[string]bool // client addresses whose connections were reset
	wg       sync.WaitGroup
}

func startRelay(t testing.TB, to string) *relay {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	ua, err := net.ResolveUDPAddr("udp", to)
	require.NoError(t, err)
	r := &relay{pc: pc, to: ua, peers: make(map[string]*net.UDPConn), dead: make(map[string]bool)}
	r.wg.Add(1)
	go r.run()
	t.Cleanup(r.close)
	return r
}

func (r *relay) addr() string { return r.pc.LocalAddr().String() }

// reset kills every connection open through the relay for good; new
// connections (new client ports) get through at once.
func (r *relay) reset() {
	r.mu.Lock()
	for a, up := range r.peers {
		r.dead[a] = true
		up.Close()
		delete(r.peers, a)
	}
	r.mu.Unlock()
}

// stall holds every datagram for d, then delivers them in order.
func (r *relay) stall(d time.Duration) { r.stallNs.Store(time.Now().Add(d).UnixNano()) }

func (r *relay) hold() {
	if until := r.stallNs.Load(); until != 0 {
		if d := time.Until(time.Unix(0, until)); d > 0 {
			time.Sleep(d)
		}
	}
}

func (r *relay) run() {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := r.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		r.hold()
		if r.dropAll.Load() {
			continue
		}
		r.mu.Lock()
		if r.dead[from.String()] {
			r.mu.Unlock()
			continue
		}
		up := r.peers[from.String()]
		if up == nil {
			up, err = net.DialUDP("udp", nil, r.to)
			if err != nil {
				r.mu.Unlock()
				continue
			}
			r.peers[from.String()] = up
			r.wg.Add(1)
			go r.down(up, from)
		}
		r.mu.Unlock()
		up.Write(buf[:n])
	}
}

func (r *relay) down(up *net.UDPConn, client net.Addr) {
	defer r.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, err := up.Read(buf)
		if err != nil {
			return
		}
		r.hold()
		if r.dropDown.Load() || r.dropAll.Load() {
			continue
		}
		r.pc.WriteTo(buf[:n], client)
	}
}

func (r *relay) close() {
	r.pc.Close()
	r.mu.Lock()
	for _, up := range r.peers {
		up.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func newPool(der []byte) *x509.CertPool {
	p := x509.NewCertPool()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	p.AddCert(c)
	return p
}

// waitFor polls cond until it holds; it fails only when the test's
// deadline comes first.
func waitFor(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	ctx := ctxT(t)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			require.FailNow(t, "condition not met", "%s: %v", msg, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
