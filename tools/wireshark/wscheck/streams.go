package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/flxproto/felix"
)

// piece is one PDU of the dissector's stream test entry point
// ("felix_stream_test"): data at a stream offset, and whether the stream
// ends with it.
type piece struct {
	off  int
	data []byte
	fin  bool
}

func (p piece) pdu() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(p.off))
	if p.fin {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	return append(b, p.data...)
}

// streamCase is a byte stream cut into pieces and what the dissector must
// show in each packet: one word per item, "partial" for the start of a
// frame completed later, otherwise the layout (JSON: the message type),
// followed by "!class" when felix.error is set.
type streamCase struct {
	name   string
	pieces []piece
	want   [][]string
}

func mustFrame(flags felix.Flags, payload []byte) []byte {
	f, err := felix.AppendFrame(nil, flags, payload)
	if err != nil {
		panic(err)
	}
	return f
}

// eventBatch is a shared event batch of n records of size bytes each.
func eventBatch(n, size int) []byte {
	p := binary.BigEndian.AppendUint32(nil, uint32(n))
	for i := 0; i < n; i++ {
		p = binary.BigEndian.AppendUint32(p, uint32(size))
		p = append(p, strings.Repeat(string(rune('a'+i%26)), size)...)
	}
	return mustFrame(felix.FlagBinaryEventBatchShared, p)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func streamCases() []streamCase {
	hello := mustFrame(0, []byte(`{"type":"event_stream_hello","subscription_id":1}`))
	ok := mustFrame(0, []byte(`{"type":"ok"}`))
	big := eventBatch(20, 150) // 3,092 bytes: split over three pieces below
	lagged := mustFrame(0, []byte(`{"type":"subscription_lagged","subscription_id":1,"resume_from":9}`))
	unknown := mustFrame(0x8000, []byte("xyz"))
	garbage := []byte("GET / HTTP/1.1\r\n")
	tooLarge := binary.BigEndian.AppendUint32([]byte{0x46, 0x4c, 0x58, 0x31, 0, 1, 0, 4}, 20<<20)
	n1, n2 := len(hello), len(hello)+len(ok)
	return []streamCase{{
		name: "two frames and the start of a third in one piece, the third completed two pieces later",
		pieces: []piece{
			{0, cat(hello, ok, big[:100]), false},
			{n2 + 100, big[100:1500], false},
			{n2 + 1500, big[1500:], true},
		},
		want: [][]string{{"event_stream_hello", "ok", "partial"}, nil, {"binary_event_batch"}},
	}, {
		name: "a retransmitted piece, and the second half of a frame before its first half",
		pieces: []piece{
			{0, hello, false},
			{0, hello, false},
			{n1 + 700, big[700:], false},
			{n1, big[:700], false},
			{n1 + len(big), lagged, true},
		},
		want: [][]string{{"event_stream_hello"}, nil, nil, {"binary_event_batch"}, {"subscription_lagged"}},
	}, {
		name:   "a frame with an unknown flag bit is skipped by its length, the next one is read",
		pieces: []piece{{0, cat(unknown, ok), true}},
		want:   [][]string{{"unknown!unknown_flags", "ok"}},
	}, {
		name: "after a bad magic the stream is not framed any further",
		pieces: []piece{
			{0, cat(hello, garbage), false},
			{n1 + len(garbage), ok, true},
		},
		want: [][]string{{"event_stream_hello", "!bad_magic"}, nil},
	}, {
		name:   "the stream ends inside a payload",
		pieces: []piece{{0, cat(hello, lagged[:20]), true}},
		want:   [][]string{{"event_stream_hello", "json_message!truncated"}},
	}, {
		name:   "the stream ends inside a header",
		pieces: []piece{{0, ok[:5], false}, {5, nil, true}},
		want:   [][]string{{"partial"}, {"!truncated"}},
	}, {
		name:   "a length above the limit stops the stream before its payload",
		pieces: []piece{{0, cat(ok, tooLarge, []byte("{}")), false}, {len(ok) + 14, ok, true}},
		want:   [][]string{{"ok", "binary_event_batch!frame_too_large"}, nil},
	}}
}

// describe renders a dissected item the way streamCase.want spells it.
func describe(f *felixFrame) string {
	if _, ok := f.get("felix.partial"); ok {
		return "partial"
	}
	w := ""
	if t, ok := f.get("felix.type"); ok {
		w = t.Show
	} else if l, ok := f.get("felix.layout"); ok {
		w = l.Show
	}
	if e, ok := f.get("felix.error"); ok {
		w += "!" + e.Show
	}
	return w
}

func runStreams(args []string) error {
	fs := flag.NewFlagSet("streams", flag.ContinueOnError)
	lua := fs.String("lua", "tools/wireshark/felix.lua", "the dissector")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "wscheck")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	failed := 0
	cases := streamCases()
	for i, c := range cases {
		pdus := make([][]byte, len(c.pieces))
		for j, p := range c.pieces {
			pdus[j] = p.pdu()
		}
		pcap := filepath.Join(dir, fmt.Sprintf("stream-%d.pcap", i))
		if err := writeExportPDU(pcap, "felix_stream_test", pdus); err != nil {
			return err
		}
		packets, err := tshark(*lua, pcap)
		if err != nil {
			return err
		}
		var got [][]string
		for _, p := range packets {
			var words []string
			for _, f := range p.frames {
				words = append(words, describe(f))
			}
			got = append(got, words)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			failed++
			fmt.Printf("FAIL %s:\n     got  %v\n     want %v\n", c.name, got, c.want)
		}
	}
	fmt.Printf("wscheck streams: %d cases, %d failed\n", len(cases), failed)
	if failed > 0 {
		return fmt.Errorf("streams: %d of %d cases failed", failed, len(cases))
	}
	return nil
}
