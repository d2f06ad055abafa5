package conn

import (
	"context"
	"errors"
	"net"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
)

// hookLog records every hook call of one side.
type hookLog struct {
	mu       sync.Mutex
	opened   []ConnInfo
	closed   []ConnInfo
	authed   []StreamInfo
	refused  []StreamInfo
	read     []FrameInfo
	written  []FrameInfo
	sent     []PublishInfo
	acked    []PublishInfo
	lagged   []LagInfo
	closedCh chan ConnInfo
}

func newHookLog() *hookLog { return &hookLog{closedCh: make(chan ConnInfo, 16)} }

func (l *hookLog) hooks() *Hooks {
	add := func(f func()) { l.mu.Lock(); f(); l.mu.Unlock() }
	return &Hooks{
		ConnOpened: func(e ConnInfo) { add(func() { l.opened = append(l.opened, e) }) },
		ConnClosed: func(e ConnInfo) {
			add(func() { l.closed = append(l.closed, e) })
			l.closedCh <- e
		},
		StreamAuthenticated: func(e StreamInfo) { add(func() { l.authed = append(l.authed, e) }) },
		StreamRefused:       func(e StreamInfo) { add(func() { l.refused = append(l.refused, e) }) },
		FrameRead:           func(e FrameInfo) { add(func() { l.read = append(l.read, e) }) },
		FrameWritten:        func(e FrameInfo) { add(func() { l.written = append(l.written, e) }) },
		PublishSent:         func(e PublishInfo) { add(func() { l.sent = append(l.sent, e) }) },
		PublishAcked:        func(e PublishInfo) { add(func() { l.acked = append(l.acked, e) }) },
		SubscriptionLagged:  func(e LagInfo) { add(func() { l.lagged = append(l.lagged, e) }) },
	}
}

// frames sums the bytes of the frames of each stream with the given layout.
func sumFrames(evs []FrameInfo, layout felix.Layout) map[int64]int {
	out := map[int64]int{}
	for _, e := range evs {
		if e.Layout == layout {
			out[e.StreamID] += e.Bytes
		}
	}
	return out
}

func TestHooksFireOverQUIC(t *testing.T) {
	leakCheck(t)
	srv, cli := newHookLog(), newHookLog()
	b := startBroker(t, brokerOpts{offer: fullOffer(), server: func(c *ServerConfig) { c.Hooks = srv.hooks() }})
	c := b.dial(t, func(c *Config) { c.Hooks = cli.hooks(); c.OfferALPN = true })
	ctx := testCtx(t)

	// Binary acked, binary fire-and-forget and JSON acked publishes.
	res, err := c.PublishBatch(ctx, topic, [][]byte{[]byte("a"), []byte("b")}, PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	_ = res
	_, err = c.Publish(ctx, topic, []byte("c"), PublishOptions{NoAck: true})
	require.NoError(t, err)
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartAt(0)})
	require.NoError(t, err)
	evs := nextN(t, ctx, sub, 3)
	require.Len(t, evs, 3)
	_, err = c.Publish(ctx, felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "missing"}, []byte("x"), PublishOptions{Ack: felix.AckPerBatch})
	require.Error(t, err)
	sub.Close()
	require.NoError(t, c.Close())

	cl := recv(t, cli.closedCh, "the client's closed hook")
	require.Equal(t, SideClient, cl.Side)
	require.ErrorContains(t, cl.Err, "client closing")
	sc := recv(t, srv.closedCh, "the server's closed hook")
	require.Equal(t, SideServer, sc.Side)
	require.Error(t, sc.Err)

	cli.mu.Lock()
	defer cli.mu.Unlock()
	srv.mu.Lock()
	defer srv.mu.Unlock()

	// Connections: one each, the same addresses seen from both ends.
	require.Len(t, cli.opened, 1)
	require.Len(t, srv.opened, 1)
	require.Equal(t, ALPN, cli.opened[0].ALPN)
	require.Equal(t, ALPN, srv.opened[0].ALPN)
	require.Equal(t, cli.opened[0].Local.(*net.UDPAddr).Port, srv.opened[0].Remote.(*net.UDPAddr).Port)
	require.Equal(t, srv.opened[0].Local.(*net.UDPAddr).Port, cli.opened[0].Remote.(*net.UDPAddr).Port)

	// Streams: every stream the client authenticated, the server did too.
	require.NotEmpty(t, cli.authed)
	var cids, sids []int64
	for _, e := range cli.authed {
		require.Equal(t, "t1", e.TenantID)
		cids = append(cids, e.StreamID)
	}
	for _, e := range srv.authed {
		require.Equal(t, "t1", e.TenantID)
		sids = append(sids, e.StreamID)
	}
	require.ElementsMatch(t, cids, sids)
	require.Empty(t, cli.refused)

	// Frames: what the client wrote the server read, stream by stream and
	// byte for byte, and the other way round for the answers.
	require.Equal(t, sumFrames(cli.written, felix.LayoutAckedPublishBatch), sumFrames(srv.read, felix.LayoutAckedPublishBatch))
	require.Equal(t, sumFrames(cli.written, felix.LayoutPublishBatch), sumFrames(srv.read, felix.LayoutPublishBatch))
	require.NotEmpty(t, sumFrames(cli.written, felix.LayoutPublishBatch))
	require.Equal(t, sumFrames(srv.written, felix.LayoutPublishAck), sumFrames(cli.read, felix.LayoutPublishAck))
	require.Equal(t, sumFrames(srv.written, felix.LayoutEventBatch), sumFrames(cli.read, felix.LayoutEventBatch))
	require.NotEmpty(t, sumFrames(cli.read, felix.LayoutEventBatch))
	require.NotEmpty(t, sumFrames(cli.read, felix.LayoutJSON)) // auth answers, subscribed, hello

	// Publishes: three sent (two acked), two answers, one ok, one error.
	require.Len(t, cli.sent, 3)
	require.Equal(t, 2, cli.sent[0].Records)
	require.True(t, cli.sent[0].Acked)
	require.False(t, cli.sent[1].Acked)
	require.Zero(t, cli.sent[1].RequestID)
	require.Len(t, cli.acked, 2)
	require.Equal(t, cli.sent[0].RequestID, cli.acked[0].RequestID)
	require.Equal(t, "ok", cli.acked[0].Outcome)
	require.NoError(t, cli.acked[0].Err)
	require.Positive(t, cli.acked[0].Latency)
	require.Equal(t, cli.sent[2].RequestID, cli.acked[1].RequestID)
	require.NotEqual(t, "ok", cli.acked[1].Outcome)
	require.Error(t, cli.acked[1].Err)
	require.Empty(t, srv.sent) // client-only hooks
}

func TestHooksRefusedAndLagged(t *testing.T) {
	leakCheck(t)
	srv, cli := newHookLog(), newHookLog()
	auth := func(_ context.Context, a *felix.Auth) (any, error) {
		if a.Token != "tok" {
			return nil, errors.New("bad token")
		}
		return nil, nil
	}
	b := startBroker(t, brokerOpts{offer: fullOffer(), auth: auth, server: func(c *ServerConfig) { c.Hooks = srv.hooks() }})
	_, err := Dial(testCtx(t), b.addr(), &Config{TLS: b.clientConfig().TLS, TenantID: "t1", Token: "wrong", Hooks: cli.hooks()})
	require.ErrorIs(t, err, felix.ErrAuthRefused)
	recv(t, cli.closedCh, "the client's closed hook after a refused auth")
	cli.mu.Lock()
	require.Len(t, cli.refused, 1)
	require.ErrorIs(t, cli.refused[0].Err, felix.ErrAuthRefused)
	cli.mu.Unlock()
	waitFor(t, func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return len(srv.refused) == 1 })
	srv.mu.Lock()
	var be *felix.BrokerError
	require.ErrorAs(t, srv.refused[0].Err, &be)
	require.Equal(t, felix.CodeUnauthenticated, be.Code)
	srv.mu.Unlock()

	lag := newHookLog()
	c := b.dial(t, func(c *Config) { c.Hooks = lag.hooks() })
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{})
	require.NoError(t, err)
	waitFor(t, func() bool { return b.subscribers(topicKey("t1", "ns", "s")) == 1 })
	b.terminate(topicKey("t1", "ns", "s"), func(id uint64) felix.Message {
		return &felix.SubscriptionLagged{SubscriptionID: id, ResumeFrom: 9}
	})
	_, err = sub.Next(ctx)
	require.ErrorAs(t, err, new(*felix.LaggedError))
	lag.mu.Lock()
	defer lag.mu.Unlock()
	require.Equal(t, []LagInfo{{SubscriptionID: sub.ID(), ResumeFrom: 9}}, lag.lagged)
}

// Publishes whose payloads are a sequence or a parsed batch are counted
// by records too.
func TestHooksCountSeqAndViewPublishes(t *testing.T) {
	leakCheck(t)
	cli := newHookLog()
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, func(c *Config) { c.Hooks = cli.hooks() })
	ctx := testCtx(t)
	_, err := c.PublishSeq(ctx, topic, slices.Values([][]byte{[]byte("a"), []byte("b"), []byte("c")}), PublishOptions{Ack: felix.AckPerBatch})
	require.NoError(t, err)
	frame, err := felix.AppendPublishBatch(nil, &felix.PublishBatch{TenantID: "t1", Namespace: "ns", Stream: "s", Payloads: [][]byte{[]byte("d"), []byte("e")}})
	require.NoError(t, err)
	f, err := felix.DecodeFrame(frame, felix.DefaultMaxFrameBytes)
	require.NoError(t, err)
	v, err := felix.ParsePublishBatch(f.Flags, f.Payload)
	require.NoError(t, err)
	_, err = c.PublishView(ctx, topic, &v, PublishOptions{NoAck: true})
	require.NoError(t, err)
	cli.mu.Lock()
	defer cli.mu.Unlock()
	require.Len(t, cli.sent, 2)
	require.Equal(t, 3, cli.sent[0].Records)
	require.Equal(t, 2, cli.sent[1].Records)
	require.Len(t, cli.acked, 1)
	require.Equal(t, 3, cli.acked[0].Records)
}

// TestHooksSeeNextFrameAndBatch: the frames NextBatch and NextFrame read
// reach FrameRead as Next's do (they share one read path), and the events
// of a frame Next had partly returned, encoded anew by NextFrame, are not
// reported as a second read.
func TestHooksSeeNextFrameAndBatch(t *testing.T) {
	leakCheck(t)
	cli := newHookLog()
	b := startBroker(t, brokerOpts{offer: fullOffer()})
	c := b.dial(t, func(c *Config) { c.Hooks = cli.hooks(); c.Flags = felix.KnownFlags })
	ctx := testCtx(t)
	key := topicKey("t1", "ns", "s")
	b.append(key, [][]byte{[]byte("a"), []byte("b"), []byte("c")})
	sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer sub.Close()

	v, err := sub.NextBatch(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, v.Len())
	b.append(key, [][]byte{[]byte("d"), []byte("e")})
	f, err := sub.NextFrame(ctx)
	require.NoError(t, err)
	require.Equal(t, felix.LayoutEventBatch, f.Flags.Layout())
	b.append(key, [][]byte{[]byte("g"), []byte("h")})
	ev, err := sub.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "g", string(ev.Payload))
	_, err = sub.NextFrame(ctx) // "h", encoded anew: no read
	require.NoError(t, err)

	cli.mu.Lock()
	defer cli.mu.Unlock()
	// The event stream is the one server-initiated unidirectional stream
	// (QUIC stream id ≡ 3 mod 4): its hello, then three event batches.
	var onEvents []FrameInfo
	for _, e := range cli.read {
		if e.StreamID%4 == 3 {
			onEvents = append(onEvents, e)
		}
	}
	require.Len(t, onEvents, 4)
	require.Equal(t, felix.LayoutJSON, onEvents[0].Layout)
	for _, e := range onEvents[1:] {
		require.Equal(t, SideClient, e.Side)
		require.Equal(t, felix.LayoutEventBatch, e.Layout)
		require.Equal(t, onEvents[0].StreamID, e.StreamID)
	}
	require.Equal(t, felix.HeaderLen+len(f.Payload), onEvents[2].Bytes)
	require.Equal(t, f.Flags, onEvents[2].Flags)
}

// TestJoinHooks: every field of the joined Hooks calls the field of each
// element that sets it, in the order given; an element's unset field is
// skipped; a field no element sets stays nil; nil elements are ignored and
// a single non-nil element is returned itself. The fields are walked by
// reflection, so a field added to Hooks but not joined fails here.
func TestJoinHooks(t *testing.T) {
	var calls []string
	mk := func(name string, skip string) *Hooks {
		h := &Hooks{}
		v := reflect.ValueOf(h).Elem()
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Name == skip {
				continue
			}
			tag := name + "." + f.Name
			v.Field(i).Set(reflect.MakeFunc(f.Type, func([]reflect.Value) []reflect.Value {
				calls = append(calls, tag)
				return nil
			}))
		}
		return h
	}
	a, b, c := mk("a", ""), mk("b", "FrameRead"), mk("c", "")
	j := JoinHooks(nil, a, b, nil, c)
	v := reflect.ValueOf(j).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		calls = nil
		require.False(t, v.Field(i).IsNil(), f.Name)
		v.Field(i).Call([]reflect.Value{reflect.Zero(f.Type.In(0))})
		want := []string{"a." + f.Name, "b." + f.Name, "c." + f.Name}
		if f.Name == "FrameRead" {
			want = []string{"a.FrameRead", "c.FrameRead"}
		}
		require.Equal(t, want, calls, f.Name)
	}

	require.Nil(t, JoinHooks())
	require.Nil(t, JoinHooks(nil, nil))
	require.Same(t, a, JoinHooks(nil, a, nil))
	only := &Hooks{ConnOpened: func(ConnInfo) {}}
	j = JoinHooks(only, &Hooks{})
	require.Nil(t, j.FrameRead, "a field no element sets stays nil (no cost at its site)")
	require.NotNil(t, j.ConnOpened)
}
