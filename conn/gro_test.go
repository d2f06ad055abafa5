package conn

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"testing"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/ipv4"

	"github.com/flxproto/felix"
)

// ecnTrace is a qlog trace that reports the first verdict of quic-go's
// ECN validation (capable, or failed when the peer's ACKs carry no ECN
// counts: its receive path lost the marks).
type ecnTrace struct{ verdict chan qlog.ECNState }

func (e *ecnTrace) AddProducer() qlogwriter.Recorder { return e }
func (e *ecnTrace) Close() error                     { return nil }
func (e *ecnTrace) RecordEvent(ev qlogwriter.Event) {
	if u, ok := ev.(qlog.ECNStateUpdated); ok && (u.State == qlog.ECNStateCapable || u.State == qlog.ECNStateFailed) {
		select {
		case e.verdict <- u.State:
		default:
		}
	}
}

func (e *ecnTrace) tracer(context.Context, bool, quic.ConnectionID) qlogwriter.Trace { return e }

// Over real QUIC on loopback, with UDP GRO (the default) and without
// (NoGRO): the client's and the listener's sockets are read through
// udpgro's reader exactly when GRO is on (Linux), quic-go still sends with GSO
// on both sides, each side's ECN marks reach the other's receive path
// (quic-go's validation says capable, not failed), and large event
// batches, sent as coalesced datagrams, arrive intact.
func TestGROKeepsGSOAndECN(t *testing.T) {
	for _, noGRO := range []bool{false, true} {
		t.Run(map[bool]string{false: "gro", true: "nogro"}[noGRO], func(t *testing.T) {
			leakCheck(t)
			srvECN, cliECN := &ecnTrace{verdict: make(chan qlog.ECNState, 1)}, &ecnTrace{verdict: make(chan qlog.ECNState, 1)}
			b := startBroker(t, brokerOpts{offer: fullOffer(), ackOffsets: true, server: func(sc *ServerConfig) {
				sc.NoGRO = noGRO
				sc.QUIC = &quic.Config{Tracer: srvECN.tracer}
			}})
			c := b.dial(t, func(cfg *Config) {
				cfg.NoGRO = noGRO
				cfg.QUIC = DefaultQUICConfig()
				cfg.QUIC.Tracer = cliECN.tracer
			})
			wantGRO := runtime.GOOS == "linux" && !noGRO
			// The GRO reader is the connection with a ReadBatch of its own.
			type batchReader interface {
				ReadBatch([]ipv4.Message, int) (int, error)
			}
			_, cliGRO := c.tr.Conn.(batchReader)
			_, srvGRO := b.ln.tr.Conn.(batchReader)
			require.Equal(t, wantGRO, cliGRO, "client socket read with GRO")
			require.Equal(t, wantGRO, srvGRO, "listener socket read with GRO")
			if !wantGRO {
				require.IsType(t, &net.UDPConn{}, c.tr.Conn)
			}

			ctx := testCtx(t)
			var sent [][]byte
			for i := range 4 {
				p := bytes.Repeat([]byte{byte('a' + i)}, 100_000+i)
				sent = append(sent, p)
			}
			_, err := c.PublishBatch(ctx, topic, sent, PublishOptions{Ack: felix.AckPerBatch})
			require.NoError(t, err)
			sub, err := c.Subscribe(ctx, topic, SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
			require.NoError(t, err)
			defer sub.Close()
			for i, want := range sent {
				ev, err := sub.Next(ctx)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want, ev.Payload), "event %d intact", i)
			}

			require.True(t, c.qc.ConnectionState().GSO, "the client sends with GSO")
			b.ln.mu.Lock()
			var sc *ServerConn
			for s := range b.ln.conns {
				sc = s
			}
			b.ln.mu.Unlock()
			require.NotNil(t, sc)
			require.True(t, sc.qc.ConnectionState().GSO, "the listener sends with GSO")
			require.Equal(t, qlog.ECNStateCapable, recv(t, srvECN.verdict, "server ECN verdict"), "the client's receive path keeps the ECN marks")
			require.Equal(t, qlog.ECNStateCapable, recv(t, cliECN.verdict, "client ECN verdict"), "the listener's receive path keeps the ECN marks")
		})
	}
}
