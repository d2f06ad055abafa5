package client

import (
	"context"
	"testing"
	"time"
)

// SetResumeWait makes every wait before a resume (an event stream's
// retry_after, the backoff of fruitless resumes) call f instead of
// sleeping, until the test ends: a test observes the wait and its order
// against the broker's view, never the wall clock.
func SetResumeWait(tb testing.TB, f func(ctx context.Context, d time.Duration) bool) {
	waitHook.Store(&f)
	tb.Cleanup(func() { waitHook.Store(nil) })
}
