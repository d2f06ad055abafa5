package felixtest

import (
	"time"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/internal/broker/engine"
)

// untilHealed is the hold of CutClient: longer than any test.
const untilHealed = 100 * 365 * 24 * time.Hour

// Kill stops a node abruptly, as a crash would: its connections close at
// once, no subscription ends cleanly, and every shard it owned moves to a
// surviving node. It returns once the node is down and its shards have
// moved.
func (c *Cluster) Kill(node int) error {
	if err := c.checkNode(node); err != nil {
		return err
	}
	return faultErr(c.cl.Kill(node))
}

// Drain stops a node gracefully, as an operator's shutdown does: its
// shards move to surviving nodes first (its subscriptions are told
// shard_moved and resume on the new owners), then it drains (new requests
// are refused with draining) and stops. It returns once the node is down.
func (c *Cluster) Drain(node int) error {
	if err := c.checkNode(node); err != nil {
		return err
	}
	return faultErr(c.cl.Drain(node))
}

// Restart starts a node stopped by Kill or Drain again, on the same
// address. The shards that moved away stay where they are (MoveShard moves
// one back). It returns once the node accepts connections.
func (c *Cluster) Restart(node int) error {
	if err := c.checkNode(node); err != nil {
		return err
	}
	return faultErr(c.cl.Restart(node))
}

// Running reports whether a node is up (not stopped by Kill or Drain).
func (c *Cluster) Running(node int) bool {
	return c.checkNode(node) == nil && c.cl.Alive(node)
}

// Owner returns the node that owns shard of stream t now.
func (c *Cluster) Owner(t felix.Topic, shard uint32) int {
	n, _ := c.cl.OwnerOf(engineTopic(t), shard)
	return n
}

// MoveShard moves shard of stream t to node to, a planned move: when it
// returns, node to owns the shard and the subscriptions served by the old
// owner have been ended with shard_moved (the client resumes them on the
// new owner). The stream must exist.
func (c *Cluster) MoveShard(t felix.Topic, shard uint32, to int) error {
	if err := c.checkNode(to); err != nil {
		return err
	}
	return faultErr(c.cl.MoveShard(engineTopic(t), shard, to))
}

// CutClient partitions every client from a node until Heal: each datagram
// between them, both ways, is lost, so a connection to the node stalls and
// is given up after the client's idle timeout. The node itself keeps
// running and owning its shards.
func (c *Cluster) CutClient(node int) error {
	if err := c.checkNode(node); err != nil {
		return err
	}
	c.cl.Relay(node).Drop(untilHealed)
	return nil
}

// StallClient slows the link between the clients and a node: every
// datagram, both ways, is held for d from now and then delivered in order
// (Heal delivers them at once).
func (c *Cluster) StallClient(node int, d time.Duration) error {
	if err := c.checkNode(node); err != nil {
		return err
	}
	c.cl.Relay(node).Stall(d)
	return nil
}

// ResetClient breaks every connection open to a node now, for good (their
// datagrams are lost from now on, and Heal does not revive them); new
// connections get through at once. A client notices after its idle
// timeout and reconnects.
func (c *Cluster) ResetClient(node int) error {
	if err := c.checkNode(node); err != nil {
		return err
	}
	c.cl.Relay(node).Reset()
	return nil
}

// CutNodes partitions nodes a and b from each other until Heal: neither
// forwards a publish to a shard the other owns; such a publish is refused
// with shard_unavailable (reason owner_unavailable, retry class retry).
// Subscribes and reads are unaffected (they are redirected to the owner,
// which the client reaches directly).
func (c *Cluster) CutNodes(a, b int) error {
	if err := c.checkNode(a); err != nil {
		return err
	}
	if err := c.checkNode(b); err != nil {
		return err
	}
	return faultErr(c.cl.CutNodes(a, b))
}

// Heal ends every CutClient, StallClient and CutNodes in force. It does
// not restart stopped nodes (Restart) nor revive connections broken by
// ResetClient.
func (c *Cluster) Heal() { c.cl.Heal() }

func engineTopic(t felix.Topic) engine.Topic {
	return engine.Topic{Tenant: t.TenantID, Namespace: t.Namespace, Stream: t.Stream}
}
