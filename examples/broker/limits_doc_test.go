package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/cluster"
	"github.com/flxproto/felix/internal/broker/engine"
	"github.com/flxproto/felix/internal/broker/server"
	"github.com/stretchr/testify/require"
)

// docs/limits.md states every default with the constant that holds it:
// each constant's row must state the constant's value as the code has it.
func TestLimitsDocMatchesTheCode(t *testing.T) {
	b, err := os.ReadFile(filepath.FromSlash("../../docs/limits.md"))
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	count := func(n int) string {
		s := strconv.Itoa(n)
		if n < 10000 {
			return s
		}
		var out []byte
		for i := range len(s) {
			if i > 0 && (len(s)-i)%3 == 0 {
				out = append(out, ',')
			}
			out = append(out, s[i])
		}
		return string(out)
	}
	size := func(n int64) string {
		switch {
		case n >= 1<<30 && n%(1<<30) == 0:
			return fmt.Sprintf("%d GiB", n>>30)
		case n >= 1<<20 && n%(1<<20) == 0:
			return fmt.Sprintf("%d MiB", n>>20)
		case n%(1<<10) == 0:
			return fmt.Sprintf("%d KiB", n>>10)
		}
		return strconv.FormatInt(n, 10) + " bytes"
	}
	dur := func(d time.Duration) string {
		if d >= time.Minute && d%time.Minute == 0 {
			return fmt.Sprintf("%d min", d/time.Minute)
		}
		return fmt.Sprintf("%g s", d.Seconds())
	}
	rate := func(r float64) string { return fmt.Sprintf("%g per second", r) }
	want := []struct{ name, value string }{
		{"PreAuthMaxFrameBytes", size(felix.PreAuthMaxFrameBytes)},
		{"MaxStateShards", count(cluster.MaxStateShards)},
		{"DefaultMaxFrameBytes", size(felix.DefaultMaxFrameBytes)},
		{"DefaultMaxConnections", count(conn.DefaultMaxConnections)},
		{"DefaultMaxStreams", count(conn.DefaultMaxStreams)},
		{"DefaultMaxUnauthStreams", count(conn.DefaultMaxUnauthStreams)},
		{"DefaultMaxUnauthConns", count(conn.DefaultMaxUnauthConns)},
		{"DefaultMaxHandshakes", count(conn.DefaultMaxHandshakes)},
		{"DefaultRetryHandshakes", count(conn.DefaultRetryHandshakes)},
		{"DefaultMaxHandshakesPerAddr", count(conn.DefaultMaxHandshakesPerAddr)},
		{"DefaultHandshakeIdleTimeout", dur(conn.DefaultHandshakeIdleTimeout)},
		{"DefaultAnswerWriteTimeout", dur(conn.DefaultAnswerWriteTimeout)},
		{"DefaultPreAuthStreams", count(conn.DefaultPreAuthStreams)},
		{"DefaultAuthTimeout", dur(conn.DefaultAuthTimeout)},
		{"DefaultPreAuthConnWindow", size(conn.DefaultPreAuthConnWindow)},
		{"DefaultMaxConnInFlightBytes", size(conn.DefaultMaxConnInFlightBytes)},
		{"DefaultMaxConnReceiveWindow", size(conn.DefaultMaxConnReceiveWindow)},
		{"DefaultMaxAnswerBytes", size(conn.DefaultMaxAnswerBytes)},
		{"DefaultMaxTenantAnswerBytes", size(conn.DefaultMaxTenantAnswerBytes)},
		{"DefaultMaxTenantConns", count(conn.DefaultMaxTenantConns)},
		{"DefaultMaxTenantWindowGrowth", size(conn.DefaultMaxTenantWindowGrowth)},
		{"DefaultIdleTimeout", dur(conn.DefaultIdleTimeout)},
		{"DefaultKeepAlive", dur(conn.DefaultKeepAlive)},
		{"DefaultMaxEventStreams", count(conn.DefaultMaxEventStreams)},
		{"DefaultPipelineDepth", count(conn.DefaultPipelineDepth)},
		{"MaxEchoedNameBytes", size(server.MaxEchoedNameBytes)},
		{"DefaultMaxSubscriptionsPerConn", count(server.DefaultMaxSubscriptionsPerConn)},
		{"DefaultMaxTenantSubscriptionBytes", size(server.DefaultMaxTenantSubscriptionBytes)},
		{"DefaultMaxSubscriptionBytes", size(server.DefaultMaxSubscriptionBytes)},
		{"DefaultEventWriteTimeout", dur(server.DefaultEventWriteTimeout)},
		{"DefaultTenantDeliveryWorkers", count(server.DefaultTenantDeliveryWorkers)},
		{"DefaultDeliveryWorkers", count(server.DefaultDeliveryWorkers)},
		{"DefaultDrainTimeout", dur(server.DefaultDrainTimeout)},
		{"DefaultAuthAddrBurst", count(server.DefaultAuthAddrBurst)},
		{"DefaultAuthAddrRate", rate(server.DefaultAuthAddrRate)},
		{"DefaultAuthConnBurst", count(server.DefaultAuthConnBurst)},
		{"DefaultAuthConnRate", rate(server.DefaultAuthConnRate)},
		{"DefaultAuthMaxWait", dur(server.DefaultAuthMaxWait)},
		{"DefaultAuthGlobalBurst", count(server.DefaultAuthGlobalBurst)},
		{"DefaultAuthGlobalRate", rate(server.DefaultAuthGlobalRate)},
		{"DefaultAuthMaxAddrs", count(server.DefaultAuthMaxAddrs)},
		{"MaxTokensFileBytes", size(server.MaxTokensFileBytes)},
		{"DefaultSubscriberQueueBytes", size(engine.DefaultSubscriberQueueBytes)},
		{"DefaultMaxQueuedBytes", size(engine.DefaultMaxQueuedBytes)},
		{"DefaultQueueCapacity", count(engine.DefaultQueueCapacity)},
		{"DefaultMaxQueueCapacity", count(engine.DefaultMaxQueueCapacity)},
		{"DefaultWatchQueueBytes", size(engine.DefaultWatchQueueBytes)},
		{"DefaultWatchQueueCapacity", count(engine.DefaultWatchQueueCapacity)},
		{"DefaultMaxRetainBytes", size(engine.DefaultMaxRetainBytes)},
		{"DefaultRingRecords", count(engine.DefaultRingRecords)},
		{"DefaultMaxLogBytes", size(engine.DefaultMaxLogBytes)},
		{"DefaultMaxStreamsPerTenant", count(engine.DefaultMaxStreamsPerTenant)},
		{"DefaultMaxCachesPerTenant", count(engine.DefaultMaxCachesPerTenant)},
		{"DefaultCacheLogRetainBytes", size(engine.DefaultCacheLogRetainBytes)},
		{"DefaultCacheLogRetain", count(engine.DefaultCacheLogRetain)},
		{"DefaultMaxCacheBytes", size(engine.DefaultMaxCacheBytes)},
		{"DefaultMaxTenantCacheBytes", size(engine.DefaultMaxTenantCacheBytes)},
		{"DefaultMaxTotalCacheBytes", size(engine.DefaultMaxTotalCacheBytes)},
		{"DefaultMaxTotalCacheLogBytes", size(engine.DefaultMaxTotalCacheLogBytes)},
		{"DefaultMaxNameBytes", count(engine.DefaultMaxNameBytes)},
		{"DefaultMaxStateEntries", count(engine.DefaultMaxStateEntries)},
		{"DefaultMaxStateBytes", size(engine.DefaultMaxStateBytes)},
		{"MaxCommitChanges", count(engine.MaxCommitChanges)},
		{"MaxStateKey", count(engine.MaxStateKey)},
		{"DefaultMaxGroupsPerShard", count(engine.DefaultMaxGroupsPerShard)},
		{"DefaultGroupMaxPending", count(engine.DefaultGroupMaxPending)},
		{"DefaultGroupMaxDeadLetters", count(engine.DefaultGroupMaxDeadLetters)},
		{"DefaultMaxProducers", count(engine.DefaultMaxProducers)},
		{"DefaultMaxProducersPerShard", count(engine.DefaultMaxProducersPerShard)},
		{"DefaultMaxProducersPerTenant", count(engine.DefaultMaxProducersPerTenant)},
		{"DefaultProducerIdle", dur(engine.DefaultProducerIdle)},
		{"DefaultProducerWindow", count(engine.DefaultProducerWindow)},
		{"DefaultMaxTenantStateEntries", count(engine.DefaultMaxTenantStateEntries)},
		{"DefaultMaxTenantStateBytes", size(engine.DefaultMaxTenantStateBytes)},
		{"DefaultMaxTotalStateEntries", count(engine.DefaultMaxTotalStateEntries)},
		{"DefaultMaxTotalStateBytes", size(engine.DefaultMaxTotalStateBytes)},
		{"DefaultMaxTenantClaims", count(engine.DefaultMaxTenantClaims)},
		{"DefaultMaxTotalClaims", count(engine.DefaultMaxTotalClaims)},
		{"DefaultMaxTenantGroups", count(engine.DefaultMaxTenantGroups)},
		{"DefaultMaxTotalGroups", count(engine.DefaultMaxTotalGroups)},
	}
	for _, w := range want {
		named, stated := false, false
		for _, l := range lines {
			if strings.Contains(l, w.name+"`") {
				named = true
				stated = stated || strings.Contains(l, w.value)
			}
		}
		require.True(t, named, "docs/limits.md does not name %s", w.name)
		require.True(t, stated, "docs/limits.md states %s without its value %s", w.name, w.value)
	}
}
