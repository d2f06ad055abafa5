package client_test

import (
	"context"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// A newcomer's mistakes, through the cluster client: each error names
// what is wrong, where, and what to do, matches its sentinel, and the
// mistakes caught locally or refused by the broker cost no retry (the
// local ones not even a dial). Dial failures carry the conn.DialError of
// the last attempt (conn's TestFirstHourMistakes checks one dial's
// message and time); how often the client retries each kind is the
// retry loop's decision.
func TestMistakesSayWhatToDo(t *testing.T) {
	b := startBroker(t)
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	caFile := brokerPEM(t)

	type row struct {
		name  string
		seeds []string
		cfg   func(*client.Config)
		call  func(ctx context.Context, c *client.Client) error
		kind  error
		want  []string
		// dials is the number of dials the call may make (-1: the retry
		// loop's choice); retries is checked only when dials >= 0.
		dials int
	}
	publish := func(tp client.Topic, payload []byte) func(context.Context, *client.Client) error {
		return func(ctx context.Context, c *client.Client) error {
			_, err := c.Publish(ctx, tp, payload, client.PublishOptions{})
			return err
		}
	}
	connect := func(ctx context.Context, c *client.Client) error { return c.Connect(ctx) }
	// An idempotent Producer checks names as the client's publish does
	// (NewProducer may dial; the refusal itself sends nothing).
	produce := func(tp client.Topic) func(context.Context, *client.Client) error {
		return func(ctx context.Context, c *client.Client) error {
			p, err := c.NewProducer(ctx)
			if err != nil {
				return err
			}
			_, err = p.PublishBatch(ctx, tp, [][]byte{[]byte("x")}, client.PublishOptions{})
			return err
		}
	}
	for _, tc := range []row{
		{name: "topic of another tenant", call: publish(client.Topic{TenantID: "t2", Namespace: "ns", Stream: "s"}, []byte("x")),
			kind: client.ErrTenantMismatch, dials: 0,
			want: []string{`the stream ns/s is in tenant "t2", but this client authenticates as tenant "t1"`, "nothing was sent"}},
		{name: "zero topic", call: publish(client.Topic{}, []byte("x")), kind: client.ErrEmptyName, dials: 0,
			want: []string{"empty stream name", "set TenantID, Namespace, Stream;"}},
		{name: "producer: topic of another tenant", call: produce(client.Topic{TenantID: "t2", Namespace: "ns", Stream: "s"}),
			kind: client.ErrTenantMismatch, dials: -1,
			want: []string{`the stream ns/s is in tenant "t2", but this client authenticates as tenant "t1"`, "nothing was sent"}},
		{name: "producer: zero topic", call: produce(client.Topic{}), kind: client.ErrEmptyName, dials: -1,
			want: []string{"empty stream name", "set TenantID, Namespace, Stream;"}},
		{name: "zero cache", kind: client.ErrEmptyName, dials: 0,
			call: func(ctx context.Context, c *client.Client) error {
				return c.CachePut(ctx, client.CacheRef{TenantID: server.DemoTenant}, "k", []byte("v"), 0)
			},
			want: []string{"cache_put: empty cache name", "set Namespace, Cache;"}},
		{name: "payload above the frame limit", call: publish(topic, make([]byte, 20<<20)), kind: felix.ErrFrameTooLarge, dials: 1,
			want: []string{"exceeds the frame limit of 16777216 bytes", "nothing was sent"}},
		{name: "wrong token", cfg: func(c *client.Config) { c.Token = "nope" }, call: connect, kind: felix.ErrAuthRefused, dials: 1,
			want: []string{`refused the credentials offered for tenant "t1"`, "check the tenant id and the token"}},
		{name: "CA file of another broker", cfg: func(c *client.Config) { c.Conn.TLS = nil; c.CAFile = otherPEM(t) }, call: connect,
			kind: conn.ErrCertUntrusted, dials: -1, want: []string{"presented a certificate signed by an authority this client does not trust"}},
		{name: "missing port", seeds: []string{"localhost"}, call: connect, kind: conn.ErrBadAddress, dials: -1,
			want: []string{`bad broker address "localhost"`, "missing port"}},
		{name: "nothing listening", seeds: []string{silent.LocalAddr().String()}, cfg: func(c *client.Config) { c.DialTimeout = 200 * time.Millisecond; c.MaxAttempts = 1 },
			call: connect, kind: conn.ErrNoAnswer, dials: -1,
			want: []string{"no answer from " + silent.LocalAddr().String(), "is a broker listening on that UDP address?"}},
		{name: "the CA file as configured works", cfg: func(c *client.Config) { c.Conn.TLS = nil; c.CAFile = caFile }, call: publish(topic, []byte("ok")), dials: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seeds := tc.seeds
			if seeds == nil {
				seeds = []string{b.addr}
			}
			c, n := newClient(t, seeds, func(c *client.Config) {
				// Credentials the short way: TenantID and Token.
				c.Conn.TenantID, c.Conn.Token = "", ""
				c.TenantID, c.Token = server.DemoTenant, server.DemoToken
				c.Conn.ServerName = "localhost"
				if tc.cfg != nil {
					tc.cfg(c)
				}
			})
			err := tc.call(ctxT(t), c)
			if tc.kind == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.kind)
				for _, w := range tc.want {
					require.Contains(t, err.Error(), w)
				}
				require.NotContains(t, err.Error(), "CRYPTO_ERROR")
				require.NotContains(t, err.Error(), "nope", "a token is never echoed")
			}
			if tc.dials >= 0 {
				require.Equal(t, tc.dials, n.count(client.NoticeConnected)+n.count(client.NoticeDialFailed), "dials")
				require.Zero(t, n.count(client.NoticeRetry), "no retry")
			}
		})
	}
}

// client.Config refuses unusable trust settings and conflicting
// credentials at New, before any dial.
func TestConfigRefusedAtNew(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "empty.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a certificate"), 0o600))
	for _, tc := range []struct {
		name string
		cfg  client.Config
		want string
	}{
		{"no certificate in the CA file", client.Config{Seeds: []string{"127.0.0.1:1"}, CAFile: bad}, "no PEM certificate in " + bad},
		{"missing CA file", client.Config{Seeds: []string{"127.0.0.1:1"}, CAFile: bad + ".missing"}, "no such file"},
		{"CA bytes without a certificate", client.Config{Seeds: []string{"127.0.0.1:1"}, CAPEM: []byte("x")}, "no PEM certificate in Config.CAPEM"},
		{"both CA forms", client.Config{Seeds: []string{"127.0.0.1:1"}, CAFile: bad, CAPEM: []byte("x")}, "set one"},
		{"two tenants", client.Config{Seeds: []string{"127.0.0.1:1"}, TenantID: "a", Conn: conn.Config{TenantID: "b"}}, `"a" and Config.Conn.TenantID "b" differ`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.New(tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// brokerPEM writes the test brokers' certificate as a PEM file, as a
// reference broker's -cert-out does.
func brokerPEM(t *testing.T) string {
	tc, err := certs()
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "broker.pem")
	require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tc.Certificates[0].Leaf.Raw}), 0o600))
	return p
}

// otherPEM writes the certificate of an unrelated authority.
func otherPEM(t *testing.T) string {
	srv, err := server.Listen(server.Config{Addr: "127.0.0.1:0"})
	require.NoError(t, err)
	defer srv.Close()
	p := filepath.Join(t.TempDir(), "other.pem")
	require.NoError(t, srv.WriteCertificate(p))
	return p
}

// A cancelled call says so once, in the context's words, whatever it was
// waiting for (here: a dial to an address nobody answers).
func TestCancelledCallReadsAsTheContextError(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	c, _ := newClient(t, []string{silent.LocalAddr().String()}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err = c.Connect(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "context canceled", err.Error())
}
