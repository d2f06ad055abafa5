//go:build amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64 || wasm

package felix_test

// A slice announcing more than 4 GiB exists only where int is 64 bits.

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/flxproto/felix"
)

// A payload too large for the 32-bit length field is refused by the
// encoders. Only the slice header is large: the backing array is mapped but
// never touched, so the test costs no resident memory.
func TestEncodeTooLarge(t *testing.T) {
	// hugeView is a slice header announcing MaxPayloadLen+1 bytes over a
	// small real buffer: the encoders must refuse it from its length alone,
	// before they touch any byte past the header, so no 4 GiB is allocated.
	if raceEnabled {
		t.Skip("checkptr (on with -race) refuses the oversized slice header; the test runs without -race")
	}
	backing := make([]byte, 64)
	hugeView := unsafe.Slice(&backing[0], uint64(felix.MaxPayloadLen)+1)

	_, err := felix.AppendFrame([]byte("x"), 0, hugeView)
	wantClass(t, err, felix.ErrFrameTooLarge)

	copy(backing, felix.BeginFrame(nil, 0))
	hugeFrame := unsafe.Slice(&backing[0], uint64(felix.HeaderLen)+uint64(felix.MaxPayloadLen)+1)
	out, err := felix.FinishFrame(hugeFrame, 0)
	wantClass(t, err, felix.ErrFrameTooLarge)
	if len(out) != 0 {
		t.Fatalf("FinishFrame kept %d bytes of a refused frame", len(out))
	}
	var w bytes.Buffer
	err = felix.NewWriter(&w).WriteFrame(0, hugeView)
	wantClass(t, err, felix.ErrFrameTooLarge)
	if w.Len() != 0 {
		t.Fatalf("writer wrote %d bytes of a refused frame", w.Len())
	}
}
