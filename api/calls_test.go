package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/api"
)

// recorder is a Requestor that records every request it is given, refuses
// what caps does not advertise as conn.Client.Request does (nothing
// recorded as sent), and answers with answer(req).
type recorder struct {
	caps   felix.Capabilities
	answer func(felix.Message) felix.Message
	sent   []felix.Message
}

func (r *recorder) Request(_ context.Context, req felix.Message) (felix.Message, error) {
	if what := r.caps.Unadvertised(req); what != "" {
		return nil, fmt.Errorf("%w: %s", felix.ErrNotAdvertised, what)
	}
	r.sent = append(r.sent, req)
	return r.answer(req), nil
}

var callsCache = felix.CacheRef{TenantID: "t1", Namespace: "ns", Cache: "c"}

// The TTL of a put is sent in whole milliseconds, a positive
// sub-millisecond one rounded up to 1, and no TTL is absent (null), not 0.
func TestCallsPutTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		want felix.Opt[uint64]
	}{
		{0, felix.Opt[uint64]{}},
		{-time.Second, felix.Opt[uint64]{}},
		{time.Microsecond, felix.Some[uint64](1)},
		{1500 * time.Millisecond, felix.Some[uint64](1500)},
	} {
		t.Run(tc.ttl.String(), func(t *testing.T) {
			r := &recorder{caps: felix.Capabilities{Features: felix.KnownFeatures}, answer: func(m felix.Message) felix.Message {
				if _, ok := m.(*felix.CachePutIf); ok {
					return &felix.CacheConditionResult{Applied: true}
				}
				return &felix.CacheOK{}
			}}
			x := api.New(r)
			require.NoError(t, x.CachePut(context.Background(), callsCache, "k", []byte("v"), tc.ttl))
			_, err := x.CachePutIf(context.Background(), callsCache, "k", []byte("v"), api.IfAbsent, tc.ttl)
			require.NoError(t, err)
			require.Len(t, r.sent, 2)
			require.Equal(t, tc.want, r.sent[0].(*felix.CachePut).TTLMs)
			require.Equal(t, tc.want, r.sent[1].(*felix.CachePutIf).TTLMs)
		})
	}
}

// Delivery.Nack names the delivery's attempt count; to a broker without
// claim control an immediate nack goes without it (the first try was
// refused before sending), a delayed one is refused.
func TestCallsDeliveryNack(t *testing.T) {
	for _, claim := range []bool{true, false} {
		t.Run(fmt.Sprint("claim control ", claim), func(t *testing.T) {
			caps := felix.Capabilities{Features: felix.FeatureConsumerGroup}
			if claim {
				caps.Features |= felix.FeatureGroupClaimControl
			}
			r := &recorder{caps: caps, answer: func(m felix.Message) felix.Message {
				if _, ok := m.(*felix.GroupPoll); ok {
					return &felix.GroupRecords{Records: []felix.GroupRecord{{Offset: 7, Attempts: 3}}}
				}
				return &felix.CacheOK{}
			}}
			g := api.New(r).Group(api.GroupRef{Topic: felix.Topic{TenantID: "t1", Namespace: "ns", Stream: "s"}, Group: "g"})
			for d, err := range g.Records(context.Background()) {
				require.NoError(t, err)
				err = d.Nack(context.Background(), time.Second)
				if claim {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, felix.ErrNotAdvertised, "a delay needs claim control")
				}
				require.NoError(t, d.Nack(context.Background(), 0))
				break
			}
			var nacks []*felix.GroupNack
			for _, m := range r.sent {
				if n, ok := m.(*felix.GroupNack); ok {
					nacks = append(nacks, n)
				}
			}
			if claim {
				require.Len(t, nacks, 2)
				require.Equal(t, uint32(3), nacks[0].Attempts)
				require.Equal(t, uint64(1000), nacks[0].DelayMs)
				require.Equal(t, uint32(3), nacks[1].Attempts, "the attempt count is named")
				return
			}
			require.Len(t, nacks, 1, "the refused delayed nack was not sent")
			require.Zero(t, nacks[0].Attempts, "sent without the attempt count")
			require.Equal(t, uint64(7), nacks[0].Offset)
		})
	}
}
