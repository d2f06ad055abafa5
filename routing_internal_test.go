package felix

import (
	"hash/fnv"
	"testing"

	"pgregory.net/rapid"
)

// fnv1a agrees with the standard library's 64-bit FNV-1a.
func TestPropFNV1aMatchesStdlib(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.SliceOf(rapid.Byte()).Draw(t, "key")
		h := fnv.New64a()
		h.Write(key)
		if got, want := fnv1a(key), h.Sum64(); got != want {
			t.Fatalf("fnv1a(%x) = %#x, want %#x", key, got, want)
		}
	})
}

// Known splitmix64 finalizer outputs and jump hash corner cases.
func TestRoutingHelpers(t *testing.T) {
	if finalize(0) != 0 {
		t.Fatalf("finalize(0) = %#x", finalize(0))
	}
	// splitmix64's first output for seed 0 is finalize(0x9e3779b97f4a7c15).
	if got := finalize(0x9e3779b97f4a7c15); got != 0xe220a8397b1dcdaf {
		t.Fatalf("finalize(golden) = %#x", got)
	}
	for _, key := range []uint64{0, 1, 1 << 63, ^uint64(0)} {
		if got := jump(key, 1); got != 0 {
			t.Fatalf("jump(%#x, 1) = %d", key, got)
		}
	}
}
