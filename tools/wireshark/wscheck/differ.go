package main

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/flxproto/felix"
	"github.com/flxproto/felix/vectors"
)

// goClass decodes frame the way `felix decode` does (the frame, then the
// layout its flags select; no base bit goes to the JSON decoder) and
// returns the error class, "" when it decodes, with the decoded members
// then (as a vector describes them).
func goClass(frame []byte) (class string, exp expectation) {
	defer func() {
		if r := recover(); r != nil {
			class, exp = fmt.Sprintf("panic: %v", r), nil
		}
	}()
	f, err := felix.DecodeFrame(frame, 0)
	if err != nil {
		return felix.ErrorClass(err), nil
	}
	layout := f.Flags.Layout()
	if layout == felix.LayoutUnknown {
		layout = felix.LayoutJSON
	}
	c, ok := vectors.Lookup(layout.String())
	if !ok {
		return "no codec for " + layout.String(), nil
	}
	members, _, err := c.Decode(frame, 0)
	if err != nil {
		return felix.ErrorClass(err), nil
	}
	exp = expectation{}
	for _, m := range members {
		raw, err := json.Marshal(m.Value)
		if err != nil {
			return "member " + m.Name + ": " + err.Error(), nil
		}
		exp[m.Name] = raw
	}
	exp["kind"], _ = json.Marshal(layout.String())
	exp["flags"], _ = json.Marshal(uint16(f.Flags))
	return "", exp
}

// mutate returns a variant of frame: a byte changed, the frame cut or
// extended (with or without the header length following), a flag bit
// flipped, or the length field changed.
func mutate(r *rand.Rand, frame []byte) []byte {
	m := append([]byte(nil), frame...)
	setLen := func() {
		if len(m) >= 12 {
			binary.BigEndian.PutUint32(m[8:], uint32(len(m)-12))
		}
	}
	switch r.IntN(7) {
	case 0: // one byte of the payload changed
		if len(m) > 12 {
			m[12+r.IntN(len(m)-12)] ^= byte(1 + r.IntN(255))
		}
	case 1: // one byte of the payload set to a boundary value
		if len(m) > 12 {
			m[12+r.IntN(len(m)-12)] = []byte{0, 1, 2, 0x7f, 0x80, 0xff}[r.IntN(6)]
		}
	case 2: // cut, header length kept
		m = m[:r.IntN(len(m)+1)]
	case 3: // cut, header length following
		if len(m) > 12 {
			m = m[:12+r.IntN(len(m)-11)]
			setLen()
		}
	case 4: // extended, header length following
		m = append(m, make([]byte, 1+r.IntN(9))...)
		setLen()
	case 5: // a flag bit flipped
		if len(m) >= 8 {
			b := r.IntN(16)
			m[6+1-b/8] ^= 1 << (b % 8)
		}
	case 6: // the length field changed by a little
		if len(m) >= 12 {
			n := binary.BigEndian.Uint32(m[8:])
			binary.BigEndian.PutUint32(m[8:], n+uint32(r.IntN(5))-2)
		}
	}
	return m
}

func runDiffer(args []string) error {
	fs := flag.NewFlagSet("differ", flag.ContinueOnError)
	lua := fs.String("lua", "tools/wireshark/felix.lua", "the dissector")
	per := fs.Int("n", 4, "variants per vector")
	seed := fs.Uint64("seed", 1, "random seed (the run is reproducible)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var frames [][]byte
	for _, root := range fs.Args() {
		dirs, err := vectors.FindDirs(root)
		if err != nil {
			return err
		}
		for _, d := range dirs {
			vs, err := vectors.LoadDir(d)
			if err != nil {
				return err
			}
			for _, v := range vs {
				b, err := hex.DecodeString(v.Hex)
				if err == nil && v.LoadErr == nil {
					frames = append(frames, b)
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(*seed, 0))
	var pdus [][]byte
	for _, f := range frames {
		for i := 0; i < *per; i++ {
			m := mutate(r, f)
			for r.IntN(2) == 0 { // now and then a second and third change
				m = mutate(r, m)
			}
			pdus = append(pdus, m)
		}
	}
	dir, err := os.MkdirTemp("", "wscheck")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pcap := filepath.Join(dir, "differ.pcap")
	if err := writeExportPDU(pcap, "felix", pdus); err != nil {
		return err
	}
	packets, err := tshark(*lua, pcap)
	if err != nil {
		return err
	}
	if len(packets) != len(pdus) {
		return fmt.Errorf("tshark shows %d packets, wrote %d", len(packets), len(pdus))
	}
	failed, refused := 0, 0
	for i, p := range pdus {
		want, exp := goClass(p)
		if want != "" {
			refused++
		}
		got := "(no frame)"
		if len(packets[i].frames) == 1 {
			got = ""
			if e, ok := packets[i].frames[0].get("felix.error"); ok {
				got = e.Show
			}
		}
		if got == want && want == "" {
			// both decode it: the dissector's fields must be the codec's members
			if errs := check(exp, packets[i].frames[0], false); len(errs) > 0 {
				got = "fields differ: " + strings.Join(errs, "; ")
			}
		}
		if got != want {
			failed++
			if failed <= 20 {
				fmt.Printf("FAIL packet %d %x: dissector %q, codec %q\n", i+1, p, got, want)
			}
		}
	}
	fmt.Printf("wscheck differ: %d variants of %d vectors (%d refused by the codec), %d disagree\n", len(pdus), len(frames), refused, failed)
	if failed > 0 {
		return fmt.Errorf("differ: the dissector and the codec disagree on %d frames", failed)
	}
	return nil
}
