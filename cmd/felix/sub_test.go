package main

import (
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

// subEnded words each way the client's one resume can fail: the broker
// going away is the end of the subscription at -addr, with the offset to
// resume from; anything else is explained as a failure.
func TestSubEndedWording(t *testing.T) {
	cf := &clientFlags{addr: "127.0.0.1:7447"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"draining on resume", fmt.Errorf("wrapped: %w", &felix.BrokerError{Code: felix.CodeDraining, Auth: true}),
			"subscription to s ended after 2 event(s): the broker at 127.0.0.1:7447 is draining (shutting down); resume with -from 7"},
		{"no broker to redial", &conn.DialError{Addr: "127.0.0.1:7447", Kind: conn.ErrNoAnswer},
			"subscription to s ended after 2 event(s): lost the connection to the broker at 127.0.0.1:7447 (conn: no answer from 127.0.0.1:7447: "},
		{"finished by a live broker", io.EOF,
			"subscription to s ended by the broker at 127.0.0.1:7447 after 2 event(s): it finished the event stream"},
		{"shut down", conn.ErrBrokerShutdown,
			"subscription to s ended after 2 event(s): the broker at 127.0.0.1:7447 shut down; resume with -from 7"},
		{"refused", &felix.BrokerError{Code: felix.CodeForbidden},
			"subscription to s after 2 event(s): "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Contains(t, subEnded(cf, "s", 2, 7, true, tc.err).Error(), tc.want)
		})
	}
}
