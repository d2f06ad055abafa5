package conn

import (
	"syscall"
	"testing"
	"time"
)

// processCPU returns the user plus system CPU time of the process. The
// benchmarks run client and server in one process, so the CPU time per op
// is the whole cost of a path on both ends; on the shared development
// machine it is inflated far less than wall time by other processes'
// load (a descheduled benchmark uses no CPU).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter reports cpu-µs/op from the moment it is started (call it right
// after b.ResetTimer) to the moment its stop function is called.
func cpuMeter(b *testing.B) (stop func()) {
	c0 := processCPU()
	return func() {
		b.ReportMetric(float64((processCPU()-c0).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}
