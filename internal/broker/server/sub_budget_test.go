package server_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/server"
)

// Issue 35 findings 1 and 2 at small scale: what one tenant's
// subscriptions and watches hold on many connections together is bounded
// by its share, refused limit_exceeded naming the limit, and another
// tenant subscribes meanwhile; the broker-wide budget bounds the sum, and
// every charge comes back when the subscriptions end.
func TestSubscriptionBudgets(t *testing.T) {
	const prefix = 4 << 10
	const each = server.SubscriptionCost + prefix
	toks, err := server.ParseTokens("t1:demo-token,t2:b,t3:c")
	require.NoError(t, err)
	cfg := durableCfg()
	cfg.Tokens = toks
	cfg.MaxTenantSubscriptionBytes = 8 * each
	cfg.MaxSubscriptionBytes = 12 * each
	srv := startBroker(t, cfg)
	ctx := ctxT(t)
	as := func(tenant, token string) *conn.Client {
		return dial(t, srv, func(c *conn.Config) { c.TenantID, c.Token = tenant, token })
	}
	limited := func(err error, limit string) {
		t.Helper()
		var be *felix.BrokerError
		require.ErrorAs(t, err, &be)
		require.Equal(t, felix.CodeLimitExceeded, be.Code)
		require.Contains(t, be.Message, limit)
	}
	watch := func(c *conn.Client, tenant string, i int) (*conn.Watch, error) {
		ref := felix.CacheRef{TenantID: tenant, Namespace: "ns", Cache: "c"}
		p := strings.Repeat("p", prefix-4) + string(rune('a'+i%26)) + "xyz"
		return c.CacheWatch(ctx, ref, conn.WatchOptions{Prefix: felix.Some(p[:prefix])})
	}

	// t1 on three connections: 8 watches with 4 KiB prefixes fit its
	// share, the 9th is refused whichever connection asks.
	t1 := []*conn.Client{as("t1", "demo-token"), as("t1", "demo-token"), as("t1", "demo-token")}
	var held []*conn.Watch
	for i := range 8 {
		w, err := watch(t1[i%3], "t1", i)
		require.NoError(t, err, "watch %d", i)
		held = append(held, w)
	}
	for i := range 3 {
		_, err := watch(t1[i], "t1", 8+i)
		limited(err, "max_tenant_subscription_bytes")
		_, err = t1[i].Subscribe(ctx, topic, conn.SubscribeOptions{})
		limited(err, "max_tenant_subscription_bytes")
	}
	// t2 has its own share: 4 subscriptions, then the broker-wide budget
	// (12 watches' worth) is what refuses it, named as such.
	t2 := as("t2", "b")
	t2topic := felix.Topic{TenantID: "t2", Namespace: "ns", Stream: "s"}
	var subs []*conn.Subscription
	for {
		s, err := t2.Subscribe(ctx, t2topic, conn.SubscribeOptions{})
		if err != nil {
			limited(err, "max_subscription_bytes")
			break
		}
		subs = append(subs, s)
		require.Less(t, len(subs), 100)
	}
	require.Equal(t, (12*each-8*each)/server.SubscriptionCost, len(subs))
	require.EqualValues(t, 7, srv.Stats().SubscriptionsRefused)

	// Ending t1's watches gives their charges back: t3 subscribes.
	for _, w := range held {
		require.NoError(t, w.Close())
	}
	t3 := as("t3", "c")
	waitFor(t, func() bool {
		s, err := t3.Subscribe(ctx, felix.Topic{TenantID: "t3", Namespace: "ns", Stream: "s"}, conn.SubscribeOptions{})
		if err == nil {
			_ = s.Close()
		}
		return err == nil
	}, "t1's charges returned")
	checkServing(t, dial(t, srv, nil))
}
