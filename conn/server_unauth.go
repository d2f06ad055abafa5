package conn

import "github.com/flxproto/felix"

// This file bounds the connections that are unauthenticated at the same
// time (ServerConfig.MaxUnauthConns).
//
// A connection is unauthenticated from the moment Accept registers it
// (its QUIC handshake completed) until the first of its streams
// authenticates (ServerConn.Authenticated; MaxUnauthStreams stops applying
// then), or until it ends. One that never authenticates can make the
// server hold far more than its pre-auth window: quic-go keeps every
// unread STREAM frame as an allocation of its own, so the 96 KiB window
// sent as 1-byte frames costs about 12 MiB (TestServerLimitsMemoryUnderTinyFrames),
// and nothing here can make quic-go coalesce the frames. Their number is
// therefore bounded: at most MaxUnauthConns (DefaultMaxUnauthConns, 256:
// ≈ 3 GiB in that worst case instead of ≈ 94 GiB at DefaultMaxConnections).
//
// When a connection is accepted while MaxUnauthConns are unauthenticated,
// the OLDEST unauthenticated connection is closed with CloseAuthTimeout
// ("too many unauthenticated connections", counted in
// ListenerStats.UnauthEvicted) and the new one is admitted:
//
//   - a new client is never refused for this (an attacker holding the cap
//     cannot lock anybody out): the eviction closes the victim on a
//     goroutine of its own, and the listener takes completed connections
//     from quic-go at once whatever the embedder's Accept is doing
//     (Listener.pump), so quic-go's 32-deep accept queue does not fill and
//     refuse a completed connection while the embedder is busy
//     (TestAcceptNeverRefusesUnderGuessingFlood); on a machine loaded by a
//     flood from 1,024 addresses about one dial in 1,000 still meets a full
//     queue, when the pump is not scheduled in time
//     (TestLegitDialsUnderDistributedGuessing);
//   - a legitimate client is evicted only if MaxUnauthConns connections
//     completed their handshakes after its own before its first auth was
//     answered, one round trip: each of those is a full QUIC and TLS
//     handshake, at most MaxHandshakes in progress and, past
//     RetryHandshakes, each with a Retry round trip more (server_handshake.go),
//     so a flooder needs far more than a round trip for them; a client
//     evicted nevertheless fails its Dial with CloseAuthTimeout and may
//     dial again;
//   - authenticated connections are never evicted: a connection leaves the
//     list, under Listener.mu, as its first stream authenticates.
//
// The list is Listener.unauth, oldest first, guarded by Listener.mu (taken
// alone, never with ServerConn.mu held); each connection keeps its element
// (ServerConn.unauthEl), so every event is O(1).

// DefaultMaxUnauthConns is ServerConfig.MaxUnauthConns: 256 connections of
// at most about 12.1 MiB each (tiny-frame worst case) ≈ 3 GiB.
const DefaultMaxUnauthConns = 256

// admitUnauthLocked lists sc, just registered, as unauthenticated, and
// returns the oldest unauthenticated connection to evict when
// MaxUnauthConns were already listed (nil otherwise). l.mu is held.
func (l *Listener) admitUnauthLocked(sc *ServerConn) *ServerConn {
	var victim *ServerConn
	if limit := l.cfg.MaxUnauthConns; limit > 0 {
		for victim == nil && l.unauth.Len() >= limit {
			old := l.unauthRemoveLocked(l.unauth.Front().Value.(*ServerConn))
			if old.qc.Context().Err() == nil {
				victim = old
			}
			// else: it ended and is being torn down (dropUnauth comes):
			// its place is free without an eviction.
		}
	}
	sc.unauthEl = l.unauth.PushBack(sc)
	l.st.unauthLive.Add(1)
	return victim
}

// unauthRemoveLocked takes sc off the unauthenticated list, if it is on it,
// and returns it. l.mu is held.
func (l *Listener) unauthRemoveLocked(sc *ServerConn) *ServerConn {
	if sc.unauthEl != nil {
		l.unauth.Remove(sc.unauthEl)
		sc.unauthEl = nil
		l.st.unauthLive.Add(-1)
	}
	return sc
}

// dropUnauth takes sc off the unauthenticated list once it ended, and
// returns what it held of its tenant's budgets (server_tenant.go).
func (l *Listener) dropUnauth(sc *ServerConn) {
	l.mu.Lock()
	l.unauthRemoveLocked(sc)
	sc.ended = true
	ch := sc.tenant.Load()
	l.mu.Unlock()
	if ch != nil {
		ch.release()
	}
}

// evictUnauth closes c, the oldest unauthenticated connection, to make room
// for a new one.
func (c *ServerConn) evictUnauth() {
	c.l.st.unauthEvicted.Add(1)
	c.log.Debug("connection closed", "reason", "too many unauthenticated connections", "limit", c.l.cfg.MaxUnauthConns)
	c.qc.CloseWithError(CloseAuthTimeout, "too many unauthenticated connections")
}

// setAuthed marks the connection authenticated for tenant (its stream
// authenticated for it) and takes it off the unauthenticated list, so it
// can no longer be evicted; the first such stream charges the connection
// to its tenant's budgets (server_tenant.go). It is called before the
// stream's auth_ok is written, so a connection whose client reads its
// auth_ok is never evicted as unauthenticated. It reports whether this
// call did it (the first stream), or the refusal to answer when the
// tenant has MaxTenantConns connections (the connection stays
// unauthenticated).
func (c *ServerConn) setAuthed(tenant string) (bool, *felix.BrokerError) {
	if c.authed.Load() {
		return false, nil
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.authed.Load() {
		return false, nil
	}
	if c.ended {
		// Ended meanwhile: its charge would never be returned. Its
		// answer cannot be written either.
		return false, nil
	}
	ch, refusal := c.l.admitTenantLocked(tenant)
	if refusal != nil {
		return false, refusal
	}
	c.tenant.Store(ch)
	c.authed.Store(true)
	c.l.unauthRemoveLocked(c)
	c.l.adm.remember(addrIP(c.qc.RemoteAddr())) // adm.mu is taken under l.mu, never the reverse
	return true, nil
}
