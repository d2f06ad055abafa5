//go:build !linux

package quicbench

import (
	"errors"
	"net"
)

func newGROConn(*net.UDPConn) (net.PacketConn, error) {
	return nil, errors.New("quicbench: UDP GRO is a Linux experiment")
}
