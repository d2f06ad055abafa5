//go:build !linux

package udpgro

import "net"

// wrap returns c: UDP GRO is a Linux socket option.
func wrap(c *net.UDPConn, _ int, _ func(fd int) error) net.PacketConn { return c }

func enableGRO(int) error { return nil }
