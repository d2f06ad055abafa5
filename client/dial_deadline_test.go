package client_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/flxproto/felix/client"
	"github.com/flxproto/felix/conn"
	"github.com/stretchr/testify/require"
)

// deadAddrs returns a closed loopback UDP port (nothing listens: the
// kernel answers ICMP port unreachable, which QUIC ignores) and a local
// UDP socket that reads and never answers (what an unroutable address
// looks like to a dialler). Neither sends traffic off the machine.
func deadAddrs(t *testing.T) (closed, silent string) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	closed = pc.LocalAddr().String()
	require.NoError(t, pc.Close())
	s, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return closed, s.LocalAddr().String()
}

// client.Dial with the caller's 3 s deadline shorter than DialTimeout
// (5 s): the error still matches context.DeadlineExceeded, and names the
// address and the cause (no answer, and how long the caller waited).
func TestDialWithinCallerDeadlineNamesTheAddress(t *testing.T) {
	closed, silent := deadAddrs(t)
	for name, addr := range map[string]string{"closed port": closed, "silent socket": silent} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := client.Config{Seeds: []string{addr}, Conn: connConfig(t)}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, cfg)
			require.Nil(t, c)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorIs(t, err, conn.ErrNoAnswer)
			var de *conn.DialError
			require.ErrorAs(t, err, &de)
			require.Equal(t, addr, de.Addr)
			require.Contains(t, err.Error(), "no answer from "+addr+" within ")
			// The real wait: the caller's, not DialTimeout's 5 s.
			require.Greater(t, de.Waited, time.Duration(0))
			require.Less(t, de.Waited, client.DefaultDialTimeout)
			require.Contains(t, err.Error(), de.Waited.String())
		})
	}
}

// A call that tried several brokers before its deadline names each one
// with its dial's failure.
func TestDialDeadlineNamesEveryBrokerTried(t *testing.T) {
	closed, silent := deadAddrs(t)
	cfg := client.Config{Seeds: []string{closed, silent}, Conn: connConfig(t), DialTimeout: 300 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, MaxAttempts: 1000}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := client.Dial(ctx, cfg)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var des *client.DialsError
	require.ErrorAs(t, err, &des)
	require.Len(t, des.Dials, 2)
	require.Contains(t, err.Error(), "no answer from "+closed)
	require.Contains(t, err.Error(), "no answer from "+silent)
	require.Contains(t, err.Error(), "within 300ms", "a dial that DialTimeout ended says its real wait")
}

// Concurrent callers of one unreachable broker share its dial: one dial
// in flight, every caller gets its outcome (no caller dials again behind
// another one).
func TestRedialSharedByConcurrentCalls(t *testing.T) {
	_, silent := deadAddrs(t)
	c, n := newClient(t, []string{silent}, func(cfg *client.Config) {
		cfg.DialTimeout = 500 * time.Millisecond
		cfg.MaxAttempts = -1 // one attempt: the dial's outcome is the call's
	})
	const callers = 8
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Connect(ctxT(t))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.ErrorIs(t, err, conn.ErrNoAnswer)
		var de *conn.DialError
		require.True(t, errors.As(err, &de))
	}
	dials := n.count(client.NoticeDialFailed)
	require.GreaterOrEqual(t, dials, 1)
	require.Less(t, dials, callers, "callers share the dial in flight")
}
