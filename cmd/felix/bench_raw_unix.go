//go:build unix

package main

import (
	"syscall"
	"time"
)

// cpuNow returns the process's user plus system CPU time (getrusage).
func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
