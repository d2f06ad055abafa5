package conformance_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/conn"
)

// Fx is what a scenario body gets: the fixture and helpers bound to its
// test.
type Fx struct {
	*conformance.Fixture
	t  *testing.T
	id string
	// recorded is set once the body recorded its pass or skip.
	recorded bool
}

// run runs scenario id with body and records its outcome when the test
// ends (conformance.Recorder.Track): fail if the test failed, the pass
// and its evidence if body called fx.Pass, the skip and its reason if it
// called fx.Skip, and fail if it returned without either: a scenario
// passes only on what its test observed. Every scenario test calls it
// exactly once.
func run(t *testing.T, id string, body func(t *testing.T, fx *Fx)) {
	t.Helper()
	if err := recorder.Track(t, id); err != nil {
		t.Fatal(err)
	}
	fx := &Fx{Fixture: fixture, t: t, id: id}
	body(t, fx)
	if !fx.recorded && !t.Failed() {
		t.Errorf("%s returned without fx.Pass (and its evidence) or fx.Skip: it proved nothing", id)
	}
}

// Pass records the scenario as passed with what the test observed: the
// observations its catalogue entry names (conformance.CheckEvidence); it
// fails the test when one is missing or malformed. Call it last, once
// every assertion held: a later failure still fails the scenario.
func (fx *Fx) Pass(ev conformance.Evidence) {
	fx.t.Helper()
	if err := recorder.Pass(fx.id, ev); err != nil {
		fx.t.Fatal(err)
	}
	fx.recorded = true
}

// Skip records the scenario as skipped with reason and stops the test.
// Use it only for what the client or fixture cannot do, never to hide a
// failure.
func (fx *Fx) Skip(reason string) {
	fx.t.Helper()
	if err := recorder.Skip(fx.id, reason); err != nil {
		fx.t.Error(err)
	}
	fx.recorded = true
	fx.t.Skip(reason)
}

// opWait bounds one operation of a scenario (a call, a Next): a hang
// guard, not a timing assertion, longer than the longest link fault a
// scenario holds (8 s) and short enough that a broken rule fails its
// scenario in seconds, not at the package's timeout.
const opWait = 20 * time.Second

// ctx is a context for one operation of the scenario: it ends opWait
// from now (shortly before the test binary's deadline if sooner) or when
// the test ends, with a cause naming the scenario.
func (fx *Fx) ctx() context.Context {
	end := time.Now().Add(opWait)
	if d, ok := fx.t.Deadline(); ok {
		if soon := d.Add(-time.Until(d) / 10); soon.Before(end) {
			end = soon
		}
	}
	ctx, cancel := context.WithDeadlineCause(fx.t.Context(), end, errors.New(fx.t.Name()+": an operation ran past its 20 s bound"))
	fx.t.Cleanup(cancel)
	return ctx
}

var (
	poolOnce sync.Once
	pool     *x509.CertPool
	poolErr  error
)

// tls returns a client TLS configuration trusting the fixture's CA file.
func (fx *Fx) tls() *tls.Config {
	poolOnce.Do(func() {
		pem, err := os.ReadFile(fx.CAFile)
		if err != nil {
			poolErr = err
			return
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			poolErr = errors.New("no certificate in " + fx.CAFile)
		}
	})
	require.NoError(fx.t, poolErr)
	return &tls.Config{RootCAs: pool}
}

// dial connects a client to addr with the fixture's token; adjust may
// change the configuration. The client is closed when the test ends.
func (fx *Fx) dial(addr string, adjust func(*conn.Config)) *conn.Client {
	fx.t.Helper()
	cfg := &conn.Config{TLS: fx.tls(), TenantID: fx.TenantID, Token: fx.Token}
	if adjust != nil {
		adjust(cfg)
	}
	c, err := conn.Dial(fx.ctx(), addr, cfg)
	require.NoError(fx.t, err)
	fx.t.Cleanup(func() { _ = c.Close() })
	return c
}

// client connects to the first broker of the fixture.
func (fx *Fx) client() *conn.Client { return fx.dial(fx.Addrs[0], nil) }

// topic names a stream of the fixture.
func (fx *Fx) topic(stream string) felix.Topic {
	return felix.Topic{TenantID: fx.TenantID, Namespace: fx.Namespace, Stream: stream}
}

// cache names a cache of the fixture.
func (fx *Fx) cache(name string) felix.CacheRef {
	return felix.CacheRef{TenantID: fx.TenantID, Namespace: fx.Namespace, Cache: name}
}

var (
	unique atomic.Uint64
	runID  = strconv.FormatInt(time.Now().UnixNano(), 36) // keys of another run never collide
)

// key returns a name no other scenario of any run uses.
func (fx *Fx) key(prefix string) string {
	return prefix + "-" + runID + "-" + strconv.FormatUint(unique.Add(1), 10)
}

// subscribe subscribes through c. A not_leader answer is followed once,
// by the application: today's conn.Client reports redirects (typed) and
// leaves following them to its caller. The subscription is closed when
// the test ends.
func (fx *Fx) subscribe(c *conn.Client, t felix.Topic, o conn.SubscribeOptions) *conn.Subscription {
	fx.t.Helper()
	sub, err := c.Subscribe(fx.ctx(), t, o)
	var nl *felix.NotLeaderError
	if errors.As(err, &nl) && nl.Addr != "" {
		sub, err = fx.dial(nl.Addr, nil).Subscribe(fx.ctx(), t, o)
	}
	require.NoError(fx.t, err)
	fx.t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// control posts body to path on the fixture's control endpoint; it skips
// the scenario when the fixture has none.
func (fx *Fx) control(path, body string) {
	fx.t.Helper()
	if fx.ControlURL == "" {
		fx.Skip("the fixture has no control endpoint (control_url)")
	}
	ctx := fx.ctx()
	if ctx.Err() != nil { // in a cleanup: the test's context has ended
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
	}
	code, msg, err := fx.Control(ctx, http.MethodPost, path, []byte(body))
	require.NoError(fx.t, err)
	require.Equal(fx.t, http.StatusOK, code, "POST %s: %s", path, msg)
}

// isTransport reports whether err is a transport failure (the broker was
// unreachable or the connection died), as opposed to a broker's answer.
func isTransport(err error) bool {
	var te *conn.TransportError
	return errors.As(err, &te)
}
