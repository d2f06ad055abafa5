package main

import (
	"bytes"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// field is one PDML field of a felix tree, flattened in tree order.
type field struct {
	Name, Show, Value string
}

// felixFrame is one <proto name="felix"> element: one Felix frame as the
// dissector shows it.
type felixFrame struct {
	fields []field
}

// all returns every field named name, in tree order.
func (f *felixFrame) all(name string) []field {
	var out []field
	for _, x := range f.fields {
		if x.Name == name {
			out = append(out, x)
		}
	}
	return out
}

// get returns the first field named name.
func (f *felixFrame) get(name string) (field, bool) {
	for _, x := range f.fields {
		if x.Name == name {
			return x, true
		}
	}
	return field{}, false
}

// packet is one PDML packet: its number, UDP ports and Felix frames.
type packet struct {
	num              int
	srcPort, dstPort int
	frames           []*felixFrame
}

type pdmlField struct {
	Name   string      `xml:"name,attr"`
	Show   string      `xml:"show,attr"`
	Value  string      `xml:"value,attr"`
	Fields []pdmlField `xml:"field"`
	Protos []pdmlProto `xml:"proto"`
}

type pdmlProto struct {
	Name   string      `xml:"name,attr"`
	Fields []pdmlField `xml:"field"`
}

type pdmlPacket struct {
	Protos []pdmlProto `xml:"proto"`
}

func flatten(dst []field, fs []pdmlField) []field {
	for _, f := range fs {
		if f.Name != "" {
			dst = append(dst, field{Name: f.Name, Show: f.Show, Value: f.Value})
		}
		dst = flatten(dst, f.Fields)
	}
	return dst
}

// parsePDML reads tshark -T pdml output.
func parsePDML(r io.Reader) ([]packet, error) {
	dec := xml.NewDecoder(r)
	var out []packet
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("pdml: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "packet" {
			continue
		}
		var p pdmlPacket
		if err := dec.DecodeElement(&p, &se); err != nil {
			return nil, fmt.Errorf("pdml packet: %w", err)
		}
		pk := packet{num: len(out) + 1}
		for _, pr := range p.Protos {
			switch pr.Name {
			case "geninfo":
				for _, f := range pr.Fields {
					if f.Name == "num" {
						pk.num, _ = strconv.Atoi(f.Show)
					}
				}
			case "udp":
				for _, f := range pr.Fields {
					switch f.Name {
					case "udp.srcport":
						pk.srcPort, _ = strconv.Atoi(f.Show)
					case "udp.dstport":
						pk.dstPort, _ = strconv.Atoi(f.Show)
					}
				}
			case "felix":
				pk.frames = append(pk.frames, &felixFrame{fields: flatten(nil, pr.Fields)})
			}
		}
		out = append(out, pk)
	}
}

// tshark runs tshark with the dissector and returns the parsed PDML.
func tshark(lua, pcap string, extra ...string) ([]packet, error) {
	args := append([]string{"-n", "-r", pcap, "-X", "lua_script:" + lua, "-T", "pdml", "-J", "geninfo udp felix"}, extra...)
	cmd := exec.Command("tshark", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("tshark %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "Lua") || strings.Contains(line, "lua") {
			return nil, fmt.Errorf("tshark reported a Lua problem: %s", stderr.String())
		}
	}
	if i := strings.Index(stdout.String(), "Lua Error"); i >= 0 {
		end := min(len(stdout.String()), i+300)
		return nil, fmt.Errorf("the dissector raised a Lua error: %s", stdout.String()[i:end])
	}
	// show attributes carry raw field text (invalid UTF-8 included, in
	// invalid vectors); values are hex, so nothing compared is lost.
	return parsePDML(strings.NewReader(xmlSafe(stdout.String())))
}

// xmlSafe replaces invalid UTF-8 and the characters XML 1.0 does not
// allow with U+FFFD.
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD,
			r >= 0x20 && r <= 0xD7FF,
			r >= 0xE000 && r <= 0xFFFD,
			r >= 0x10000 && r <= 0x10FFFF:
			return r
		}
		return 0xFFFD
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// writeExportPDU writes a pcap of link type WIRESHARK_UPPER_PDU (252):
// each packet hands its bytes to the dissector named dissector ("felix":
// one frame per packet, the Decode As entry of felix.lua).
func writeExportPDU(path, dissector string, pdus [][]byte) error {
	var b bytes.Buffer
	hdr := make([]byte, 24)
	binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(hdr[4:], 2)
	binary.LittleEndian.PutUint16(hdr[6:], 4)
	binary.LittleEndian.PutUint32(hdr[16:], 1<<20)
	binary.LittleEndian.PutUint32(hdr[20:], 252)
	b.Write(hdr)
	// EXP_PDU_TAG_DISSECTOR_NAME (12) with the name padded to 4 bytes,
	// then the end of options
	name := append([]byte(dissector), make([]byte, 4-len(dissector)%4)...)
	tag := append([]byte{0, 12, byte(len(name) >> 8), byte(len(name))}, name...)
	tag = append(tag, 0, 0, 0, 0)
	for i, p := range pdus {
		rec := make([]byte, 16)
		n := len(tag) + len(p)
		binary.LittleEndian.PutUint32(rec[0:], uint32(1700000000+i))
		binary.LittleEndian.PutUint32(rec[8:], uint32(n))
		binary.LittleEndian.PutUint32(rec[12:], uint32(n))
		b.Write(rec)
		b.Write(tag)
		b.Write(p)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
