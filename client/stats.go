package client

import (
	"sync/atomic"

	"github.com/flxproto/felix/conn"
)

// Stats is a snapshot of what a Client has done since New (Client.Stats).
// The counters are cumulative; Connections and InFlight are the values at
// the moment of the snapshot. Each field is read atomically, the snapshot
// as a whole is not: fields taken together may be a moment apart.
type Stats struct {
	// Connections is the number of broker connections open now.
	Connections int
	// InFlight is the number of calls in progress now (each counted once,
	// however many attempts, redirects or retries it takes).
	InFlight int
	// Connects, Disconnects and DialFailures count NoticeConnected,
	// NoticeDisconnected and NoticeDialFailed.
	Connects, Disconnects, DialFailures uint64
	// Redirects, Retries and Resumes count NoticeRedirect, NoticeRetry and
	// NoticeResumed.
	Redirects, Retries, Resumes uint64
	// Lagged and ShardsLost count NoticeLagged and NoticeShardLost.
	Lagged, ShardsLost uint64
	// Drops counts NoticeDropped; DroppedOffsets the offsets they report
	// missing (the sum of their Count).
	Drops, DroppedOffsets uint64
	// PublishesAcked counts acknowledged publish calls that succeeded;
	// PublishesAmbiguous the publish calls that ended with an
	// *AmbiguousError; Ambiguous every call (publish or other) that did.
	PublishesAcked, PublishesAmbiguous, Ambiguous uint64
	// BytesSent and BytesReceived count the QUIC bytes of every connection
	// the client has had, open or closed (see conn.TransportStats); a
	// connection that has just ended is counted once its loss is noticed.
	BytesSent, BytesReceived uint64
}

// stats holds the client's counters. Notice-driven ones are counted by the
// observer joined into the client's notify (one mechanism: the counters
// see exactly the events OnNotice and Logger see).
type stats struct {
	inFlight atomic.Int64
	// notices counts the notices of each kind (indexed by NoticeKind).
	notices                           [len(kindNames)]atomic.Uint64
	droppedOffsets                    atomic.Uint64
	pubAcked, pubAmbiguous, ambiguous atomic.Uint64
	// closedSent and closedRecv hold the transport bytes of connections
	// already ended.
	closedSent, closedRecv atomic.Uint64
}

// observe counts ev.
func (s *stats) observe(ev Notice) {
	if int(ev.Kind) < len(s.notices) {
		s.notices[ev.Kind].Add(1)
	}
	if ev.Kind == NoticeDropped {
		s.droppedOffsets.Add(ev.Count)
	}
}

// count returns the number of notices of kind k.
func (s *stats) count(k NoticeKind) uint64 { return s.notices[k].Load() }

// ended adds the final transport counts of cc, which has ended.
func (s *stats) ended(cc *conn.Client) {
	ts := cc.TransportStats()
	s.closedSent.Add(ts.BytesSent)
	s.closedRecv.Add(ts.BytesReceived)
}

// Stats returns a snapshot of the client's counters. It may be called at
// any time, concurrently, also after Close.
func (c *Client) Stats() Stats {
	s := &c.stats
	out := Stats{
		InFlight: int(s.inFlight.Load()),
		Connects: s.count(NoticeConnected), Disconnects: s.count(NoticeDisconnected), DialFailures: s.count(NoticeDialFailed),
		Redirects: s.count(NoticeRedirect), Retries: s.count(NoticeRetry), Resumes: s.count(NoticeResumed),
		Lagged: s.count(NoticeLagged), ShardsLost: s.count(NoticeShardLost),
		Drops: s.count(NoticeDropped), DroppedOffsets: s.droppedOffsets.Load(),
		PublishesAcked: s.pubAcked.Load(), PublishesAmbiguous: s.pubAmbiguous.Load(), Ambiguous: s.ambiguous.Load(),
		BytesSent: s.closedSent.Load(), BytesReceived: s.closedRecv.Load(),
	}
	// A connection that has ended is counted by stats.ended (once).
	for cc := range c.liveConns() {
		out.Connections++
		ts := cc.TransportStats()
		out.BytesSent += ts.BytesSent
		out.BytesReceived += ts.BytesReceived
	}
	return out
}

// published counts a publish call that succeeded with options o.
func (s *stats) published(o PublishOptions) {
	if !o.NoAck {
		s.pubAcked.Add(1)
	}
}
