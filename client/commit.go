package client

import (
	"context"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// CommitRequest is an atomic commit: exactly one event and any number of
// state changes on the stream and shard the entity key routes to (see
// conn.CommitRequest; build operations with conn.PublishEvent,
// conn.EnqueueEvent, conn.PutState and conn.DeleteState).
type CommitRequest = conn.CommitRequest

// StateValue is a state key read with StateGet (see conn.StateValue).
type StateValue = conn.StateValue

// CondResult is the answer to a conditional cache write (see
// conn.CondResult).
type CondResult = conn.CondResult

// routingEntity is the key a commit or state_get routes by: an entity key is
// always a routing key, an empty one included.
func routingEntity(k []byte) []byte {
	if k == nil {
		return []byte{}
	}
	return k
}

// Commit validates req on the client (a *conn.CommitError naming the
// offending operation, nothing sent, when it is not exactly one event plus
// state changes on one stream) and sends it to the leader of the shard the
// entity key routes to, following redirects. It returns the offset of the
// event, which is also the version of every state key it wrote.
//
// It needs felix.FeatureAtomicCommit (conn.ErrNotAdvertised, nothing
// sent). A stale ExpectedOffset is a *conn.PublishRefusedError (Tail names
// the shard's tail; nothing was written). A commit is never re-sent once
// it may have been applied: an unknown outcome is an *AmbiguousError
// (read the state with StateGet to find out).
func (c *Client) Commit(ctx context.Context, req CommitRequest) (offset uint64, err error) {
	// Validation first, so that a malformed commit costs no round trip
	// (conn.Client.Commit validates again, identically).
	if err := req.Validate(); err != nil {
		return 0, err
	}
	key := c.streamKey(ctx, req.Topic, routingEntity(req.EntityKey))
	err = c.run(ctx, call{op: "commit", key: key}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		var err error
		offset, err = cc.Commit(ctx, req)
		return err
	})
	return offset, err
}

// StateGet reads state key under entityKey on stream t from the leader of
// the shard the entity key routes to. A key never written or deleted is
// Found == false (absent, not empty). Needs felix.FeatureAtomicCommit.
func (c *Client) StateGet(ctx context.Context, t Topic, entityKey []byte, key string) (v StateValue, err error) {
	if err := c.checkTopic("state_get", t); err != nil {
		return v, err
	}
	rk := c.streamKey(ctx, t, routingEntity(entityKey))
	err = c.run(ctx, call{op: "state_get", key: rk, safe: true}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		var err error
		v, err = cc.StateGet(ctx, t, entityKey, key)
		return err
	})
	return v, err
}

// PublishIf appends payloads (routed by key; nil = no key, shard 0) on the
// shard leader only if the shard's next offset is expected. A stale
// expected offset is a *conn.PublishRefusedError whose Tail names the
// shard's next offset; nothing was written. Needs
// felix.FeaturePublishConditional. Not re-sent when its outcome is
// unknown (*AmbiguousError): a re-send of an applied write would be
// refused as stale.
func (c *Client) PublishIf(ctx context.Context, t Topic, payloads [][]byte, key []byte, expected uint64) (res PublishResult, err error) {
	if err := c.checkTopic("publish_if", t); err != nil {
		return res, err
	}
	rk := c.streamKey(ctx, t, key)
	err = c.run(ctx, call{op: "publish_if", key: rk}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		var err error
		res, err = cc.PublishIf(ctx, t, payloads, key, expected)
		return err
	})
	return res, err
}

// CachePutIf writes key = value only if cond holds (felix.CondAbsent: no
// live entry; felix.CondVersion: the entry's version is cond.Version).
// ttl 0 means no expiry. Like every cache call it goes to any broker,
// which forwards it. Not re-sent when its outcome is unknown
// (*AmbiguousError). Needs felix.FeatureCacheConditional.
func (c *Client) CachePutIf(ctx context.Context, ref CacheRef, key string, value []byte, cond felix.CacheCondition, ttl time.Duration) (r CondResult, err error) {
	if err := c.checkCache("cache_put_if", ref); err != nil {
		return r, err
	}
	err = c.run(ctx, call{op: "cache_put_if"}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		var err error
		r, err = cc.CachePutIf(ctx, ref, key, value, cond, ttl)
		return err
	})
	return r, err
}

// CacheDeleteIf removes key only if its version is version. Not re-sent
// when its outcome is unknown (*AmbiguousError). Needs
// felix.FeatureCacheConditional.
func (c *Client) CacheDeleteIf(ctx context.Context, ref CacheRef, key string, version uint64) (r CondResult, err error) {
	if err := c.checkCache("cache_delete_if", ref); err != nil {
		return r, err
	}
	err = c.run(ctx, call{op: "cache_delete_if"}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		var err error
		r, err = cc.CacheDeleteIf(ctx, ref, key, version)
		return err
	})
	return r, err
}

// CacheGetVersioned is CacheGet returning the entry's version too (for
// CachePutIf and CacheDeleteIf).
func (c *Client) CacheGetVersioned(ctx context.Context, ref CacheRef, key string) (item conn.CacheItem, err error) {
	if err := c.checkCache("cache_get", ref); err != nil {
		return item, err
	}
	err = c.run(ctx, call{op: "cache_get", safe: true}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		var err error
		item, err = cc.CacheGetVersioned(ctx, ref, key)
		return err
	})
	return item, err
}
