//go:build !unix

package server_test

import "time"

// processCPU is not measured on this platform (see the unix version).
func processCPU() (time.Duration, bool) { return 0, false }
