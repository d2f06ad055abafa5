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

// A call that tried several brokers names each one with its dial's
// failure: when every broker failed its dial (the call reports them after
// one round, not dialling dead brokers again), and when the caller's
// deadline ends a dial (the error then also matches the deadline).
func TestDialErrorsNameEveryBrokerTried(t *testing.T) {
	closed, silent := deadAddrs(t)
	t.Run("every broker failed", func(t *testing.T) {
		cfg := client.Config{Seeds: []string{closed, silent}, Conn: connConfig(t), DialTimeout: 300 * time.Millisecond,
			BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, MaxAttempts: 1000}
		_, err := client.Dial(ctxT(t), cfg)
		var des *client.DialsError
		require.ErrorAs(t, err, &des)
		require.Nil(t, des.Ctx)
		require.Len(t, des.Dials, 2, "each broker dialled once")
		require.ErrorIs(t, err, conn.ErrNoAnswer)
		require.Contains(t, err.Error(), "every broker tried failed to connect")
		require.Contains(t, err.Error(), "no answer from "+closed+" within 300ms")
		require.Contains(t, err.Error(), "no answer from "+silent+" within 300ms")
	})
	t.Run("deadline during the second dial", func(t *testing.T) {
		cfg := client.Config{Seeds: []string{closed, silent}, Conn: connConfig(t), DialTimeout: 2 * time.Second}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := client.Dial(ctx, cfg)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		var des *client.DialsError
		require.ErrorAs(t, err, &des)
		require.Equal(t, context.DeadlineExceeded, des.Ctx)
		require.Contains(t, err.Error(), "no answer from "+closed)
		require.Contains(t, err.Error(), "no answer from "+silent)
	})
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
