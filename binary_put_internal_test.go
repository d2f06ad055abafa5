package felix

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// refPut is the plain definition of the payload section the encoders write.
func refPut(ps [][]byte, ts []uint64) []byte {
	var out []byte
	for i, p := range ps {
		if ts != nil {
			out = binary.BigEndian.AppendUint64(out, ts[i])
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(p)))
		out = append(out, p...)
	}
	return out
}

// TestPutPayloadsMatchesReference holds putPayloads and putTimedPayloads
// (the assembly runs on amd64 included) to the plain definition for
// payloads of every size class, around every block boundary, and checks
// that nothing is written past the section.
func TestPutPayloadsMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 40).Draw(t, "n")
		ps := make([][]byte, n)
		ts := make([]uint64, n)
		for i := range ps {
			size := rapid.OneOf(rapid.IntRange(0, 300), rapid.SampledFrom([]int{0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1000})).Draw(t, "size")
			ps[i] = rapid.SliceOfN(rapid.Byte(), size, size).Draw(t, "p")
			ts[i] = rapid.Uint64().Draw(t, "ts")
		}
		for _, timed := range []bool{false, true} {
			var want []byte
			if timed {
				want = refPut(ps, ts)
			} else {
				want = refPut(ps, nil)
			}
			out := make([]byte, len(want)+64)
			for i := range out {
				out[i] = 0xAA
			}
			var w int
			if timed {
				w = putTimedPayloads(out[:len(want)], ps, ts)
			} else {
				w = putPayloads(out[:len(want)], ps)
			}
			require.Equal(t, len(want), w)
			require.Equal(t, string(want), string(out[:len(want)]))
			for _, c := range out[len(want):] {
				require.Equal(t, byte(0xAA), c, "written past the section")
			}
		}
	})
}

// TestPutPayloadsOverlap: a payload that overlaps the output is copied as
// by copy (all of an entry's loads before its stores).
func TestPutPayloadsOverlap(t *testing.T) {
	for _, size := range []int{5, 20, 40, 100, 200} {
		for _, shift := range []int{1, 3, 17, 33} {
			buf := make([]byte, 600)
			for i := range buf {
				buf[i] = byte(i)
			}
			p := buf[shift+4 : shift+4+size] // the entry's payload is written from out[4:]
			want := append([]byte(nil), p...)
			putPayloads(buf[:4+size], [][]byte{p})
			require.Equal(t, want, buf[4:4+size], "size %d shift %d", size, shift)
		}
	}
}
