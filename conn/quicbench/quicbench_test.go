package quicbench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// TestSendReceive: every frame the sender writes is read whole.
func TestSendReceive(t *testing.T) {
	for _, gro := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "gro"}[gro], func(t *testing.T) { testSendReceive(t, gro) })
	}
}

func testSendReceive(t *testing.T, gro bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	frame, err := felix.AppendEventBatch(nil, &felix.EventBatch{Payloads: [][]byte{make([]byte, 3000), []byte("x")}}, 0)
	require.NoError(t, err)
	other, err := felix.AppendEventBatch(nil, &felix.EventBatch{Payloads: [][]byte{[]byte("y")}}, 0)
	require.NoError(t, err)
	s, err := Listen("127.0.0.1:0", gro)
	require.NoError(t, err)
	defer s.Close()
	sent := make(chan error, 1)
	go func() { sent <- s.Send(ctx, [][]byte{frame, other}, 50) }() // in turn
	frames, n, err := Receive(ctx, s.Addr().String(), s.Cert(), gro)
	require.NoError(t, err)
	require.EqualValues(t, 50, frames)
	require.EqualValues(t, 25*(len(frame)-felix.HeaderLen)+25*(len(other)-felix.HeaderLen), n)
	require.NoError(t, <-sent)
}
