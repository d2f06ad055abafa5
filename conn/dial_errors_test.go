package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// Every first-hour mistake gets an error that names where it happened
// and what to check, matches its sentinel, and comes from one attempt:
// the mistakes that no retry mends fail in well under the dial budget
// (a retry loop would show as the whole budget spent), and a silent
// address fails when the budget ends, not later.
func TestFirstHourMistakes(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), auth: func(ctx context.Context, a *felix.Auth) (any, error) {
		if a.TenantID == "t1" && a.Token == "tok" {
			return "user", nil
		}
		return nil, errors.New("bad credentials")
	}})
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	_, otherPool, err := SelfSigned()
	require.NoError(t, err)

	const budget = 3 * time.Second
	good := b.clientConfig
	for _, tc := range []struct {
		name string
		addr string
		cfg  func() *Config
		kind error
		want []string
		// noAnswer: the dial waits for its whole budget (and no longer).
		noAnswer bool
	}{
		{name: "nothing listening", addr: silent.LocalAddr().String(), cfg: good, kind: ErrNoAnswer, noAnswer: true,
			want: []string{"no answer from " + silent.LocalAddr().String() + " within 3s", "is a broker listening on that UDP address?"}},
		{name: "missing port", addr: "localhost", cfg: good, kind: ErrBadAddress,
			want: []string{`bad broker address "localhost"`, "want host:port", "missing port"}},
		{name: "unknown port", addr: "127.0.0.1:7x47", cfg: good, kind: ErrBadAddress,
			want: []string{`bad broker address "127.0.0.1:7x47"`, "unknown port"}},
		{name: "unknown CA", addr: b.addr(), kind: ErrCertUntrusted,
			cfg:  func() *Config { c := good(); c.TLS = &tls.Config{RootCAs: otherPool}; return c },
			want: []string{"the broker at " + b.addr() + " presented a certificate signed by an authority this client does not trust", "-cert-out"}},
		{name: "server name", addr: b.addr(), kind: ErrCertUntrusted,
			cfg:  func() *Config { c := good(); c.ServerName = "broker.example"; return c },
			want: []string{`not valid for the server name "broker.example"`, "localhost"}},
		{name: "wrong token", addr: b.addr(), kind: felix.ErrAuthRefused,
			cfg:  func() *Config { c := good(); c.Token = "nope"; return c },
			want: []string{"the broker at " + b.addr() + ` refused the credentials offered for tenant "t1"`, "check the tenant id and the token", "[unauthenticated]"}},
		{name: "empty token", addr: b.addr(), kind: felix.ErrAuthRefused,
			cfg:  func() *Config { c := good(); c.Token = ""; return c },
			want: []string{`refused the credentials offered for tenant "t1"`, "check the tenant id and the token"}},
		{name: "wrong tenant", addr: b.addr(), kind: felix.ErrAuthRefused,
			cfg:  func() *Config { c := good(); c.TenantID = "t2"; return c },
			want: []string{`refused the credentials offered for tenant "t2"`, "check the tenant id and the token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), budget)
			defer cancel()
			start := time.Now()
			c, err := Dial(ctx, tc.addr, tc.cfg())
			took := time.Since(start)
			if c != nil {
				c.Close()
			}
			require.Error(t, err)
			var de *DialError
			require.ErrorAs(t, err, &de)
			require.Equal(t, tc.addr, de.Addr)
			require.ErrorIs(t, err, tc.kind)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.NotContains(t, err.Error(), "CRYPTO_ERROR", "the library's words, not quic-go's")
			require.NotContains(t, err.Error(), "nope", "a token is never echoed")
			require.NotContains(t, err.Error(), "\n")
			if tc.noAnswer {
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Less(t, took, budget+2*time.Second, "given up when the budget ends")
			} else {
				require.Less(t, took, budget/2, "one attempt, not a retry loop over the budget")
			}
			if tc.kind == felix.ErrAuthRefused {
				var be *felix.BrokerError
				require.ErrorAs(t, err, &be, "the broker's answer stays reachable")
				require.Equal(t, felix.CodeUnauthenticated, be.Code)
			}
		})
	}
}

// A caller's cancellation is the plain context error, whatever the dial
// was doing: one wording, matched by errors.Is.
func TestDialCanceledIsTheContextError(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = Dial(ctx, silent.LocalAddr().String(), &Config{TenantID: "t1", Token: "tok"})
	require.Equal(t, context.Canceled, err)
}

// A request whose frame exceeds the frame limit is refused before
// anything is written, naming its size and the limit; the stream stays
// usable for the next request.
func TestFrameLimitRefusedBeforeSending(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, func(c *Config) { c.MaxFrameBytes = 64 << 10 })
	ctx := testCtx(t)
	tp := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "big"}
	for _, o := range []PublishOptions{{}, {NoAck: true}, {Key: []byte("k")}} {
		_, err := c.Publish(ctx, tp, make([]byte, 100<<10), o)
		var fl *felix.FrameLimitError
		require.ErrorAs(t, err, &fl)
		require.Equal(t, uint32(64<<10), fl.Limit)
		require.Greater(t, fl.Size, 100<<10)
		require.ErrorIs(t, err, felix.ErrFrameTooLarge)
		require.True(t, strings.Contains(err.Error(), "exceeds the frame limit of 65536 bytes"), err.Error())
		require.Contains(t, err.Error(), "nothing was sent")
	}
	_, err := c.Publish(ctx, tp, []byte("small"), PublishOptions{})
	require.NoError(t, err, "the stream is still usable")
	b.mu.Lock()
	recs := b.topic(topicKey(tp.TenantID, tp.Namespace, tp.Stream)).recs
	b.mu.Unlock()
	require.Equal(t, [][]byte{[]byte("small")}, recs, "only the small record reached the broker")
}

// The zero PublishOptions is acknowledged; NoAck is the explicit
// fire-and-forget, and NoAck with an ack mode is refused.
func TestPublishAckedByDefault(t *testing.T) {
	leakCheck(t)
	b := startBroker(t, brokerOpts{offer: fullOffer(), ackOffsets: true})
	c := b.dial(t, nil)
	ctx := testCtx(t)
	tp := felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "acks"}
	res, err := c.Publish(ctx, tp, []byte("a"), PublishOptions{})
	require.NoError(t, err)
	require.True(t, res.HasOffset, "an ack came back: the zero options wait for it")
	res, err = c.Publish(ctx, tp, []byte("b"), PublishOptions{NoAck: true})
	require.NoError(t, err)
	require.False(t, res.HasOffset, "fire-and-forget has no answer")
	_, err = c.Publish(ctx, tp, []byte("c"), PublishOptions{NoAck: true, Ack: felix.AckPerMessage})
	require.ErrorIs(t, err, felix.ErrInvalidValue)
}

// A broker that refuses the auth because it is draining says so: the
// message is not about credentials (the client's logs printed it as a
// credentials problem at every re-dial of a stopping broker).
func TestDialErrorDrainingIsNotCredentials(t *testing.T) {
	be := &felix.BrokerError{Type: "error", Message: "broker draining", Code: felix.CodeDraining, Auth: true}
	e := &DialError{Addr: "127.0.0.1:7447", Kind: felix.ErrAuthRefused, Tenant: "t1", Err: be}
	require.Contains(t, e.Error(), "the broker at 127.0.0.1:7447 is draining")
	require.Contains(t, e.Error(), "connect to another broker")
	require.NotContains(t, e.Error(), "credentials")
	require.NotContains(t, e.Error(), "token")
	require.NotContains(t, be.Error(), "token", "a retryable refusal says nothing about the token")
	bad := &felix.BrokerError{Type: "error", Message: "auth failed", Code: felix.CodeUnauthenticated, Auth: true}
	e.Err = bad
	require.Contains(t, e.Error(), "refused the credentials")
}
