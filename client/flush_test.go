package client_test

import (
	"fmt"
	"testing"

	"github.com/flxproto/felix/client"
	"github.com/stretchr/testify/require"
)

// Flush returns once the broker has read every fire-and-forget publish
// written before it: they are all in the log when it returns, without
// an acknowledgement per publish. Close drains the same way.
func TestFlushAndCloseDrainFireAndForget(t *testing.T) {
	b := startBroker(t)
	c, _ := newClient(t, []string{b.addr}, nil)
	ctx := ctxT(t)
	tp := client.Topic{TenantID: topic.TenantID, Namespace: "ns", Stream: "faf"}
	const n = 500
	var want []string
	for i := range n {
		want = append(want, fmt.Sprint("f", i))
		_, err := c.Publish(ctx, tp, []byte(want[i]), client.PublishOptions{NoAck: true})
		require.NoError(t, err)
	}
	require.NoError(t, c.Flush(ctx))
	require.Equal(t, want, readLog(t, b, tp), "every fire-and-forget record was read before Flush returned")
	require.NoError(t, c.Flush(ctx), "nothing new to flush")

	tp2 := client.Topic{TenantID: topic.TenantID, Namespace: "ns", Stream: "faf-close"}
	c2, _ := newClient(t, []string{b.addr}, nil)
	var want2 []string
	for i := range n {
		want2 = append(want2, fmt.Sprint("c", i))
		_, err := c2.Publish(ctx, tp2, []byte(want2[i]), client.PublishOptions{NoAck: true})
		require.NoError(t, err)
	}
	require.NoError(t, c2.Close())
	require.Equal(t, want2, readLog(t, b, tp2), "Close drained the publish streams")
	require.ErrorIs(t, c2.Flush(ctx), client.ErrClosed)
}
