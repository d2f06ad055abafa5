package crosslayer

import (
	"testing"
)

// seedFrames returns every distinct vector frame of the repository.
func seedFrames(f *testing.F) [][]byte {
	f.Helper()
	frames, err := VectorFrames(VectorDirs(repoRoot)...)
	if err != nil {
		f.Fatal(err)
	}
	seen := map[string]bool{}
	var out [][]byte
	for _, fr := range frames {
		if !seen[string(fr)] {
			seen[string(fr)] = true
			out = append(out, fr)
		}
	}
	return out
}

// FuzzRoundTrip: any frame is refused with a classed error by the root
// and vector codecs alike, or decodes through both to one canonical frame
// that is a fixed point of decode → encode and of decode → describe →
// encode.
func FuzzRoundTrip(f *testing.F) {
	for _, fr := range seedFrames(f) {
		f.Add(fr)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if _, err := RoundTrip(frame, 1<<16); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzStream: a felix.Reader reads the same frames and ends the same way
// however its input is split into reads, and every frame it reads passes
// RoundTrip.
func FuzzStream(f *testing.F) {
	frames := seedFrames(f)
	for i, fr := range frames {
		// Each frame alone, then with the next one, with varied splits.
		f.Add(fr, []byte{byte(i % 13), 0x80 | byte(i%7)})
		if i%4 == 0 && i+1 < len(frames) {
			f.Add(append(append([]byte{}, fr...), frames[i+1]...), []byte{byte(i % 29)})
		}
	}
	f.Fuzz(func(t *testing.T, data, splits []byte) {
		if err := CheckStream(data, splits, 1<<16); err != nil {
			t.Fatal(err)
		}
	})
}
