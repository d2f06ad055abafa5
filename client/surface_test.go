package client_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// Every typed call of package api is a method of *client.Client with
// api's signature (so go doc ./client Client lists it), and the client has
// no exported or embedded field through which a caller could replace what
// its calls are sent through.
func TestClientMethodsAreTheTypedCalls(t *testing.T) {
	calls := reflect.TypeFor[api.Calls]()
	cli := reflect.TypeFor[*client.Client]()
	require.Positive(t, calls.NumMethod())
	for i := range calls.NumMethod() {
		want := calls.Method(i)
		got, ok := cli.MethodByName(want.Name)
		require.True(t, ok, "api.Calls.%s is not a method of *client.Client", want.Name)
		require.Equal(t, want.Type.NumIn(), got.Type.NumIn(), want.Name)
		for j := 1; j < want.Type.NumIn(); j++ { // after the receiver
			require.Equal(t, want.Type.In(j), got.Type.In(j), "%s parameter %d", want.Name, j)
		}
		require.Equal(t, want.Type.NumOut(), got.Type.NumOut(), want.Name)
		for j := range want.Type.NumOut() {
			require.Equal(t, want.Type.Out(j), got.Type.Out(j), "%s result %d", want.Name, j)
		}
	}
	st := cli.Elem()
	for i := range st.NumField() {
		f := st.Field(i)
		require.False(t, f.IsExported() || f.Anonymous, "client.Client has the exported or embedded field %s", f.Name)
	}
}

// go doc ./client Client lists every method of the client, the typed
// calls included, with its own documentation.
func TestGoDocListsEveryMethod(t *testing.T) {
	out, err := exec.Command("go", "doc", "github.com/flxproto/felix/client", "Client").CombinedOutput()
	require.NoError(t, err, "%s", out)
	cli := reflect.TypeFor[*client.Client]()
	for i := range cli.NumMethod() {
		name := cli.Method(i).Name
		require.Contains(t, string(out), "func (c *Client) "+name+"(", "go doc ./client Client does not list %s", name)
	}
	out, err = exec.Command("go", "doc", "github.com/flxproto/felix/client", "Client.CachePut").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "CachePut writes key")
}

// The client's names for the errors and sentinels of the layers below are
// those layers' own values and types, so errors.Is and errors.As against a
// client name match what the lower layer returned (a copy made with
// errors.New would match nothing).
func TestErrorNamesAreTheLowerLayersOwn(t *testing.T) {
	for name, pair := range map[string][2]error{
		"ErrNotAdvertised":    {client.ErrNotAdvertised, felix.ErrNotAdvertised},
		"ErrProtocol":         {client.ErrProtocol, felix.ErrProtocol},
		"ErrFrameTooLarge":    {client.ErrFrameTooLarge, felix.ErrFrameTooLarge},
		"ErrBadAddress":       {client.ErrBadAddress, conn.ErrBadAddress},
		"ErrNoAnswer":         {client.ErrNoAnswer, conn.ErrNoAnswer},
		"ErrCertUntrusted":    {client.ErrCertUntrusted, conn.ErrCertUntrusted},
		"ErrAuthRefused":      {client.ErrAuthRefused, felix.ErrAuthRefused},
		"ErrBrokerShutdown":   {client.ErrBrokerShutdown, conn.ErrBrokerShutdown},
		"ErrClosed":           {client.ErrClosed, conn.ErrClosed},
		"ErrCommitEventCount": {client.ErrCommitEventCount, api.ErrCommitEventCount},
	} {
		require.True(t, pair[0] == pair[1], "client.%s is not the lower layer's sentinel", name)
	}
	var be *client.BrokerError = &felix.BrokerError{Code: client.CodeForbidden, Retry: client.RetryFatal}
	var dial error = &conn.DialError{Addr: "a:1", Kind: conn.ErrCertUntrusted, Err: errors.New("x509")}
	var de *client.DialError
	require.ErrorAs(t, dial, &de)
	require.ErrorIs(t, dial, client.ErrCertUntrusted)
	require.Equal(t, felix.CodeForbidden, be.Code)
	require.Equal(t, felix.RetryFatal, be.RetryClass())
}

// A custom TLS configuration and server name set on client.Config, with
// no conn.Config, are what every connection verifies the broker with.
func TestConfigTLSWithoutConn(t *testing.T) {
	b := startBroker(t)
	tc, err := certs()
	require.NoError(t, err)
	roots := newPool(tc.Certificates[0].Leaf.Raw)
	dial := func(cfg client.Config) error {
		cfg.Seeds, cfg.TenantID, cfg.Token, cfg.MaxAttempts = []string{b.addr}, server.DemoTenant, server.DemoToken, -1
		c, err := client.New(cfg)
		require.NoError(t, err)
		defer c.Close()
		return c.Connect(ctxT(t))
	}
	require.NoError(t, dial(client.Config{TLS: &tls.Config{RootCAs: roots}, ServerName: "localhost",
		IdleTimeout: 2 * time.Second, KeepAlive: 500 * time.Millisecond}))

	err = dial(client.Config{TLS: &tls.Config{RootCAs: x509.NewCertPool()}})
	var de *client.DialError
	require.ErrorAs(t, err, &de, "an empty root pool trusts nothing")
	require.ErrorIs(t, err, client.ErrCertUntrusted)

	err = dial(client.Config{TLS: &tls.Config{RootCAs: roots}, ServerName: "not-the-broker.example"})
	require.ErrorIs(t, err, client.ErrCertUntrusted, "ServerName is the name checked")
}

// The connection settings of client.Config and of Config.Conn must not
// disagree: New refuses the Config, naming both fields.
func TestConfigConnSettingsConflict(t *testing.T) {
	seeds := []string{"127.0.0.1:1"}
	for _, tc := range []struct {
		name string
		cfg  client.Config
	}{
		{"TLS", client.Config{Seeds: seeds, TLS: &tls.Config{}, Conn: conn.Config{TLS: &tls.Config{}}}},
		{"ServerName", client.Config{Seeds: seeds, ServerName: "a", Conn: conn.Config{ServerName: "b"}}},
		{"IdleTimeout", client.Config{Seeds: seeds, IdleTimeout: time.Second, Conn: conn.Config{IdleTimeout: 2 * time.Second}}},
		{"KeepAlive", client.Config{Seeds: seeds, KeepAlive: time.Second, Conn: conn.Config{KeepAlive: 2 * time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.New(tc.cfg)
			require.ErrorContains(t, err, "Config."+tc.name+" and Config.Conn."+tc.name+" differ")
		})
	}
	same := &tls.Config{}
	_, err := client.New(client.Config{Seeds: seeds, TLS: same, KeepAlive: time.Second, Conn: conn.Config{TLS: same, KeepAlive: time.Second}})
	require.NoError(t, err, "the same setting twice is no conflict")
}

// The codec and the typed calls link no QUIC: a program that only builds
// or reads frames, or a Requestor of its own, does not pay for quic-go.
func TestNoQUICBelowConn(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/flxproto/felix", "github.com/flxproto/felix/api").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, p := range strings.Fields(string(out)) {
		require.False(t, strings.HasPrefix(p, "github.com/quic-go/"), "%s is linked by felix or felix/api", p)
	}
	require.Contains(t, string(out), "github.com/flxproto/felix/api")
}

// The first-hour programs are applications: their code (test files
// aside, which start the brokers) imports package client and no other
// package of this module.
func TestFirstHourImportsClientAlone(t *testing.T) {
	files, err := filepath.Glob("../examples/firsthour/*.go")
	require.NoError(t, err)
	deeper, err := filepath.Glob("../examples/firsthour/*/*.go")
	require.NoError(t, err)
	programs := 0
	for _, name := range append(files, deeper...) {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		uses := false
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p == "github.com/flxproto/felix/client" {
				uses = true
				continue
			}
			require.False(t, p == "github.com/flxproto/felix" || strings.HasPrefix(p, "github.com/flxproto/felix/"),
				"%s imports %s: a first-hour program needs package client alone", name, p)
		}
		if uses {
			programs++
		}
	}
	require.GreaterOrEqual(t, programs, 4, "the first-hour programs (main, stream, cache, orders) are in ../examples/firsthour")
	_, err = os.Stat("../examples/firsthour/README.md")
	require.NoError(t, err)
}

// The client's names for the codec's values are the codec's values: a
// program comparing BrokerError.Code with client.CodeNotFound, or a
// retry class with client.RetryFatal, compares with what the broker sent.
func TestValueNamesAreTheLowerLayersOwn(t *testing.T) {
	require.Equal(t, felix.StartPosition{}, client.Latest, "Latest is the zero start position")
	require.Equal(t, felix.StartPosition{Kind: felix.StartEarliest}, client.Earliest)
	require.Equal(t, felix.StartAt(42), client.StartAt(42))
	require.Equal(t, felix.Some(uint64(7)), client.Some(uint64(7)))
	require.Equal(t, felix.CacheCondition{Kind: felix.CondAbsent}, client.IfAbsent)
	require.Equal(t, api.IfVersion(3), client.IfVersion(3))
	for _, p := range [][2]any{
		{client.AckPerBatch, felix.AckPerBatch}, {client.AckPerMessage, felix.AckPerMessage},
		{client.ShardKindStream, felix.ShardKindStream}, {client.ShardKindCache, felix.ShardKindCache},
		{client.RetryRetry, felix.RetryRetry}, {client.RetryAfter, felix.RetryAfter}, {client.RetryRedirect, felix.RetryRedirect},
		{client.RetryOutcomeUnknown, felix.RetryOutcomeUnknown}, {client.RetryFatal, felix.RetryFatal},
		{client.CodeUnauthenticated, felix.CodeUnauthenticated}, {client.CodeForbidden, felix.CodeForbidden},
		{client.CodeNotFound, felix.CodeNotFound}, {client.CodeInvalidRequest, felix.CodeInvalidRequest},
		{client.CodeShardUnavailable, felix.CodeShardUnavailable}, {client.CodeNotLeader, felix.CodeNotLeader},
		{client.CodeQuorumTimeout, felix.CodeQuorumTimeout}, {client.CodeLeadershipLost, felix.CodeLeadershipLost},
		{client.CodeUnacknowledged, felix.CodeUnacknowledged}, {client.CodeOverloaded, felix.CodeOverloaded},
		{client.CodeLimitExceeded, felix.CodeLimitExceeded}, {client.CodeDraining, felix.CodeDraining},
		{client.CodeInternal, felix.CodeInternal}, {client.CodeStorage, felix.CodeStorage},
		{client.CodeStaleClaim, felix.CodeStaleClaim}, {client.CodeRevoked, felix.CodeRevoked},
		{client.CodeStaleWidth, felix.CodeStaleWidth},
	} {
		require.Equal(t, p[1], p[0])
	}
}
