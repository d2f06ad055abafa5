package server

import (
	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
	"github.com/flxproto/felix/internal/broker/engine"
)

// subscribe handles subscribe, which is terminal for its control stream:
// the event stream is opened (hello first), subscribed is answered, the
// control stream is finished, and the subscription's feed (delivery.go)
// writes history and live batches. Errors (subscribe_cursor_error, error)
// come back on the control stream and no event stream is opened.
func (h *handler) subscribe(m *felix.Subscribe) {
	if why := h.deny(m.TenantID, PermSubscribe); why != "" {
		h.refuse(felix.CodeForbidden, why)
		return
	}
	req := engine.SubscribeRequest{
		Topic:     engine.Topic{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream},
		Shard:     m.Shard.V,
		Mods:      h.peer.EventFlags(),
		LagReport: h.peer.SubscriptionLagged(),
		ID:        m.SubscriptionID.V,
	}
	if m.Start.Set {
		switch m.Start.V.Kind {
		case felix.StartEarliest:
			req.Start.Kind = engine.StartEarliest
		case felix.StartOffset:
			req.Start = engine.Start{Kind: engine.StartOffset, Offset: m.Start.V.Offset}
		}
	}
	if m.QueueCapacity.Set {
		req.QueueCapacity = max(int(m.QueueCapacity.V), 1)
	}
	place := h.placeRead(req.Topic, req.Shard)
	if !place.Local || place.Refuse != nil {
		h.redirect(place)
		return
	}
	slot := h.reserveSub(m.TenantID, 0)
	if slot == nil {
		return
	}
	f := h.s.newFeed()
	req.Notify = f.notify
	sub, info, err := h.s.eng.Subscribe(req)
	if err != nil {
		slot.release()
		h.write(errorMessage(err))
		h.st.Close()
		return
	}
	es, err := h.st.OpenEventStream(h.st.Context(), info.ID)
	if err != nil {
		slot.release()
		sub.Close()
		h.refuse(felix.CodeInternal, "cannot open the event stream")
		return
	}
	// Listed (subscriptions_list) from here until the feed ends; the feed
	// is the only path that does not end the subscription below.
	topic := sub.Topic() // the stream's own names, not the request's copies
	unlist := h.registerSub(topic, req.Shard, sub)
	ans := &felix.Subscribed{SubscriptionID: info.ID}
	if info.Durable {
		ans.StartOffset, ans.LiveOffset = felix.Some(info.StartOffset), felix.Some(info.LiveOffset)
	}
	if m.QueueCapacity.Set {
		ans.QueueCapacity = felix.Some(uint32(info.QueueCapacity))
	}
	if err := h.st.WriteMessage(h.st.Conn().Context(), ans); err != nil {
		unlist()
		slot.release()
		sub.Close()
		es.Abort()
		h.st.Abort()
		return
	}
	h.st.Close()
	h.s.log.Debug("subscribed", "id", info.ID, "stream", m.Stream, "start", info.StartOffset, "queue", info.QueueCapacity)
	k := &subFeed{s: h.s, sub: sub, info: info, next: info.StartOffset, mv: subMove{place: place, topic: topic,
		shard: req.Shard, unlist: unlist, notify: h.peer.Features.Has(felix.FeatureShardMoved)}}
	if place.Moved != nil {
		f.start(m.TenantID, k, es, slot, place.Moved)
	} else {
		f.start(m.TenantID, k, es, slot)
	}
}

// subMove is what a feed needs to end a subscription whose shard moved.
type subMove struct {
	place  Placement
	topic  engine.Topic
	shard  uint32
	notify bool   // the client offered FeatureShardMoved
	unlist func() // removes the subscription from subscriptions_list
}

// moved ends an event stream whose shard left this node: shard_moved
// naming the next owner (and, on a durable stream, the first offset not
// delivered) to a client that offered FeatureShardMoved, a reset for
// others so that the end is never mistaken for a clean one.
func (s *Server) moved(es *conn.EventStream, id uint64, mv subMove, resume uint64, durable bool) {
	if !mv.notify || s.cfg.Router == nil {
		es.Abort()
		return
	}
	next := s.cfg.Router.Stream(mv.topic, mv.shard, false)
	m := &felix.ShardMoved{SubscriptionID: id, Generation: next.Generation}
	if durable {
		m.ResumeFrom = felix.Some(resume)
	}
	if next.Refuse == nil && next.Owner.NodeID != "" {
		m.NodeID = felix.Some(next.Owner.NodeID)
		if next.Owner.Addr != "" {
			m.Addr = felix.Some(next.Owner.Addr)
		}
	}
	if err := es.WriteMessage(es.Context(), m); err != nil {
		es.Abort()
		return
	}
	_ = es.Close()
}

// subFeed writes a subscription's deliveries to its event stream. It ends
// with a clean FIN when the engine ends the subscription (shutdown), after
// subscription_lagged when the subscriber lagged, and with a reset when
// the client stopped reading or the connection died.
type subFeed struct {
	s    *Server
	sub  *engine.Subscription
	info engine.SubscribeInfo
	mv   subMove
	next uint64 // first offset not yet delivered (durable)
}

func (k *subFeed) turn(f *feed, wd *writeWatchdog) turnResult {
	s, es, sub := k.s, f.es, k.sub
	written := 0
	for range deliveryQuantum {
		d, ok, err := sub.TryNext()
		if err != nil { // engine.ErrClosed
			_ = es.Close()
			return turnDone
		}
		if !ok {
			moved := k.mv.place.Moved != nil && k.mv.place.Moved.Err() != nil
			if !moved && !f.ended() {
				return turnIdle
			}
			switch {
			case f.cut.Load():
				es.Abort()
			case s.ending.Err() != nil && es.Context().Err() == nil:
				// This node stops while the (shared) engine goes on: say
				// where to resume, never end cleanly.
				wd.arm(f)
				s.endDrained(es.Context(), es, sub.ID(), engine.Delivery{Drained: true, HasResume: k.info.Durable, ResumeFrom: k.next})
				wd.disarm()
			case moved && es.Context().Err() == nil:
				wd.arm(f)
				s.moved(es, sub.ID(), k.mv, k.next, k.info.Durable)
				wd.disarm()
			default:
				es.Abort()
			}
			return turnDone
		}
		if d.Batch != nil && d.Batch.HasOffsets {
			k.next = d.Batch.EndOffset()
		}
		if d.Drained {
			wd.arm(f)
			s.endDrained(es.Context(), es, sub.ID(), d)
			wd.disarm()
			return turnDone
		}
		if d.Lagged {
			s.log.Info("subscriber lagged", "id", sub.ID(), "resume_from", d.ResumeFrom)
			wd.arm(f)
			_ = es.WriteMessage(es.Context(), &felix.SubscriptionLagged{SubscriptionID: sub.ID(), ResumeFrom: d.ResumeFrom})
			wd.disarm()
			_ = es.Close()
			return turnDone
		}
		// Under the stream's own context: the write costs no
		// context.AfterFunc; the watchdog resets the stream to cut it.
		wd.arm(f)
		err = es.WriteEncoded(es.Context(), d.Frame)
		wd.disarm()
		written += len(d.Frame)
		d.Release() // quic-go copied the frame: its buffer may serve a later batch
		if err != nil {
			es.Abort()
			return turnDone
		}
		if written >= deliveryQuantumBytes {
			break
		}
	}
	return turnMore
}

func (k *subFeed) close() {
	k.mv.unlist()
	k.sub.Close()
}

// watch handles cache_watch, terminal like subscribe.
func (h *handler) watch(m *felix.CacheWatch) {
	if why := h.deny(m.TenantID, PermCacheRead); why != "" {
		h.refuse(felix.CodeForbidden, why)
		return
	}
	if m.Key.Set == m.Prefix.Set {
		h.refuse(felix.CodeInvalidRequest, "cache_watch needs exactly one of key and prefix")
		return
	}
	if m.Key.Set && m.Shard.Set {
		h.refuse(felix.CodeInvalidRequest, "shard is only valid on prefix watches")
		return
	}
	if p := h.placeCache(engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Cache}); !p.Local || p.Refuse != nil {
		h.redirect(p)
		return
	}
	req := engine.WatchRequest{
		CacheRef: engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Cache},
		Key:      m.Key.V, IsPrefix: m.Prefix.Set, Prefix: m.Prefix.V, Shard: m.Shard.V,
		HasFrom: m.FromOffset.Set, FromOffset: m.FromOffset.V, Retained: m.Retained,
		ID: m.SubscriptionID.V,
	}
	slot := h.reserveSub(m.TenantID, len(m.Key.V)+len(m.Prefix.V))
	if slot == nil {
		return
	}
	f := h.s.newFeed()
	req.Notify = f.notify
	w, info, err := h.s.eng.Watch(req)
	if err != nil {
		slot.release()
		h.write(errorMessage(err))
		h.st.Close()
		return
	}
	es, err := h.st.OpenEventStream(h.st.Context(), info.ID)
	if err != nil {
		slot.release()
		w.Close()
		h.refuse(felix.CodeInternal, "cannot open the event stream")
		return
	}
	ans := &felix.CacheWatchStarted{SubscriptionID: info.ID, ResumeOffset: info.ResumeOffset}
	if m.Retained {
		ans.RetainedCount = felix.Some(info.RetainedCount)
	}
	if err := h.st.WriteMessage(h.st.Conn().Context(), ans); err != nil {
		slot.release()
		w.Close()
		es.Abort()
		h.st.Abort()
		return
	}
	h.st.Close()
	f.start(m.TenantID, &watchFeed{s: h.s, w: w}, es, slot)
}

// watchFeed writes a watch's cache_event frames, then cache_watch_lagged
// for a watcher that fell behind.
type watchFeed struct {
	s *Server
	w *engine.Watch
}

func (k *watchFeed) turn(f *feed, wd *writeWatchdog) turnResult {
	es, written := f.es, 0
	for range deliveryQuantum {
		d, ok, err := k.w.TryNext()
		if err != nil { // engine.ErrClosed
			_ = es.Close()
			return turnDone
		}
		if !ok {
			if !f.ended() {
				return turnIdle
			}
			// A node that stops while a shared engine goes on resets the
			// watch: the watcher resumes from its last offset elsewhere.
			es.Abort()
			return turnDone
		}
		if d.Lagged {
			k.s.log.Info("cache watcher lagged", "id", k.w.Info().ID, "resume_from", d.ResumeFrom)
			wd.arm(f)
			_ = es.WriteMessage(es.Context(), &felix.CacheWatchLagged{ResumeFrom: d.ResumeFrom})
			wd.disarm()
			_ = es.Close()
			return turnDone
		}
		frame := d.Frame()
		wd.arm(f)
		err = es.WriteEncoded(es.Context(), frame) // shared by the event's watches; cut by the watchdog's reset
		wd.disarm()
		if err != nil {
			es.Abort()
			return turnDone
		}
		if written += len(frame); written >= deliveryQuantumBytes {
			break
		}
	}
	return turnMore
}

func (k *watchFeed) close() { k.w.Close() }
