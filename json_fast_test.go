package felix

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"testing"

	"pgregory.net/rapid"
)

// swarSpecialSlow is the byte-by-byte definition swarSpecial must match.
func swarSpecialSlow(b []byte) bool {
	for _, c := range b {
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			return true
		}
	}
	return false
}

// TestSwarSpecialEveryByte puts every byte value at every position of an
// otherwise plain word, and checks words of random bytes.
func TestSwarSpecialEveryByte(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			w := []byte("abcdefgh")
			w[pos] = byte(c)
			if got, want := swarSpecial(binary.LittleEndian.Uint64(w)), swarSpecialSlow(w); got != want {
				t.Fatalf("%q: swarSpecial %v, want %v", w, got, want)
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		w := rapid.SliceOfN(rapid.Byte(), 8, 8).Draw(t, "w")
		if got, want := swarSpecial(binary.LittleEndian.Uint64(w)), swarSpecialSlow(w); got != want {
			t.Fatalf("%q: swarSpecial %v, want %v", w, got, want)
		}
	})
}

// stdStrict is the reference: the standard strict decoder, with '\r' and
// '\n' refused (it skips them) and the length a multiple of 4.
func stdStrict(s []byte) ([]byte, bool) {
	if len(s)%4 != 0 || bytes.ContainsAny(s, "\r\n") {
		return nil, false
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Strict().Decode(out, s)
	if err != nil {
		return nil, false
	}
	return out[:n], true
}

func checkBase64(t interface{ Fatalf(string, ...any) }, s []byte) {
	want, wok := stdStrict(s)
	if len(s)%4 != 0 {
		return
	}
	out := make([]byte, base64DecodedLen(s))
	ok := decodeBase64Strict(out, s)
	if ok != wok || (ok && !bytes.Equal(out, want)) {
		t.Fatalf("%q: decoded %x ok=%v, std %x ok=%v", s, out, ok, want, wok)
	}
}

// TestBase64StrictMatchesStdlib holds the fast decoder to the standard
// one on valid encodings, single-character damage and random text.
func TestBase64StrictMatchesStdlib(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		raw := rapid.SliceOfN(rapid.Byte(), 0, 80).Draw(t, "raw")
		enc := []byte(base64.StdEncoding.EncodeToString(raw))
		checkBase64(t, enc)
		if len(enc) > 0 {
			i := rapid.IntRange(0, len(enc)-1).Draw(t, "i")
			enc[i] = rapid.SampledFrom([]byte("=A/+\r\n\x00\xffz9-_ ")).Draw(t, "c")
			checkBase64(t, enc)
		}
		checkBase64(t, []byte(rapid.StringOfN(rapid.SampledFrom([]rune("AQgw=+/z9\n")), 0, 24, -1).Draw(t, "s")))
	})
}

func FuzzBase64Strict(f *testing.F) {
	for _, s := range []string{"", "AA==", "AB==", "AAA=", "AAB=", "AAAA", "A===", "====", "AA=A", "QUJD\nREVG", "QUJDREVGR0hJSktM", "QUJDREVGR0hJSktMTQ=="} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) { checkBase64(t, s) })
}

// TestDecodeArenaValuesIndependent checks that the values carved from one
// arena chunk do not overlap: appending to a decoded payload (capacity
// capped) leaves the strings and the key intact.
func TestDecodeArenaValuesIndependent(t *testing.T) {
	in := []byte(`{"type":"publish","tenant_id":"t1","namespace":"ns","stream":"s","payload":"AAEC","key":"a2V5"}`)
	m, err := DecodeMessage(in)
	if err != nil {
		t.Fatal(err)
	}
	p := m.(*Publish)
	if cap(p.Payload) != len(p.Payload) || cap(p.Key.V) != len(p.Key.V) {
		t.Fatalf("capacities not capped: payload %d/%d key %d/%d", len(p.Payload), cap(p.Payload), len(p.Key.V), cap(p.Key.V))
	}
	_ = append(p.Payload, 'x', 'x', 'x', 'x', 'x')
	p.Payload[0] = 9
	if p.TenantID != "t1" || p.Namespace != "ns" || p.Stream != "s" || string(p.Key.V) != "key" {
		t.Fatalf("a value changed: %+v", p)
	}
	for i := range in {
		in[i] = 0
	}
	if p.TenantID != "t1" || string(p.Key.V) != "key" || !bytes.Equal(p.Payload, []byte{9, 1, 2}) {
		t.Fatalf("decoded values alias the input: %+v", p)
	}
}
