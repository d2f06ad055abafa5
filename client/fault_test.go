package client_test

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/client"
	"github.com/stretchr/testify/require"
)

// The fault steps of the catalogue, run through the test relay with the
// test clients' short idle timeout (1.5 s): drops are held past it, stalls
// stay under it.

// faultPublish publishes records one at a time through the relay and
// injects the fault after afterRecords: every call returns; after the fault
// a publish succeeds again (retried here until it does); every acknowledged
// record is in the log, none twice.
func faultPublish(t *testing.T, inject func(*relay, *notices), heal func(*relay)) {
	b := startBroker(t)
	r := startRelay(t, b.addr)
	c, n := newClient(t, []string{r.addr()}, nil)
	const afterRecords, records = 3, 10
	var ackedRecs []string
	for i := range records {
		if i == afterRecords {
			inject(r, n)
		}
		p := fmt.Sprint("r", i)
		_, err := c.Publish(ctxT(t), topic, []byte(p), acked)
		if err != nil {
			// Reported, not silently re-sent; go on once the link is back.
			heal(r)
			continue
		}
		ackedRecs = append(ackedRecs, p)
	}
	heal(r)
	_, err := c.Publish(ctxT(t), topic, []byte("last"), acked)
	require.NoError(t, err)
	ackedRecs = append(ackedRecs, "last")
	log := readLog(t, b, topic)
	seen := map[string]int{}
	for _, p := range log {
		seen[p]++
	}
	for _, p := range ackedRecs {
		require.Equal(t, 1, seen[p], "acked record %s in the log once", p)
	}
	for p, k := range seen {
		require.Equal(t, 1, k, "record %s written once", p)
	}
}

func TestFaultPublishDroppedLink(t *testing.T) {
	faultPublish(t, func(r *relay, n *notices) {
		r.dropAll.Store(true)
	}, func(r *relay) { r.dropAll.Store(false) })
}

func TestFaultPublishResetLink(t *testing.T) {
	faultPublish(t, func(r *relay, n *notices) { r.reset() }, func(*relay) {})
}

func TestFaultPublishStalledLink(t *testing.T) {
	b := startBroker(t)
	r := startRelay(t, b.addr)
	c, n := newClient(t, []string{r.addr()}, nil)
	for i := range 10 {
		if i == 3 {
			r.stall(500 * time.Millisecond)
		}
		_, err := c.Publish(ctxT(t), topic, []byte(fmt.Sprint("r", i)), acked)
		require.NoError(t, err, "a stall is ridden out")
	}
	require.Len(t, readLog(t, b, topic), 10)
	require.Zero(t, n.count(client.NoticeDisconnected))
}

// faultSubscribe subscribes through the relay, publishes through a direct
// client, injects the fault after afterRecords arrived: the rest arrive
// with contiguous offsets, or the subscription fails; a clean end fails.
func faultSubscribe(t *testing.T, inject func(*relay), heal func(*relay, *notices), mustDeliver bool) {
	b := startBroker(t)
	r := startRelay(t, b.addr)
	c, n := newClient(t, []string{r.addr()}, nil)
	pub, _ := newClient(t, []string{b.addr}, nil)
	sub, err := c.Subscribe(ctxT(t), topic, client.SubscribeOptions{Start: felix.StartPosition{Kind: felix.StartEarliest}})
	require.NoError(t, err)
	defer sub.Close()
	const afterRecords, records = 3, 10
	publishN(t, pub, topic, 0, afterRecords)
	for i := range afterRecords {
		ev, err := sub.Next(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, uint64(i), ev.Offset)
	}
	inject(r)
	publishN(t, pub, topic, afterRecords, records-afterRecords)
	heal(r, n)
	for i := afterRecords; i < records; i++ {
		ev, err := sub.Next(ctxT(t))
		if err != nil {
			require.False(t, errors.Is(err, io.EOF), "a subscription never ends as if closed by the broker")
			require.False(t, mustDeliver, "every record arrives: %v", err)
			return
		}
		require.Equal(t, uint64(i), ev.Offset, "contiguous")
		require.Equal(t, fmt.Sprint("r", i), string(ev.Payload))
	}
}

// The client resumes exactly in every case, so these tests demand
// delivery (the catalogue also accepts an error, never a clean end).

func TestFaultSubscriptionDroppedLink(t *testing.T) {
	faultSubscribe(t, func(r *relay) { r.dropAll.Store(true) }, func(r *relay, n *notices) {
		// Held past the idle timeout, as the catalogue's 8 s drop is
		// held past upstream's 6 s: heal once the client noticed.
		n.wait(t, client.NoticeDisconnected, nil)
		r.dropAll.Store(false)
	}, true)
}

func TestFaultSubscriptionResetLink(t *testing.T) {
	faultSubscribe(t, func(r *relay) { r.reset() }, func(*relay, *notices) {}, true)
}

func TestFaultSubscriptionStalledLink(t *testing.T) {
	faultSubscribe(t, func(r *relay) { r.stall(500 * time.Millisecond) }, func(*relay, *notices) {}, true)
}

// fault.cache_through_a_reset_link: cache calls move to a new connection;
// acknowledged puts read back; the counter is between the acknowledged
// adds and the attempts.
func TestFaultCacheResetLink(t *testing.T) {
	b := startBroker(t)
	r := startRelay(t, b.addr)
	c, _ := newClient(t, []string{r.addr()}, nil)
	ref := client.CacheRef{TenantID: topic.TenantID, Namespace: "ns", Cache: "c"}
	const afterRecords, records = 2, 6
	var puts []string
	adds := 0
	for i := range records {
		if i == afterRecords {
			r.reset()
		}
		k := fmt.Sprint("fault-", i)
		if err := c.CachePut(ctxT(t), ref, k, []byte(k), 0); err == nil {
			puts = append(puts, k)
		}
		if _, _, err := c.CounterAdd(ctxT(t), ref, "fault-count", 1); err == nil {
			adds++
		}
	}
	require.NoError(t, c.CachePut(ctxT(t), ref, "after", []byte("x"), 0))
	for _, k := range puts {
		v, found, err := c.CacheGet(ctxT(t), ref, k)
		require.NoError(t, err)
		require.True(t, found, k)
		require.Equal(t, k, string(v))
	}
	total, found, err := c.CounterGet(ctxT(t), ref, "fault-count")
	require.NoError(t, err)
	require.True(t, found)
	require.GreaterOrEqual(t, total, int64(adds))
	require.LessOrEqual(t, total, int64(records))
}
