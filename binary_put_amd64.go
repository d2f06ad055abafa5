//go:build amd64 && !purego

package felix

// On amd64 with AVX (and the OS saving the YMM registers), the payload
// sections of the batch encoders are written by putRunAVX (binary_put_amd64.s):
// one call writes every entry of a run of payloads of up to 256 bytes with
// at most 8 unaligned 32-byte loads and stores each, all loads of an entry
// before its stores (so a payload overlapping the output is copied as by
// copy), with no call into memmove per payload. A 64 x 100 B batch spends
// most of its encode time in those per-payload copies (BENCHMARKS.md,
// "Performance pass (issue 15)").

// useAVX reports whether putRunAVX may run on this CPU.
var useAVX = detectAVX()

func detectAVX() bool {
	_, _, ecx, _ := cpuid(1, 0)
	const osxsave, avx = 1 << 27, 1 << 28
	if ecx&osxsave == 0 || ecx&avx == 0 {
		return false
	}
	eax, _ := xgetbv()
	return eax&6 == 6 // XMM and YMM state saved by the OS
}

// cpuid executes CPUID with the given leaf and sub-leaf.
func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// xgetbv reads XCR0.
func xgetbv() (eax, edx uint32)

// putRunAVX writes entries ([ts[i] as u64 BE when len(ts) > 0], u32 BE
// len(ps[i]), ps[i]) back to back from out[0], for i from 0 while the
// payload is at most 256 bytes, the entry fits in out and (when timed) i <
// len(ts). It returns the bytes written and the entries written.
//
//go:noescape
func putRunAVX(out []byte, ps [][]byte, ts []uint64) (written, entries int)

// putRun writes a run of entries as putRunAVX does when the CPU allows it,
// and writes nothing otherwise.
func putRun(out []byte, ps [][]byte, ts []uint64) (written, entries int) {
	if !useAVX {
		return 0, 0
	}
	return putRunAVX(out, ps, ts)
}
