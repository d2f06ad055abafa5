//go:build !unix

package main

import "time"

// cpuNow is unknown here: felix bench raw reports 0 CPU.
func cpuNow() time.Duration { return 0 }
