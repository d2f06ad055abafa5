package client_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/flxproto/felix/client"
	"github.com/stretchr/testify/require"
)

// syncBuf is a bytes.Buffer safe for the client's concurrent logging.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// A broker stopping gracefully under a publishing program: the client's
// notices and logs name the drain or the shutdown, never the credentials
// (a draining broker refuses new streams' auth with a retryable code),
// and never the client's own close of the connection it dropped.
func TestGracefulStopNamesTheRealCause(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	var logs syncBuf
	c, n := newClient(t, []string{a.addr, b.addr}, func(cfg *client.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	require.NoError(t, c.Connect(ctxT(t)))
	serving := a
	if n.wait(t, client.NoticeConnected, nil).Addr == b.addr {
		serving = b
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithCancel(ctxT(t))
			c.Publish(ctx, topic, []byte("x"), acked) // outcomes vary during the stop
			cancel()
		}
	}()
	serving.stop()
	ev := n.wait(t, client.NoticeDisconnected, func(ev client.Notice) bool { return ev.Addr == serving.addr })
	close(stop)
	<-done
	require.Error(t, ev.Err)
	msg := ev.Err.Error()
	require.NotContains(t, msg, "client closing", "the client's own close is not the cause")
	require.True(t, strings.Contains(msg, "draining") || strings.Contains(msg, "shut"), "names the drain: %s", msg)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ev := range n.list {
		if ev.Err != nil {
			require.NotContains(t, ev.Err.Error(), "credentials", "%v notice", ev.Kind)
			require.NotContains(t, ev.Err.Error(), "token", "%v notice", ev.Kind)
		}
	}
	require.NotContains(t, logs.String(), "credentials")
}

// A resume notice is a success: the log names what ended the previous
// event stream as "after", not as an error.
func TestResumedNoticeLogsNoError(t *testing.T) {
	var logs syncBuf
	log := client.LogNotices(slog.New(slog.NewTextHandler(&logs, nil)))
	log(client.Notice{Kind: client.NoticeResumed, Op: "subscribe", Addr: "127.0.0.1:1", Err: client.ErrClosed})
	require.Contains(t, logs.String(), "after=")
	require.NotContains(t, logs.String(), "err=")
}
