package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The program runs clean: every acknowledged record is delivered once,
// on its shard, through six node kills (a smaller run than main's 100k).
func TestStreamThroughNodeKills(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := runReport(ctx, options{records: 12_000, kills: 6, batch: 100, shards: 6}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 12_000, rep.acked)
	require.Equal(t, rep.acked, rep.delivered)
	require.Equal(t, 6, rep.kills)
	sum := 0
	for s, n := range rep.perShard {
		require.Positive(t, n, "shard %d got records", s)
		sum += n
	}
	require.Equal(t, rep.acked, sum)
}
