package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A broker that failed since its last successful dial is not dialled
// ahead of one that did not, even once its backoff ended: not as the home
// broker, not through an owner hint naming it. Only when every broker
// failed does the client go back to one that failed.
func TestFailedBrokerComesAfterHealthyOnes(t *testing.T) {
	c, err := New(Config{Seeds: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}})
	require.NoError(t, err)
	defer c.Close()
	dead := c.brokers["127.0.0.1:2"]
	dead.mu.Lock()
	dead.fails, dead.downUntil = 1, time.Now().Add(-time.Second) // backoff over
	dead.mu.Unlock()
	c.home.Store(dead)
	for range 10 {
		require.NotEqual(t, dead.addr, c.pick(nil).addr, "the failed home broker is not picked ahead of a healthy one")
	}
	k := ownerKey{tenant: "t", namespace: "ns", name: "s"}
	c.learnOwner(k, ownerHint{addr: dead.addr}, "test")
	require.Nil(t, c.target(call{key: &k}), "a hint naming a failed broker is not followed")
	for _, b := range c.list {
		b.mu.Lock()
		b.fails, b.downUntil = 1, time.Now().Add(-time.Second)
		b.mu.Unlock()
	}
	require.NotNil(t, c.pick(nil), "every broker failed: one of them is tried")
}
