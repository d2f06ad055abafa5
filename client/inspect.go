package client

import (
	"context"
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// Inspection and addressing calls of the cluster-aware client. Each is
// gated on what the broker it reaches advertised (conn.ErrNotAdvertised,
// nothing sent, otherwise) and, being a read, re-sent after a lost
// connection. Shard-level reads go to the shard's leader, following
// redirects; the rest go to any broker. (StreamShards is in route.go.)

// ReadOptions bounds a StreamRead page (see conn.ReadOptions).
type ReadOptions = conn.ReadOptions

// ReadPage is one page of StreamRead (see conn.ReadPage).
type ReadPage = conn.ReadPage

// SubscriptionsPage is one page of Subscriptions (see
// conn.SubscriptionsPage).
type SubscriptionsPage = conn.SubscriptionsPage

// shardKey is the owner key of one shard of stream t (nil on a standalone
// broker).
func (c *Client) shardKey(t Topic, shard uint32) *ownerKey {
	if !c.clustered.Load() {
		return nil
	}
	return &ownerKey{kind: felix.ShardKindStream, tenant: t.TenantID, namespace: t.Namespace, name: t.Stream, shard: shard}
}

// read runs a safe (re-sendable) call.
func (c *Client) read(ctx context.Context, op string, key *ownerKey, fn func(ctx context.Context, cc *conn.Client) error) error {
	return c.run(ctx, call{op: op, key: key, safe: true}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		return fn(ctx, cc)
	})
}

// CacheShards asks for a cache's shard count (0: unknown cache). Needs
// felix.FeatureCacheShards.
func (c *Client) CacheShards(ctx context.Context, ref CacheRef) (n uint32, err error) {
	if err := c.checkCache("cache_shards", ref); err != nil {
		return 0, err
	}
	err = c.read(ctx, "cache_shards", nil, func(ctx context.Context, cc *conn.Client) error {
		var err error
		n, err = cc.CacheShards(ctx, ref)
		return err
	})
	return n, err
}

// ShardOwners lists the owner of every shard of a stream or cache (kind
// felix.ShardKindStream or felix.ShardKindCache), in shard order; an empty
// list means the name is unknown. The answer also refreshes the owners the
// client routes by. Needs felix.FeatureShardOwners.
func (c *Client) ShardOwners(ctx context.Context, tenant, namespace, name string, kind felix.ShardKind) (owners []felix.ShardOwner, err error) {
	err = c.read(ctx, "shard_owners", nil, func(ctx context.Context, cc *conn.Client) error {
		var err error
		owners, err = cc.ShardOwners(ctx, tenant, namespace, name, kind)
		return err
	})
	if err == nil {
		c.learnOwners(ownerKey{kind: kind, tenant: tenant, namespace: namespace, name: name}, owners, "shard_owners")
	}
	return owners, err
}

// Topology lists the cluster's brokers (node id and client address) as a
// broker reports them. Needs felix.FeatureTopology (standalone brokers do
// not advertise it).
func (c *Client) Topology(ctx context.Context) (brokers []felix.BrokerEndpoint, err error) {
	err = c.read(ctx, "topology", nil, func(ctx context.Context, cc *conn.Client) error {
		var err error
		brokers, err = cc.Topology(ctx)
		return err
	})
	return brokers, err
}

// OffsetForTime returns the offset of the first record of a shard appended
// at or after at, asking the shard's leader; found is false when no
// readable record is that recent. Needs felix.FeatureRecordTimestamps.
func (c *Client) OffsetForTime(ctx context.Context, t Topic, shard uint32, at time.Time) (offset uint64, found bool, err error) {
	if err := c.checkTopic("offset_for_time", t); err != nil {
		return 0, false, err
	}
	err = c.read(ctx, "offset_for_time", c.shardKey(t, shard), func(ctx context.Context, cc *conn.Client) error {
		var err error
		offset, found, err = cc.OffsetForTime(ctx, t, shard, at)
		return err
	})
	return offset, found, err
}

// StreamRead reads a bounded page of a durable shard from its leader,
// without a subscription. An offset outside the retained range is a
// *conn.CursorError. Needs felix.FeatureStreamRead.
func (c *Client) StreamRead(ctx context.Context, t Topic, shard uint32, o ReadOptions) (page ReadPage, err error) {
	if err := c.checkTopic("stream_read", t); err != nil {
		return page, err
	}
	err = c.read(ctx, "stream_read", c.shardKey(t, shard), func(ctx context.Context, cc *conn.Client) error {
		var err error
		page, err = cc.StreamRead(ctx, t, shard, o)
		return err
	})
	return page, err
}

// ShardInspect returns the view of one shard held by the broker the
// client routes the shard to (its leader, when known); use
// ShardInspectAt for another broker's view. The token must grant
// node.view:cluster:* (else a forbidden *conn.BrokerError). Needs
// felix.FeatureInspect.
func (c *Client) ShardInspect(ctx context.Context, tenant, namespace, name string, kind felix.ShardKind, shard uint32) (view felix.ShardInspection, err error) {
	var key *ownerKey
	if c.clustered.Load() {
		key = &ownerKey{kind: kind, tenant: tenant, namespace: namespace, name: name, shard: shard}
	}
	err = c.read(ctx, "shard_inspect", key, func(ctx context.Context, cc *conn.Client) error {
		var err error
		view, err = cc.ShardInspect(ctx, tenant, namespace, name, kind, shard)
		return err
	})
	return view, err
}

// ShardInspectAt is ShardInspect answered by the broker at addr (a
// follower's view, say); the request is never forwarded.
func (c *Client) ShardInspectAt(ctx context.Context, addr, tenant, namespace, name string, kind felix.ShardKind, shard uint32) (view felix.ShardInspection, err error) {
	err = c.at(ctx, addr, "shard_inspect", func(ctx context.Context, cc *conn.Client) error {
		var err error
		view, err = cc.ShardInspect(ctx, tenant, namespace, name, kind, shard)
		return err
	})
	return view, err
}

// Subscriptions lists the subscriptions served by the broker at addr ("":
// any broker) that match filter, limit per page (0: the broker's
// default), from cursor (nil: the first page). Each broker lists only its
// own subscriptions: call it for every address of Brokers to see the
// cluster's. Needs felix.FeatureInspect and a token granting
// node.view:cluster:*.
func (c *Client) Subscriptions(ctx context.Context, addr string, filter felix.SubscriptionsFilter, limit uint32, cursor *felix.SubscriptionsCursor) (page SubscriptionsPage, err error) {
	fn := func(ctx context.Context, cc *conn.Client) error {
		var err error
		page, err = cc.Subscriptions(ctx, filter, limit, cursor)
		return err
	}
	if addr == "" {
		err = c.read(ctx, "subscriptions_list", nil, fn)
	} else {
		err = c.at(ctx, addr, "subscriptions_list", fn)
	}
	return page, err
}

// at runs a read on the broker at addr only: retried there (after a lost
// connection, with backoff) but never moved to another broker, and never
// redirected.
func (c *Client) at(ctx context.Context, addr, op string, fn func(ctx context.Context, cc *conn.Client) error) error {
	b := c.addBroker(addr, op)
	var lastErr error
	for attempt := 0; ; attempt++ {
		if err := c.stopped(ctx, bare(lastErr)); err != nil {
			return err
		}
		cc, err := c.connect(ctx, b)
		if err == nil {
			err = fn(ctx, cc)
			if err == nil {
				return nil
			}
		} else {
			err = &notSent{err}
		}
		lastErr = err
		switch v := decide(err, true); v.act {
		case actReturn, actRedirect, actAmbiguous:
			return bare(err)
		case actFailover:
			if cc != nil {
				c.markFailed(b, cc)
			}
		}
		if attempt >= c.cfg.MaxAttempts {
			return bare(lastErr)
		}
		sleep(ctx, c.ctx, c.cfg.backoff(attempt+1, 0))
	}
}

// RawRequest sends m on a stream of its own to any broker (the home
// broker first) and returns the broker's first answer as it came: an
// error, not_leader or unsupported answer is returned as a message, not
// followed or retried (the request may not be safe to re-send). It is
// gated as conn.Client.RawRequest. Use RawRequestAt to pick the broker.
func (c *Client) RawRequest(ctx context.Context, m felix.Message) (ans felix.Message, err error) {
	err = c.run(ctx, call{op: "raw " + m.MessageType()}, func(ctx context.Context, cc *conn.Client, _ *broker) error {
		var err error
		ans, err = cc.RawRequest(ctx, m)
		return err
	})
	return ans, err
}

// RawRequestAt is RawRequest sent to the broker at addr; nothing is
// retried.
func (c *Client) RawRequestAt(ctx context.Context, addr string, m felix.Message) (felix.Message, error) {
	cc, err := c.connect(ctx, c.addBroker(addr, "raw request"))
	if err != nil {
		return nil, err
	}
	return cc.RawRequest(ctx, m)
}
