package felix_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestAppendPublishBatchSeqAndView: a batch encoded from a sequence of its
// payloads, or re-addressed from the parsed view of another batch, is
// byte-identical to AppendPublishBatch of the same batch.
func TestAppendPublishBatchSeqAndView(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genPublishBatch(t)
		want, err := felix.AppendPublishBatch(nil, &b)
		if err != nil {
			t.Fatal(err)
		}
		head := b
		head.Payloads = nil
		got, err := felix.AppendPublishBatchSeq([]byte("prefix"), &head, slices.Values(b.Payloads))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[len("prefix"):], want) {
			t.Fatalf("seq encoding differs")
		}
		// Forward: the view of a batch sent elsewhere, re-addressed.
		src := b
		src.TenantID, src.Stream, src.AckMode, src.Idempotent, src.HasKey, src.Key = "other", "elsewhere", felix.AckNone, false, false, nil
		frame, err := felix.AppendPublishBatch(nil, &src)
		if err != nil {
			t.Fatal(err)
		}
		v, err := felix.ParsePublishBatch(src.Flags(), frame[felix.HeaderLen:])
		if err != nil {
			t.Fatal(err)
		}
		got, err = felix.AppendPublishBatchView(nil, &head, &v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("view encoding differs")
		}
		got, err = felix.AppendPublishBatchSeq(nil, &head, v.Payloads())
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("seq of a view: %v", err)
		}
	})
}

func TestAppendPublishBatchSeqErrors(t *testing.T) {
	b := felix.PublishBatch{TenantID: "t", Namespace: "n", Stream: "s"}
	// A sequence that yields more the second time.
	n := 0
	grows := func(yield func([]byte) bool) {
		n++
		for range n {
			if !yield([]byte("x")) {
				return
			}
		}
	}
	dst := []byte("keep")
	out, err := felix.AppendPublishBatchSeq(dst, &b, grows)
	require.ErrorIs(t, err, felix.ErrInvalidValue)
	require.Equal(t, "keep", string(out))
	// Payloads and a sequence at once.
	b.Payloads = [][]byte{[]byte("x")}
	_, err = felix.AppendPublishBatchSeq(nil, &b, slices.Values(b.Payloads))
	var fe *felix.Error
	require.True(t, errors.As(err, &fe))
}

// TestAppendPublishBatchViewZeroAlloc: forwarding a parsed batch into a
// buffer with room allocates nothing.
func TestAppendPublishBatchViewZeroAlloc(t *testing.T) {
	src := felix.PublishBatch{TenantID: "t", Namespace: "n", Stream: "s", Payloads: [][]byte{[]byte("a"), []byte("bb"), make([]byte, 300)}}
	frame, err := felix.AppendPublishBatch(nil, &src)
	require.NoError(t, err)
	v, err := felix.ParsePublishBatch(src.Flags(), frame[felix.HeaderLen:])
	require.NoError(t, err)
	head := felix.PublishBatch{AckMode: felix.AckPerBatch, RequestID: 9, TenantID: "t2", Namespace: "n", Stream: "s"}
	buf := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := felix.AppendPublishBatchView(buf[:0], &head, &v); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
	// A sequence is opaque: the loop state handed to it escapes, a small
	// constant number of allocations, whatever the number of payloads.
	seqAllocs := func(n int) float64 {
		b := felix.PublishBatch{TenantID: "t", Namespace: "n", Stream: "s"}
		for range n {
			b.Payloads = append(b.Payloads, []byte("payload"))
		}
		fr, err := felix.AppendPublishBatch(nil, &b)
		require.NoError(t, err)
		v, err := felix.ParsePublishBatch(b.Flags(), fr[felix.HeaderLen:])
		require.NoError(t, err)
		seq := v.Payloads()
		big := make([]byte, 0, 4096)
		return testing.AllocsPerRun(100, func() {
			if _, err := felix.AppendPublishBatchSeq(big[:0], &head, seq); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := seqAllocs(3), seqAllocs(200)
	require.LessOrEqual(t, small, 3.0)
	require.Equal(t, small, large)
}

// BenchmarkForwardPublishBatch re-addresses a received batch of 100
// records of 100 bytes: decoded into a PublishBatch and encoded again,
// from its view's payload sequence, and from the view itself.
func BenchmarkForwardPublishBatch(b *testing.B) {
	src := felix.PublishBatch{TenantID: "t", Namespace: "n", Stream: "s"}
	for range 100 {
		src.Payloads = append(src.Payloads, make([]byte, 100))
	}
	frame, err := felix.AppendPublishBatch(nil, &src)
	require.NoError(b, err)
	payload := frame[felix.HeaderLen:]
	head := felix.PublishBatch{AckMode: felix.AckPerBatch, RequestID: 1, TenantID: "t2", Namespace: "n", Stream: "s"}
	buf := make([]byte, 0, 2*len(frame))
	b.Run("decode+encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d, err := felix.DecodePublishBatch(src.Flags(), payload)
			if err != nil {
				b.Fatal(err)
			}
			h := head
			h.Payloads = d.Payloads
			buf, _ = felix.AppendPublishBatch(buf[:0], &h)
		}
	})
	b.Run("seq", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := felix.ParsePublishBatch(src.Flags(), payload)
			if err != nil {
				b.Fatal(err)
			}
			buf, _ = felix.AppendPublishBatchSeq(buf[:0], &head, v.Payloads())
		}
	})
	b.Run("view", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, err := felix.ParsePublishBatch(src.Flags(), payload)
			if err != nil {
				b.Fatal(err)
			}
			buf, _ = felix.AppendPublishBatchView(buf[:0], &head, &v)
		}
	})
}
