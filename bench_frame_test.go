package felix_test

import (
	"bytes"
	"io"
	"strconv"
	"testing"

	"github.com/flxproto/felix"
)

var benchHeader felix.Header

func BenchmarkAppendHeader(b *testing.B) {
	buf := make([]byte, 0, felix.HeaderLen)
	h := felix.Header{Flags: 0x0049, Length: 4096}
	b.ReportAllocs()
	b.SetBytes(felix.HeaderLen)
	for b.Loop() {
		buf = felix.AppendHeader(buf[:0], h)
	}
	if len(buf) != felix.HeaderLen {
		b.Fatal(len(buf))
	}
}

func BenchmarkParseHeader(b *testing.B) {
	in := felix.AppendHeader(nil, felix.Header{Flags: 0x0049, Length: 4096})
	b.ReportAllocs()
	b.SetBytes(felix.HeaderLen)
	for b.Loop() {
		h, err := felix.ParseHeader(in)
		if err != nil {
			b.Fatal(err)
		}
		benchHeader = h
	}
}

// BenchmarkReadFrame reads frames of several payload sizes from a
// bytes.Reader that is rewound when it runs dry.
func BenchmarkReadFrame(b *testing.B) {
	for _, size := range []int{0, 64, 4096, 65536} {
		b.Run(byteSize(size), func(b *testing.B) {
			var stream []byte
			payload := bytes.Repeat([]byte{'x'}, size)
			for range 64 {
				stream, _ = felix.AppendFrame(stream, felix.FlagBinaryEventBatchShared, payload)
			}
			br := bytes.NewReader(stream)
			r := felix.NewReader(br)
			b.ReportAllocs()
			b.SetBytes(int64(felix.HeaderLen + size))
			for b.Loop() {
				f, err := r.ReadFrame()
				if err == io.EOF {
					br.Reset(stream)
					f, err = r.ReadFrame()
				}
				if err != nil {
					b.Fatal(err)
				}
				benchHeader = f.Header
			}
		})
	}
}

func byteSize(n int) string {
	if n >= 1<<10 && n%(1<<10) == 0 {
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// TestBenchmarkedPathsDoNotAllocate asserts the 0 allocs/op goal of the
// benchmarks above as a plain test, so a regression fails `go test`.
func TestBenchmarkedPathsDoNotAllocate(t *testing.T) {
	buf := make([]byte, 0, felix.HeaderLen)
	h := felix.Header{Flags: 0x0049, Length: 4096}
	if n := testing.AllocsPerRun(500, func() { buf = felix.AppendHeader(buf[:0], h) }); n != 0 {
		t.Errorf("AppendHeader: %v allocs/op", n)
	}
	in := felix.AppendHeader(nil, h)
	if n := testing.AllocsPerRun(500, func() { benchHeader, _ = felix.ParseHeader(in) }); n != 0 {
		t.Errorf("ParseHeader: %v allocs/op", n)
	}
	var stream []byte
	for range 4 {
		stream, _ = felix.AppendFrame(stream, felix.FlagBinaryEventBatchShared, make([]byte, 4096))
	}
	br := bytes.NewReader(stream)
	r := felix.NewReader(br)
	if _, err := r.ReadFrame(); err != nil { // warm the buffer
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(500, func() {
		f, err := r.ReadFrame()
		if err == io.EOF {
			br.Reset(stream)
			f, err = r.ReadFrame()
		}
		if err != nil {
			t.Fatal(err)
		}
		benchHeader = f.Header
	})
	if n != 0 {
		t.Errorf("ReadFrame: %v allocs/op", n)
	}
}
