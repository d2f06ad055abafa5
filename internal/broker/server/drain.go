package server

import (
	"context"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
)

// Shutdown stops the broker gracefully, within the drain timeout (or ctx):
//
//  1. it stops accepting: new streams are refused and new auths answered
//     draining; every publish from now on is refused with draining (retry
//     class retry: nothing written), so the records to deliver are fixed;
//  2. it waits for the requests being answered;
//  3. it lets subscribers and watchers receive what is queued for them, for
//     up to three quarters of the budget;
//  4. it ends every subscription and watch: one that got everything with a
//     clean end (FIN); one that did not with an explicit terminal frame
//     (subscription_lagged naming the first undelivered offset for clients
//     that negotiated it on a durable stream, otherwise an error with code
//     draining; cache_watch_lagged for watches) — never a clean end;
//  5. it closes every connection with application code 0 ("broker shutting
//     down") and waits for all goroutines.
//
// A node of a cluster (Config.SharedEngine) leaves the shared engine
// running for the other nodes: it ends only its own subscriptions, each
// with the explicit terminal frame of step 4 naming where to resume.
func (s *Server) Shutdown(ctx context.Context) error {
	shared := s.cfg.SharedEngine != nil
	s.stopOnce.Do(func() {
		s.draining.Store(true)
		if !shared {
			s.eng.StopPublishes()
		}
		s.log.Info("broker draining")
		dctx, cancel := context.WithTimeout(ctx, s.cfg.DrainTimeout)
		defer cancel()
		for s.inflight.Load() > 0 {
			if dctx.Err() != nil {
				s.log.Warn("drain timeout: closing with requests in flight", "in_flight", s.inflight.Load())
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if shared {
			s.endSubs() // each pump ends its stream with a terminal frame
		} else {
			fctx, fcancel := context.WithTimeout(dctx, s.cfg.DrainTimeout*3/4)
			for s.eng.Undelivered() > 0 && fctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			fcancel()
			if n := s.eng.Undelivered(); n > 0 {
				s.log.Warn("drain: ending subscriptions with records undelivered", "subscriptions", n)
			}
			s.eng.Drain()
		}
		for s.pumps.Load() > 0 && dctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		// Let the last answers and FINs leave before closing: closing a
		// QUIC connection does not flush stream data.
		select {
		case <-time.After(min(300*time.Millisecond, s.cfg.DrainTimeout)):
		case <-dctx.Done():
		}
		s.cancel()
		_ = s.ln.Close()
		s.wg.Wait()
		s.endSubs()
		s.log.Info("broker stopped", "connections", s.st.conns.Load(), "streams", s.st.streams.Load(),
			"requests", s.st.requests.Load())
	})
	return nil
}

// endDrained writes the terminal frame of a subscription that the drain
// ended with records undelivered, then finishes the stream: a
// subscription_lagged with the resume offset to a client that can read it,
// else an error with code draining. When neither can be written the stream
// is reset: it never ends cleanly.
func (s *Server) endDrained(ctx context.Context, es *conn.EventStream, id uint64, d engine.Delivery) {
	s.st.drainedSubs.Add(1)
	if d.HasResume {
		err := es.WriteMessage(ctx, &felix.SubscriptionLagged{SubscriptionID: id, ResumeFrom: d.ResumeFrom})
		if err == nil {
			_ = es.Close()
			return
		}
	}
	em := &felix.ErrorMessage{Message: "broker shutting down: subscription ended with records undelivered",
		Code: felix.Some(felix.CodeDraining), Retry: felix.Some(felix.RetryRetry)}
	if err := es.WriteMessage(ctx, em); err != nil {
		es.Abort()
		return
	}
	_ = es.Close()
}
