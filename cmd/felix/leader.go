package main

import (
	"context"
	"errors"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// maxLeaderHops bounds the not_leader answers one command follows.
const maxLeaderHops = 3

// onLeader connects to -addr and runs call on the connection. When the
// broker answers not_leader naming another broker (a cluster node that
// does not lead the shard: group, commit-state and shard-level reads go to
// the leader), it connects there and runs call again, at most
// maxLeaderHops times, so that these verbs work against any node of a
// cluster. call must not print before its first request is answered.
func (c *clientFlags) onLeader(ctx context.Context, flags felix.Flags, call func(*conn.Client) error) error {
	for hop := 0; ; hop++ {
		cl, err := c.dial(ctx, flags)
		if err != nil {
			return err
		}
		err = call(cl)
		cl.Close()
		var nl *conn.NotLeaderError
		if !errors.As(err, &nl) || nl.Addr == "" || nl.Addr == c.addr || hop == maxLeaderHops {
			return err
		}
		c.addr = nl.Addr // later messages name the broker answering
	}
}
