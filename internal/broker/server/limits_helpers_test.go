package server_test

import (
	"runtime"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
)

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// totalAlloc returns the bytes the process allocated so far (garbage
// included): a peak measure that a GC cannot hide.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// pipeline writes n request frames built by mk on s while reading the n
// answers concurrently (the broker answers each before reading the next),
// and returns the answers.
func pipeline(t *testing.T, s *rawStream, n int, mk func(i int) []byte) []felix.Message {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		for i := range n {
			if _, err := s.s.Write(mk(i)); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	out := make([]felix.Message, 0, n)
	d, _ := ctxT(t).Deadline() // once: ctxT registers a cleanup per call
	_ = s.s.SetReadDeadline(d)
	for range n {
		f, err := s.r.ReadFrame()
		require.NoError(t, err)
		m, err := felix.DecodeMessage(f.Payload)
		require.NoError(t, err)
		out = append(out, m)
	}
	require.NoError(t, <-errc)
	return out
}

func jsonFrame(t *testing.T, m felix.Message) []byte {
	t.Helper()
	b, err := felix.AppendMessageFrame(nil, m)
	require.NoError(t, err)
	return b
}
