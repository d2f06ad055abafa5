package felixtest

import (
	"log"
	"slices"
	"sync"
	"testing"
)

// Standalone returns a testing.TB for code that runs outside a test but
// wants a broker: a TestMain that shares one cluster among a package's
// tests, a runnable Example, a small program. Pass it to NewBroker or
// NewCluster; stop runs the functions registered with its Cleanup (the
// broker's stop among them), last first. Its Fatal, Fatalf and FailNow log
// and exit the process (log.Fatal); Error and Errorf log and mark it
// failed; Log and Logf log. Its other methods panic: in a test, pass the
// test's own t.
func Standalone() (tb testing.TB, stop func()) {
	s := &standalone{}
	return s, s.stop
}

type standalone struct {
	testing.TB // nil: the methods below are the ones it serves

	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

func (s *standalone) Helper()                   {}
func (s *standalone) Name() string              { return "felixtest.Standalone" }
func (s *standalone) Log(a ...any)              { log.Print(a...) }
func (s *standalone) Logf(f string, a ...any)   { log.Printf(f, a...) }
func (s *standalone) Fatal(a ...any)            { log.Fatal(a...) }
func (s *standalone) Fatalf(f string, a ...any) { log.Fatalf(f, a...) }
func (s *standalone) FailNow()                  { log.Fatal("felixtest: FailNow") }

func (s *standalone) Error(a ...any) {
	log.Print(a...)
	s.Fail()
}

func (s *standalone) Errorf(f string, a ...any) {
	log.Printf(f, a...)
	s.Fail()
}

func (s *standalone) Fail() {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
}

func (s *standalone) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *standalone) Cleanup(f func()) {
	s.mu.Lock()
	s.cleanups = append(s.cleanups, f)
	s.mu.Unlock()
}

func (s *standalone) stop() {
	s.mu.Lock()
	fs := s.cleanups
	s.cleanups = nil
	s.mu.Unlock()
	for _, f := range slices.Backward(fs) {
		f()
	}
}
