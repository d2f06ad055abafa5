package interposer

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is a UDP echo server counting what it received.
type echo struct {
	pc   *net.UDPConn
	got  atomic.Int64
	done chan struct{}
}

func startEcho(t *testing.T) *echo {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	e := &echo{pc: pc, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFromUDP(buf)
			if err != nil {
				return
			}
			e.got.Add(1)
			_, _ = pc.WriteToUDP(buf[:n], from)
		}
	}()
	t.Cleanup(func() { pc.Close(); <-e.done })
	return e
}

func startRelay(t *testing.T, e *echo) *Relay {
	r, err := Listen("127.0.0.1:0", e.pc.LocalAddr().String(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	return r
}

func client(t *testing.T, r *Relay) *net.UDPConn {
	c, err := net.DialUDP("udp", nil, r.Addr().(*net.UDPAddr))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends b and reads the echo (bounded by a hang guard only).
func roundTrip(t *testing.T, c *net.UDPConn, b []byte) []byte {
	t.Helper()
	_, err := c.Write(b)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	require.NoError(t, err)
	return buf[:n]
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second) // hang guard
	for !cond() {
		require.True(t, time.Now().Before(deadline), "condition not met")
		time.Sleep(time.Millisecond)
	}
}

func TestRelayForwards(t *testing.T) {
	e := startEcho(t)
	r := startRelay(t, e)
	c := client(t, r)
	require.Equal(t, "hello", string(roundTrip(t, c, []byte("hello"))))
	require.Equal(t, uint64(1), r.Stats().Sessions)
}

func TestRelayDrop(t *testing.T) {
	e := startEcho(t)
	r := startRelay(t, e)
	c := client(t, r)
	roundTrip(t, c, []byte("a"))
	r.Drop(time.Hour)
	_, err := c.Write([]byte("lost"))
	require.NoError(t, err)
	waitFor(t, func() bool { return r.Stats().Dropped == 1 })
	require.Equal(t, int64(1), e.got.Load(), "a dropped datagram reached the broker")
	r.Heal()
	require.Equal(t, "b", string(roundTrip(t, c, []byte("b"))))
}

func TestRelayDropHealsByItself(t *testing.T) {
	e := startEcho(t)
	r := startRelay(t, e)
	c := client(t, r)
	r.Drop(time.Millisecond)
	waitFor(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return time.Now().After(r.dropUntil) })
	require.Equal(t, "x", string(roundTrip(t, c, []byte("x"))))
}

func TestRelayStallDeliversInOrder(t *testing.T) {
	e := startEcho(t)
	r := startRelay(t, e)
	c := client(t, r)
	roundTrip(t, c, []byte("first"))
	r.Stall(time.Hour)
	for _, s := range []string{"1", "2", "3"} {
		_, err := c.Write([]byte(s))
		require.NoError(t, err)
	}
	waitFor(t, func() bool { return r.Stats().Stalled == 3 })
	require.Equal(t, int64(1), e.got.Load(), "a stalled datagram was delivered early")
	r.Heal()
	buf := make([]byte, 16)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	for _, want := range []string{"1", "2", "3"} {
		n, err := c.Read(buf)
		require.NoError(t, err)
		require.Equal(t, want, string(buf[:n]))
	}
}

func TestRelayStallExpires(t *testing.T) {
	e := startEcho(t)
	r := startRelay(t, e)
	c := client(t, r)
	r.Stall(20 * time.Millisecond)
	require.Equal(t, "late", string(roundTrip(t, c, []byte("late"))))
	require.GreaterOrEqual(t, r.Stats().Stalled, uint64(1))
}

func TestRelayReset(t *testing.T) {
	e := startEcho(t)
	r := startRelay(t, e)
	old := client(t, r)
	roundTrip(t, old, []byte("a"))
	r.Reset()
	_, err := old.Write([]byte("dead"))
	require.NoError(t, err)
	waitFor(t, func() bool { return r.Stats().DeadDiscarded == 1 })
	require.Equal(t, int64(1), e.got.Load())

	// A new client passes at once.
	fresh := client(t, r)
	require.Equal(t, "new", string(roundTrip(t, fresh, []byte("new"))))

	// So does a new QUIC connection from the dead session's address: an
	// Initial packet opens a fresh session.
	initial := []byte{0xC0, 0, 0, 0, 1, 'i'}
	require.Equal(t, initial, roundTrip(t, old, initial))
	require.Equal(t, uint64(3), r.Stats().Sessions)
}

func TestApply(t *testing.T) {
	e := startEcho(t)
	r := startRelay(t, e)
	require.NoError(t, r.Apply(FaultDrop, time.Millisecond))
	require.NoError(t, r.Apply(FaultStall, time.Millisecond))
	require.NoError(t, r.Apply(FaultReset, 0))
	require.ErrorIs(t, r.Apply("flap", 0), ErrUnknownFault)
}
