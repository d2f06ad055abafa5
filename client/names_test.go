package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// A name the protocol cannot carry is a name error, refused before any
// dial (a 70,000-byte stream name was reported as "frame too large"); the
// longest allowed name and names with spaces or dots are sent.
func TestNameRulesCheckedLocally(t *testing.T) {
	b := startBroker(t)
	c, n := newClient(t, []string{b.addr}, nil)
	long := client.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: strings.Repeat("s", 70_000)}
	_, err := c.Publish(ctxT(t), long, []byte("x"), acked)
	require.ErrorIs(t, err, client.ErrBadName)
	require.NotErrorIs(t, err, felix.ErrFrameTooLarge)
	require.Contains(t, err.Error(), "the stream name is 70000 bytes long: names are UTF-8 text of 1 to 65535 bytes; nothing was sent")
	_, err = c.Subscribe(ctxT(t), client.Topic{TenantID: server.DemoTenant, Namespace: "n\xffs", Stream: "s"}, client.SubscribeOptions{})
	require.ErrorIs(t, err, client.ErrBadName)
	require.Contains(t, err.Error(), "the namespace is not valid UTF-8")
	err = c.CachePut(ctxT(t), client.CacheRef{TenantID: server.DemoTenant, Namespace: "ns", Cache: strings.Repeat("c", client.MaxNameBytes+1)}, "k", []byte("v"), 0)
	require.ErrorIs(t, err, client.ErrBadName)
	require.Contains(t, err.Error(), "the cache name is 65536 bytes long")
	require.Zero(t, n.count(client.NoticeConnected)+n.count(client.NoticeDialFailed), "nothing dialled for a bad name")

	for _, name := range []string{"a b", "..", strings.Repeat("x", 1000)} {
		_, err := c.Publish(context.Background(), client.Topic{TenantID: server.DemoTenant, Namespace: "ns", Stream: name}, []byte("x"), acked)
		require.NoError(t, err, "%q is a valid name", name)
	}
}
