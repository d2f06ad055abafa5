//go:build goexperiment.jsonv2

package felix_test

// encoding/json/v2 (the standard library's copy of
// github.com/go-json-experiment/json) beside our generated codec, for the
// "JSON messages" choice in BENCHMARKS.md. Run with GOEXPERIMENT=jsonv2.

import (
	jsonv2 "encoding/json/v2"
	"testing"
)

func TestBenchCasesEquivalentJSONv2(t *testing.T) {
	for _, c := range benchCases {
		std, err := jsonv2.Marshal(c.std)
		if err != nil {
			t.Fatal(err)
		}
		if ours := string(c.msg.AppendJSON(nil)); ours != string(std) {
			t.Errorf("%s:\n ours %s\n v2   %s", c.name, ours, std)
		}
	}
}

func BenchmarkMessageEncodeJSONv2(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			buf, _ := jsonv2.Marshal(c.std)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = jsonv2.Marshal(c.std)
			}
		})
	}
}

func BenchmarkMessageDecodeJSONv2(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			in := c.msg.AppendJSON(nil)
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if err := jsonv2.Unmarshal(in, c.newStd()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
