package server_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

// Hundreds of random frames (random flag words, lengths and bodies, also
// mutations of valid publishes and JSON requests) on many raw streams: the
// broker answers or ends those streams, never crashes, and keeps serving a
// well-behaved client throughout.
func TestRandomFramesKeepBrokerServing(t *testing.T) {
	srv := startBroker(t, durableCfg())
	good := dial(t, srv, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	valid := [][]byte{
		ackedFrame(t, 1, "a", "b"),
		mustFrame(t, &felix.CacheGet{TenantID: "t1", Namespace: "ns", Cache: "c", Key: "k", RequestID: felix.Some[uint64](1)}),
		mustFrame(t, &felix.Subscribe{TenantID: "t1", Namespace: "ns", Stream: "s", Start: felix.Some(felix.StartAt(0))}),
		mustFrame(t, &felix.PublishBatchMessage{TenantID: "t1", Namespace: "ns", Stream: "s", Payloads: [][]byte{[]byte("x")}, RequestID: felix.Some[uint64](2)}),
	}
	deadline := time.Now().Add(20 * time.Second)
	for round := 0; round < 40 && time.Now().Before(deadline); round++ {
		r := dialRaw(t, srv)
		for range 8 {
			s := r.stream(t, felix.KnownFlags, felix.FeatureErrorCodes|felix.FeatureUnsupported)
			var frame []byte
			switch rng.IntN(3) {
			case 0: // random header and body
				body := make([]byte, rng.IntN(64))
				for i := range body {
					body[i] = byte(rng.Uint32())
				}
				frame = felix.AppendHeader(nil, felix.Header{Flags: felix.Flags(rng.Uint32()), Length: uint32(len(body))})
				frame = append(frame, body...)
			case 1: // a valid frame with bytes flipped after the header
				frame = append([]byte(nil), valid[rng.IntN(len(valid))]...)
				for range 1 + rng.IntN(3) {
					i := felix.HeaderLen + rng.IntN(len(frame)-felix.HeaderLen)
					frame[i] ^= byte(1 + rng.IntN(255))
				}
			default: // a valid frame whose announced length lies
				frame = append([]byte(nil), valid[rng.IntN(len(valid))]...)
				binary.BigEndian.PutUint32(frame[8:], uint32(rng.IntN(2*len(frame))))
			}
			_, _ = s.s.Write(frame)
			if rng.IntN(2) == 0 {
				_ = s.s.Close()
			}
			// read whatever the broker answers until it ends or goes quiet
			for range 4 {
				_ = s.s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				if _, err := s.r.ReadFrame(); err != nil {
					break
				}
			}
			s.s.CancelRead(0)
			s.s.CancelWrite(0)
		}
		_ = r.qc.CloseWithError(0, "done")
		if round%10 == 0 {
			checkServing(t, good)
		}
	}
	checkServing(t, good)
	require.Positive(t, srv.Stats().Streams)
}

func mustFrame(t *testing.T, m felix.Message) []byte {
	t.Helper()
	b, err := felix.AppendMessageFrame(nil, m)
	require.NoError(t, err)
	return b
}
