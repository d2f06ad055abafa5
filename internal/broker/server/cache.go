package server

import (
	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/engine"
)

// cache handles the cache and counter requests. Answers carry the
// request's request_id; a put, get or delete without one is answered and
// then ends the stream (the one-shot form).
func (h *handler) cache(m felix.Message) bool {
	var tenant string
	var ref engine.CacheRef
	perm := PermCacheRead
	switch m.(type) {
	case *felix.CachePut, *felix.CacheDelete, *felix.CachePutIf, *felix.CacheDeleteIf, *felix.CounterAdd:
		perm = PermCacheWrite
	}
	switch m := m.(type) {
	case *felix.CachePut:
		tenant, ref = m.TenantID, engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Cache}
	case *felix.CacheGet:
		tenant, ref = m.TenantID, engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Cache}
	case *felix.CacheDelete:
		tenant, ref = m.TenantID, engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Cache}
	case *felix.CachePutIf:
		tenant, ref = m.TenantID, engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Cache}
	case *felix.CacheDeleteIf:
		tenant, ref = m.TenantID, engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Cache}
	case *felix.CounterAdd:
		tenant, ref = m.TenantID, engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Cache}
	case *felix.CounterGet:
		tenant, ref = m.TenantID, engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Cache}
	case *felix.CacheShards:
		tenant, ref = m.TenantID, engine.CacheRef{Tenant: m.TenantID, Namespace: m.Namespace, Cache: m.Cache}
	}
	if why := h.deny(tenant, perm); why != "" {
		return h.refuse(felix.CodeForbidden, why)
	}
	e := h.s.eng
	switch m := m.(type) {
	case *felix.CachePut:
		if _, err := e.CachePut(ref, m.Key, m.Value, ttlOf(m.TTLMs)); err != nil {
			return h.cacheFail(err, m.RequestID.Set)
		}
		if !m.RequestID.Set {
			h.write(&felix.OK{})
			h.st.Close()
			return false
		}
		return h.write(&felix.CacheOK{RequestID: m.RequestID.V})
	case *felix.CacheGet:
		v, ver, found, err := e.CacheGet(ref, m.Key)
		if err != nil {
			return h.cacheFail(err, m.RequestID.Set)
		}
		ans := &felix.CacheValue{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, RequestID: m.RequestID}
		if found {
			ans.Value, ans.Version = felix.Some(v), felix.Some(ver)
		}
		return h.oneShot(ans, m.RequestID.Set)
	case *felix.CacheDelete:
		old, found, err := e.CacheDelete(ref, m.Key)
		if err != nil {
			return h.cacheFail(err, m.RequestID.Set)
		}
		ans := &felix.CacheValue{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, RequestID: m.RequestID}
		if found {
			ans.Value = felix.Some(old)
		}
		return h.oneShot(ans, m.RequestID.Set)
	case *felix.CachePutIf:
		cond := engine.Condition{Absent: m.Condition.Kind == felix.CondAbsent, Version: m.Condition.Version}
		r, err := e.CachePutIf(ref, m.Key, m.Value, ttlOf(m.TTLMs), cond)
		if err != nil {
			return h.fail(err)
		}
		return h.write(condResult(r, m.RequestID))
	case *felix.CacheDeleteIf:
		r, err := e.CacheDeleteIf(ref, m.Key, m.Version)
		if err != nil {
			return h.fail(err)
		}
		return h.write(condResult(r, m.RequestID))
	case *felix.CounterAdd:
		v, err := e.CounterAdd(ref, m.Key, m.Delta)
		if err != nil {
			return h.fail(err)
		}
		return h.write(&felix.CounterValue{Value: felix.Some(v), RequestID: m.RequestID})
	case *felix.CounterGet:
		v, ok, err := e.CounterGet(ref, m.Key)
		if err != nil {
			return h.fail(err)
		}
		ans := &felix.CounterValue{RequestID: m.RequestID}
		if ok {
			ans.Value = felix.Some(v)
		}
		return h.write(ans)
	case *felix.CacheShards:
		if err := e.CheckCache(ref, ""); err != nil {
			return h.fail(err)
		}
		var n uint32
		if _, _, err := e.CacheOffsets(ref); err == nil {
			n = 1
		}
		return h.write(&felix.CacheShardsView{Shards: n, RequestID: m.RequestID})
	}
	return false
}

func condResult(r engine.CondResult, rid uint64) *felix.CacheConditionResult {
	ans := &felix.CacheConditionResult{Applied: r.Applied, RequestID: rid}
	if r.HasVersion {
		ans.Version = felix.Some(r.Version)
	}
	return ans
}

// oneShot writes a cache answer and ends the stream when the request had
// no request_id.
func (h *handler) oneShot(m felix.Message, hasID bool) bool {
	if !h.write(m) {
		return false
	}
	if !hasID {
		h.st.Close()
		return false
	}
	return true
}

// cacheFail answers a failed cache request (e.g. an unknown cache); the
// stream stays open when the request had a request_id.
func (h *handler) cacheFail(err error, hasID bool) bool {
	if !h.fail(err) {
		return false
	}
	if !hasID {
		h.st.Close()
		return false
	}
	return true
}
