package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conformance"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
)

// clusterProc is a -nodes broker command with its fixture.
type clusterProc struct {
	*brokerProc
	fx conformance.Fixture
}

// startClusterCmd runs the broker command with -nodes, -fixture-out and
// -control and reads the fixture once written.
func startClusterCmd(t *testing.T, env []string, args ...string) *clusterProc {
	t.Helper()
	fxPath := filepath.Join(t.TempDir(), "fixture.json")
	b := startBroker(t, env, append([]string{"-fixture-out", fxPath, "-control", "127.0.0.1:0"}, args...)...)
	data := waitForFile(t, fxPath, b.exited, new(bytes.Buffer))
	p := &clusterProc{brokerProc: b}
	require.NoError(t, json.Unmarshal([]byte(data), &p.fx))
	fi, err := os.Stat(fxPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the fixture file holds tokens: owner only")
	return p
}

// dial connects to addr with token for tenant t1.
func (p *clusterProc) dial(t *testing.T, addr, token string) (*conn.Client, error) {
	c, err := conn.Dial(t.Context(), addr, &conn.Config{TLS: &tls.Config{RootCAs: p.pool}, TenantID: p.fx.TenantID, Token: token})
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
	}
	return c, err
}

// control sends a request to the control endpoint with the given bearer
// token ("" = none) and returns the status and body.
func (p *clusterProc) control(t *testing.T, method, path, token string) (int, string) {
	t.Helper()
	f := p.fx
	f.ControlToken = token
	var body []byte
	if method == http.MethodPost {
		body = []byte("{}")
	}
	code, answer, err := f.Control(t.Context(), method, path, body)
	require.NoError(t, err)
	return code, string(answer)
}

func requireCode(t *testing.T, err error, code felix.ErrorCode) {
	t.Helper()
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, code, be.Code, "%v", err)
}

// -nodes: -addr-out names node 0, names never declared are served (the
// streams with -shards), the control endpoint wants the fixture's token
// and GET /state shows the cluster; the control token is never logged.
func TestBrokerCommandClusterServesNewNames(t *testing.T) {
	p := startClusterCmd(t, nil, "-nodes", "3", "-shards", "2")
	require.Equal(t, p.fx.Addrs[0], p.addr, "-addr-out is node 0's address")
	require.NotEmpty(t, p.fx.ControlToken)

	tp := felix.Topic{TenantID: p.fx.TenantID, Namespace: "app", Stream: "never-declared"}
	ref := felix.CacheRef{TenantID: p.fx.TenantID, Namespace: "app", Cache: "never-declared"}
	for i, a := range p.fx.Addrs {
		c, err := p.dial(t, a, p.fx.Token)
		require.NoError(t, err)
		res, err := c.Publish(t.Context(), tp, []byte("x"), conn.PublishOptions{Ack: felix.AckPerMessage})
		require.NoError(t, err, "node %d", i)
		require.True(t, res.HasOffset, "durable by default, as a standalone broker's")
		require.NoError(t, api.New(c).CachePut(t.Context(), ref, "k", []byte(a), 0))
		v, found, err := api.New(c).CacheGet(t.Context(), ref, "k")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, a, string(v))
	}
	c, err := p.dial(t, p.addr, p.fx.Token)
	require.NoError(t, err)
	sub, err := c.Subscribe(t.Context(), felix.Topic{TenantID: p.fx.TenantID, Namespace: "app", Stream: "sub-first"}, conn.SubscribeOptions{})
	var nl *felix.NotLeaderError
	if errors.As(err, &nl) {
		c, err = p.dial(t, nl.Addr, p.fx.Token)
		require.NoError(t, err)
		sub, err = c.Subscribe(t.Context(), felix.Topic{TenantID: p.fx.TenantID, Namespace: "app", Stream: "sub-first"}, conn.SubscribeOptions{})
	}
	require.NoError(t, err, "subscribe to a stream never declared")
	require.NoError(t, sub.Close())

	code, _ := p.control(t, http.MethodGet, "/state", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = p.control(t, http.MethodGet, "/fixture", p.fx.Token)
	require.Equal(t, http.StatusUnauthorized, code, "a data token is not the control token")
	code, body := p.control(t, http.MethodGet, "/state", p.fx.ControlToken)
	require.Equal(t, http.StatusOK, code, body)
	var st cluster.State
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Len(t, st.Nodes, 3)
	shards := 0
	for _, s := range st.Shards {
		if s.Kind == "stream" && s.Namespace == "app" && s.Name == "never-declared" {
			shards++
		}
	}
	require.Equal(t, 2, shards, "-shards shapes the streams created on first use")
	logs := p.stop(t)
	require.NotContains(t, logs, p.fx.ControlToken, "the control token is never logged")
}

// With the operator's tokens (a file here) no built-in token
// authenticates and the fixture's tokens are fresh; -strict refuses names
// never declared, -cache and -stream declare them.
func TestBrokerCommandClusterOperatorTokensStrict(t *testing.T) {
	tokFile := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokFile, []byte("acme:acme-secret\n"), 0o600))
	p := startClusterCmd(t, nil, "-nodes", "2", "-tokens-file", tokFile, "-strict",
		"-cache", "t1/app/declared", "-stream", "t1/app/declared")
	for _, tok := range []string{cluster.DefaultToken, cluster.DefaultUnauthorizedToken, cluster.InspectToken} {
		require.NotEqual(t, tok, p.fx.Token)
		_, err := p.dial(t, p.addr, tok)
		requireCode(t, err, felix.CodeUnauthenticated)
	}
	_, err := conn.Dial(t.Context(), p.addr, &conn.Config{TLS: &tls.Config{RootCAs: p.pool}, TenantID: "acme", Token: "acme-secret"})
	require.NoError(t, err, "the operator's token")

	c, err := p.dial(t, p.addr, p.fx.Token)
	require.NoError(t, err, "the fixture's generated token")
	pub := func(stream string) error {
		_, err := c.Publish(t.Context(), felix.Topic{TenantID: "t1", Namespace: "app", Stream: stream}, []byte("x"),
			conn.PublishOptions{Ack: felix.AckPerMessage})
		return err
	}
	require.NoError(t, pub("declared"))
	requireCode(t, pub("undeclared"), felix.CodeNotFound)
	require.NoError(t, api.New(c).CachePut(t.Context(), felix.CacheRef{TenantID: "t1", Namespace: "app", Cache: "declared"}, "k", nil, time.Minute))
	requireCode(t, api.New(c).CachePut(t.Context(), felix.CacheRef{TenantID: "t1", Namespace: "app", Cache: "undeclared"}, "k", nil, 0), felix.CodeNotFound)
	logs := p.stop(t)
	require.NotContains(t, logs, p.fx.Token, "generated tokens are in the fixture file only")
	require.NotContains(t, logs, p.fx.UnauthorizedToken)
}

// Tokens count as the operator's from any of their four sources.
func TestOperatorTokensDetected(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want bool
	}{
		{nil, "", false},
		{[]string{"-tokens", "t1:x"}, "", true},
		{[]string{"-tokens-file", "f"}, "", true},
		{nil, "FELIX_TOKENS=t1:x", true},
		{nil, "FELIX_TOKENS_FILE=f", true},
	} {
		t.Setenv("FELIX_TOKENS", "")
		t.Setenv("FELIX_TOKENS_FILE", "")
		if k, v, ok := strings.Cut(tc.env, "="); ok {
			t.Setenv(k, v)
		}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.String("tokens", "t1:demo-token", "")
		fs.String("tokens-file", "", "")
		require.NoError(t, fs.Parse(tc.args))
		require.Equal(t, tc.want, operatorTokens(fs), "%v %s", tc.args, tc.env)
	}
}

// -cache declares a cache for the standalone broker too: with -strict it
// is served, an undeclared one is not.
func TestBrokerCommandCacheDeclared(t *testing.T) {
	b := startBroker(t, nil, "-strict", "-cache", "t1/ns/declared")
	c, err := conn.Dial(t.Context(), b.addr, &conn.Config{TLS: &tls.Config{RootCAs: b.pool}, TenantID: "t1", Token: "demo-token"})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, api.New(c).CachePut(t.Context(), felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "declared"}, "k", []byte("v"), 0))
	requireCode(t, api.New(c).CachePut(t.Context(), felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "other"}, "k", nil, 0), felix.CodeNotFound)
	require.Contains(t, b.stop(t), `msg="cache declared" tenant=t1 namespace=ns cache=declared`)
}

// -strict: an undeclared stream or cache is answered not_found with the
// retry class the client acts on (fatal: asking again cannot succeed) and
// the flag that declares it; the cluster client gives up at once.
func TestStrictNotFoundSaysHowToDeclare(t *testing.T) {
	b := startBroker(t, nil, "-strict", "-stream", "t1/ns/declared")
	c, err := conn.Dial(t.Context(), b.addr, &conn.Config{TLS: &tls.Config{RootCAs: b.pool}, TenantID: "t1", Token: "demo-token"})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Publish(t.Context(), felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "nope"}, []byte("x"), conn.PublishOptions{Ack: felix.AckPerMessage})
	requireCode(t, err, felix.CodeNotFound)
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.RetryFatal, be.RetryClass())
	require.Contains(t, be.Message, "start it with -stream t1/ns/nope[:shards=N] to declare it")
	require.Equal(t, felix.RetryFatal, client.RetryClassOf(err))
	err = api.New(c).CachePut(t.Context(), felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "nocache"}, "k", nil, 0)
	requireCode(t, err, felix.CodeNotFound)
	require.ErrorContains(t, err, "start it with -cache t1/ns/nocache to declare it")
	require.ErrorContains(t, err, "fatal")
	b.stop(t)
}
