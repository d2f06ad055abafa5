package felix

import "encoding/binary"

// A strict base64 decoder for the bytes members of the JSON messages. It
// accepts exactly what base64.StdEncoding.Strict() accepts once '\r' and
// '\n' (which the standard decoder skips) are refused too: padded standard
// alphabet, a length that is a multiple of 4, '=' only as the last one or
// two characters, and zero bits under the padding. Anything else makes it
// report failure, and the caller reruns the standard decoder for the
// error's wording; TestBase64StrictMatchesStdlib and FuzzBase64Strict hold
// the two to the same accept/reject decision and output.
//
// Each table maps a character to its 6-bit value already shifted into its
// place of the 24-bit group, or to b64Bad (bit 31) for a character outside
// the alphabet, so a group is four loads and three ORs, and one test of
// bit 31 validates all four characters.

const b64Bad = 1 << 31

var b64Tab = func() (t [4][256]uint32) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range t {
		for c := range t[i] {
			t[i][c] = b64Bad
		}
	}
	for v := range len(alphabet) {
		c := alphabet[v]
		t[0][c] = uint32(v) << 18
		t[1][c] = uint32(v) << 12
		t[2][c] = uint32(v) << 6
		t[3][c] = uint32(v)
	}
	return t
}()

// base64DecodedLen returns the decoded length of the padded base64 text s
// (len(s) a multiple of 4), counting the padding of its last group.
func base64DecodedLen(s []byte) int {
	n := len(s) / 4 * 3
	if len(s) > 0 && s[len(s)-1] == '=' {
		n--
		if s[len(s)-2] == '=' {
			n--
		}
	}
	return n
}

// decodeBase64Strict decodes s (len(s) a multiple of 4) into out, which
// has exactly base64DecodedLen(s) bytes, and reports whether s was valid
// strict base64. On failure out holds garbage.
func decodeBase64Strict(out, s []byte) bool {
	if len(s) == 0 {
		return true
	}
	t0, t1, t2, t3 := &b64Tab[0], &b64Tab[1], &b64Tab[2], &b64Tab[3]
	body := s[:len(s)-4]
	var bad uint32
	j := 0
	// Two groups (8 characters, 6 bytes) per step, written with one
	// 8-byte store while at least 8 bytes of out remain.
	for len(body) >= 8 && len(out)-j >= 8 {
		v := t0[body[0]] | t1[body[1]] | t2[body[2]] | t3[body[3]]
		w := t0[body[4]] | t1[body[5]] | t2[body[6]] | t3[body[7]]
		bad |= v | w
		binary.BigEndian.PutUint64(out[j:], uint64(v)<<40|uint64(w)<<16)
		body = body[8:]
		j += 6
	}
	for len(body) >= 4 {
		v := t0[body[0]] | t1[body[1]] | t2[body[2]] | t3[body[3]]
		bad |= v
		if len(out)-j < 3 {
			return false
		}
		out[j], out[j+1], out[j+2] = byte(v>>16), byte(v>>8), byte(v)
		body = body[4:]
		j += 3
	}
	if bad&b64Bad != 0 {
		return false
	}
	// The last group, with its padding.
	last := s[len(s)-4:]
	switch {
	case last[3] != '=':
		v := t0[last[0]] | t1[last[1]] | t2[last[2]] | t3[last[3]]
		if v&b64Bad != 0 || len(out)-j != 3 {
			return false
		}
		out[j], out[j+1], out[j+2] = byte(v>>16), byte(v>>8), byte(v)
	case last[2] != '=':
		v := t0[last[0]] | t1[last[1]] | t2[last[2]]
		if v&b64Bad != 0 || v&0xFF != 0 || len(out)-j != 2 {
			return false
		}
		out[j], out[j+1] = byte(v>>16), byte(v>>8)
	default:
		v := t0[last[0]] | t1[last[1]]
		if v&b64Bad != 0 || v&0xFFFF != 0 || len(out)-j != 1 {
			return false
		}
		out[j] = byte(v >> 16)
	}
	return true
}
