package cluster_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
)

// The control endpoint obeys only a request with its bearer token, from no
// web page, to a loopback Host, with a JSON body: every other request is
// refused with its status and changes nothing (node 0 stays up); the
// legitimate request then works.
func TestControlEndpointRefusals(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 2})
	url, err := c.ServeControl("127.0.0.1:0")
	require.NoError(t, err)
	bearer := "Bearer " + c.ControlToken()
	good := func(extra ...string) map[string]string {
		h := map[string]string{"Authorization": bearer, "Content-Type": "application/json"}
		for i := 0; i+1 < len(extra); i += 2 {
			if extra[i+1] == "" {
				delete(h, extra[i])
			} else {
				h[extra[i]] = extra[i+1]
			}
		}
		return h
	}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no token", good("Authorization", ""), http.StatusUnauthorized},
		{"wrong token", good("Authorization", "Bearer "+c.ControlToken()+"x"), http.StatusUnauthorized},
		{"token prefix", good("Authorization", bearer[:len(bearer)-1]), http.StatusUnauthorized},
		{"other scheme", good("Authorization", "Basic "+c.ControlToken()), http.StatusUnauthorized},
		{"a fixture token", good("Authorization", "Bearer "+c.Fixture().Token), http.StatusUnauthorized},
		{"cross-site form", good("Origin", "http://evil.example", "Content-Type", "text/plain"), http.StatusForbidden},
		{"origin with the token", good("Origin", "http://evil.example"), http.StatusForbidden},
		{"null origin", good("Origin", "null"), http.StatusForbidden},
		{"fetch metadata", good("Sec-Fetch-Site", "same-origin"), http.StatusForbidden},
		{"rebound host", good("Host", "evil.example:80"), http.StatusForbidden},
		{"text/plain", good("Content-Type", "text/plain"), http.StatusUnsupportedMediaType},
		{"form", good("Content-Type", "application/x-www-form-urlencoded"), http.StatusUnsupportedMediaType},
		{"multipart", good("Content-Type", "multipart/form-data; boundary=x"), http.StatusUnsupportedMediaType},
		{"no content type", good("Content-Type", ""), http.StatusUnsupportedMediaType},
	} {
		code, msg := ctlDo(t, http.MethodPost, url+"/kill", `{"node":0}`, tc.hdr)
		require.Equal(t, tc.want, code, "%s: %s", tc.name, msg)
		require.Equal(t, 1, strings.Count(msg, "\n"), "%s: one line: %q", tc.name, msg)
		require.NotContains(t, msg, c.ControlToken(), tc.name)
		require.True(t, c.Alive(0), "%s: not obeyed", tc.name)
	}
	// The GETs are guarded alike: the fixture (the tokens) is not served
	// to a request without the bearer token.
	for _, path := range []string{"/fixture", "/state", "/link/stats"} {
		code, msg := ctlDo(t, http.MethodGet, url+path, "", nil)
		require.Equal(t, http.StatusUnauthorized, code, path)
		require.NotContains(t, msg, c.Fixture().Token, path)
		code, _ = ctlDo(t, http.MethodGet, url+path, "", map[string]string{"Authorization": bearer, "Origin": "http://evil.example"})
		require.Equal(t, http.StatusForbidden, code, path)
	}

	// Legitimate use: any case of the scheme, a charset parameter,
	// localhost as Host.
	code, msg := ctlDo(t, http.MethodGet, url+"/fixture", "", map[string]string{"Authorization": "bearer " + c.ControlToken()})
	require.Equal(t, http.StatusOK, code, msg)
	var f map[string]any
	require.NoError(t, json.Unmarshal([]byte(msg), &f))
	require.Equal(t, c.Fixture().Token, f["token"])
	require.Equal(t, c.ControlToken(), f["control_token"])
	code, msg = ctlDo(t, http.MethodPost, url+"/kill", `{"node":0}`,
		good("Content-Type", "application/json; charset=utf-8", "Host", "localhost"))
	require.Equal(t, http.StatusOK, code, msg)
	require.False(t, c.Alive(0))
	code, msg = post(t, c, url+"/restart", `{"node":0}`)
	require.Equal(t, http.StatusOK, code, msg)
	_, err = publish(t, dial(t, c, c.Addr(0), nil), topic(c, cluster.DurableStream), "served again")
	require.NoError(t, err)
}

// Each cluster draws its own control token, which only the fixture
// carries; the fixture file is readable by its owner only.
func TestControlTokenPerClusterAndPrivateFixture(t *testing.T) {
	a, b := start(t, cluster.Config{Nodes: 1}), start(t, cluster.Config{Nodes: 1})
	require.GreaterOrEqual(t, len(a.ControlToken()), 26, "at least 128 random bits")
	require.NotEqual(t, a.ControlToken(), b.ControlToken())
	require.Empty(t, a.Fixture().ControlToken, "no control endpoint yet: no token in the fixture")
	_, err := a.ServeControl("127.0.0.1:0")
	require.NoError(t, err)
	require.Equal(t, a.ControlToken(), a.Fixture().ControlToken)

	path := filepath.Join(t.TempDir(), "f.json")
	require.NoError(t, os.WriteFile(path, []byte("{}"), 0o644)) // an older, world-readable file
	require.NoError(t, a.WriteFixture(path))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// With operator tokens no built-in token authenticates; the fixture's
// tokens are generated for the run, or taken from the operator's entries
// for the fixture's tenant.
func TestOperatorTokensReplaceTheBuiltInOnes(t *testing.T) {
	refused := func(t *testing.T, c *cluster.Cluster, tenant, token string) {
		t.Helper()
		_, err := conn.Dial(ctxT(t), c.Addr(0), &conn.Config{TLS: c.TLS(), TenantID: tenant, Token: token})
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be, token)
		require.Equal(t, felix.CodeUnauthenticated, be.Code, token)
	}
	forbidden := func(t *testing.T, c *cluster.Cluster, token string) {
		t.Helper()
		_, err := publish(t, dial(t, c, c.Addr(0), func(cfg *conn.Config) { cfg.Token = token }), topic(c, cluster.DurableStream), "x")
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.CodeForbidden, be.Code)
	}
	acme := map[string]server.Identity{"acme-secret": {Tenant: "acme", Principal: "acme"}}

	t.Run("generated", func(t *testing.T) {
		c := start(t, cluster.Config{Nodes: 2, Tokens: acme})
		f := c.Fixture()
		for _, tok := range []string{cluster.DefaultToken, cluster.DefaultUnauthorizedToken, cluster.InspectToken} {
			require.NotEqual(t, tok, f.Token)
			require.NotEqual(t, tok, f.UnauthorizedToken)
			refused(t, c, cluster.DefaultTenant, tok)
		}
		require.GreaterOrEqual(t, len(f.Token), 26)
		require.NotEqual(t, f.Token, f.UnauthorizedToken)
		_, err := publish(t, dial(t, c, c.Addr(0), nil), topic(c, cluster.DurableStream), "fixture token")
		require.NoError(t, err)
		forbidden(t, c, f.UnauthorizedToken)
		cl, err := conn.Dial(ctxT(t), c.Addr(1), &conn.Config{TLS: c.TLS(), TenantID: "acme", Token: "acme-secret"})
		require.NoError(t, err, "the operator's token")
		require.NoError(t, cl.Close())
		require.NotEqual(t, f.Token, start(t, cluster.Config{Nodes: 1, Tokens: acme}).Fixture().Token, "fresh for each run")
	})
	t.Run("from the operator's entries", func(t *testing.T) {
		toks := map[string]server.Identity{
			"t1-full-b": {Tenant: "t1", Principal: "b"},
			"t1-full-a": {Tenant: "t1", Principal: "a"},
			"t1-aops":   {Tenant: "t1", Principal: "ops", Deny: server.PermAll, Grant: server.PermNodeView},
			"t1-read":   {Tenant: "t1", Principal: "r", Deny: server.PermPublish},
			"t1-none":   {Tenant: "t1", Principal: "n", Deny: server.PermAll},
			"acme-full": {Tenant: "acme", Principal: "acme"},
		}
		c := start(t, cluster.Config{Nodes: 1, Tokens: toks})
		f := c.Fixture()
		require.Equal(t, "t1-full-a", f.Token, "the first in byte order with every data permission")
		require.Equal(t, "t1-none", f.UnauthorizedToken, "no permission, no grant")
		_, err := publish(t, dial(t, c, c.Addr(0), nil), topic(c, cluster.DurableStream), "operator token")
		require.NoError(t, err)
		forbidden(t, c, f.UnauthorizedToken)
		for _, tok := range []string{cluster.DefaultToken, cluster.DefaultUnauthorizedToken, cluster.InspectToken} {
			refused(t, c, cluster.DefaultTenant, tok)
		}
	})
	t.Run("built in without operator tokens", func(t *testing.T) {
		c := start(t, cluster.Config{Nodes: 1})
		require.Equal(t, cluster.DefaultToken, c.Fixture().Token)
		require.Equal(t, cluster.DefaultUnauthorizedToken, c.Fixture().UnauthorizedToken)
	})
}

// subscribeOwner subscribes through the node serving t's shard 0,
// following one not_leader redirect.
func subscribeOwner(t *testing.T, c *cluster.Cluster, from int, tp felix.Topic) *conn.Subscription {
	t.Helper()
	sub, err := dial(t, c, c.Addr(from), nil).Subscribe(ctxT(t), tp, conn.SubscribeOptions{})
	var nl *felix.NotLeaderError
	if err != nil && errors.As(err, &nl) {
		sub, err = dial(t, c, nl.Addr, nil).Subscribe(ctxT(t), tp, conn.SubscribeOptions{})
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// A cluster serves names never declared as a standalone broker does:
// publish, subscribe and cache calls create them on first use, from every
// node; the fixture's missing stream stays missing; Engine's
// NoAutoCreate flags refuse them, except the declared ones.
func TestNamesCreatedOnFirstUse(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3, Engine: engine.Config{DefaultStream: engine.StreamConfig{Durable: true, Shards: 2}}})
	for i := range c.Nodes() {
		tp := felix.Topic{TenantID: cluster.DefaultTenant, Namespace: "app", Stream: "new-" + strconv.Itoa(i)}
		res, err := publish(t, dial(t, c, c.Addr(i), nil), tp, "first")
		require.NoError(t, err, "publish through node %d", i)
		require.True(t, res.HasOffset, "durable, as DefaultStream says")
		info, ok := c.Engine().StreamInfo(engine.Topic{Tenant: tp.TenantID, Namespace: tp.Namespace, Stream: tp.Stream})
		require.True(t, ok)
		require.Equal(t, uint32(2), info.Shards)

		subTp := felix.Topic{TenantID: tp.TenantID, Namespace: tp.Namespace, Stream: "sub-first-" + strconv.Itoa(i)}
		sub := subscribeOwner(t, c, i, subTp)
		_, err = publish(t, dial(t, c, c.Addr((i+1)%c.Nodes()), nil), subTp, "after the subscribe")
		require.NoError(t, err)
		ev, err := sub.Next(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, "after the subscribe", string(ev.Payload))

		ref := felix.CacheRef{TenantID: tp.TenantID, Namespace: "app", Cache: "cache-" + strconv.Itoa(i)}
		cl := dial(t, c, c.Addr(i), nil)
		require.NoError(t, api.New(cl).CachePut(ctxT(t), ref, "k", []byte("v"), 0))
		v, found, err := api.New(dial(t, c, c.Addr((i+1)%c.Nodes()), nil)).CacheGet(ctxT(t), ref, "k")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, "v", string(v))
		n, _, err := api.New(cl).CounterAdd(ctxT(t), ref, "hits", 2)
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
	}
	_, err := publish(t, dial(t, c, c.Addr(0), nil), topic(c, cluster.MissingStream), "x")
	var be *felix.BrokerError
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotFound, be.Code, "the fixture's missing stream is never created")

	strict := start(t, cluster.Config{Nodes: 2, Engine: engine.Config{NoAutoCreateStreams: true, NoAutoCreateCaches: true}})
	strict.CreateCache(engine.CacheRef{Tenant: cluster.DefaultTenant, Namespace: "app", Cache: "declared"})
	cl := dial(t, strict, strict.Addr(0), nil)
	_, err = publish(t, cl, felix.Topic{TenantID: cluster.DefaultTenant, Namespace: "app", Stream: "nosuch"}, "x")
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotFound, be.Code)
	err = api.New(cl).CachePut(ctxT(t), felix.CacheRef{TenantID: cluster.DefaultTenant, Namespace: "app", Cache: "nosuch"}, "k", nil, 0)
	require.ErrorAs(t, err, &be)
	require.Equal(t, felix.CodeNotFound, be.Code)
	require.NoError(t, api.New(cl).CachePut(ctxT(t), felix.CacheRef{TenantID: cluster.DefaultTenant, Namespace: "app", Cache: "declared"}, "k", nil, 0))
}

// GET /state: every node with its state, the faults in force, the owner
// of every declared and every used shard.
func TestControlState(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 3, QuorumTimeout: time.Millisecond})
	url, err := c.ServeControl("127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, c.CreateStream(engine.Topic{Tenant: "t1", Namespace: "app", Stream: "declared"}, engine.StreamConfig{Shards: 3}))
	c.CreateCache(engine.CacheRef{Tenant: "t1", Namespace: "app", Cache: "declared-cache"})
	_, err = publish(t, dial(t, c, c.Addr(0), nil), felix.Topic{TenantID: "t1", Namespace: "app", Stream: "used"}, "x")
	require.NoError(t, err)

	state := func() cluster.State {
		t.Helper()
		code, body := getCtl(t, c, url+"/state")
		require.Equal(t, http.StatusOK, code, body)
		var st cluster.State
		require.NoError(t, json.Unmarshal([]byte(body), &st))
		return st
	}
	shard := func(st cluster.State, kind, ns, name string, n uint32) cluster.ShardState {
		t.Helper()
		for _, s := range st.Shards {
			if s.Kind == kind && s.Tenant == "t1" && s.Namespace == ns && s.Name == name && s.Shard == n {
				return s
			}
		}
		require.Failf(t, "shard not listed", "%s %s/%s/%d in %+v", kind, ns, name, n, st.Shards)
		return cluster.ShardState{}
	}
	st := state()
	require.Len(t, st.Nodes, 3)
	for i, n := range st.Nodes {
		require.Equal(t, cluster.NodeState{Node: c.NodeID(i), Addr: c.Addr(i), Alive: true}, n)
	}
	require.Equal(t, cluster.LinkState{Addr: c.Fixture().LinkAddr, Node: c.NodeID(c.LinkNode())}, st.Link)
	for s := range uint32(cluster.DefaultDurableShards) {
		o, gen := c.Owner(cluster.DurableStream, s)
		require.Equal(t, cluster.ShardState{Kind: "stream", Tenant: "t1", Namespace: cluster.DefaultNamespace, Name: cluster.DurableStream,
			Shard: s, Owner: c.NodeID(o), OwnerAlive: true, Generation: gen}, shard(st, "stream", cluster.DefaultNamespace, cluster.DurableStream, s))
	}
	for s := range uint32(3) {
		shard(st, "stream", "app", "declared", s)
	}
	shard(st, "stream", "app", "used", 0)
	shard(st, "cache", "app", "declared-cache", 0)
	shard(st, "cache", cluster.DefaultNamespace, cluster.Cache, 0)
	require.Equal(t, len(st.Shards), st.ShardsTotal)
	_, missing := findShard(st, cluster.MissingStream)
	require.False(t, missing, "the missing stream has no shard")

	// Faults: a dead node, a partitioned leader, a stalled link, a fence.
	killed := nonOwner(c, cluster.MovableStream, 0)
	if killed == c.LinkNode() {
		killed = (killed + 1) % c.Nodes()
	}
	code, msg := post(t, c, url+"/kill", `{"node":`+strconv.Itoa(killed)+`}`)
	require.Equal(t, http.StatusOK, code, msg)
	code, msg = post(t, c, url+"/partition", `{}`)
	require.Equal(t, http.StatusOK, code, msg)
	code, msg = post(t, c, url+"/link", `{"fault":"stall","hold_ms":600000}`)
	require.Equal(t, http.StatusOK, code, msg)
	t.Cleanup(c.Heal)
	code, msg = post(t, c, url+"/fence", `{"hold_ms":600000}`)
	require.Equal(t, http.StatusOK, code, msg)
	var fenced struct {
		Result struct{ To string } `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(msg), &fenced))

	st = state()
	require.False(t, st.Nodes[killed].Alive)
	leader, _ := c.Owner(cluster.QuorumStream, 0)
	for i, n := range st.Nodes {
		require.Equal(t, i == leader, n.Partitioned, n.Node)
		require.Equal(t, i != killed, n.Alive, n.Node)
	}
	require.Greater(t, st.Link.StallMs, int64(500_000))
	require.Zero(t, st.Link.DropMs)
	mv := shard(st, "stream", cluster.DefaultNamespace, cluster.MovableStream, 0)
	require.Equal(t, fenced.Result.To, mv.MovingTo)
	for _, s := range st.Shards {
		require.NotEqual(t, c.NodeID(killed), s.Owner, "a killed node's shards moved: %+v", s)
		require.True(t, s.OwnerAlive)
	}
}

func findShard(st cluster.State, name string) (cluster.ShardState, bool) {
	for _, s := range st.Shards {
		if s.Name == name {
			return s, true
		}
	}
	return cluster.ShardState{}, false
}

// State lists at most MaxStateShards shards and counts them all.
func TestStateListsAtMostMaxStateShards(t *testing.T) {
	c := start(t, cluster.Config{Nodes: 2})
	before := c.State().ShardsTotal
	require.NoError(t, c.CreateStream(engine.Topic{Tenant: "t1", Namespace: "app", Stream: "wide"},
		engine.StreamConfig{Shards: cluster.MaxStateShards}))
	st := c.State()
	require.Equal(t, before+cluster.MaxStateShards, st.ShardsTotal)
	require.Len(t, st.Shards, cluster.MaxStateShards)
}
