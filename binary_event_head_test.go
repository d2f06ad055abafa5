package felix_test

import (
	"testing"

	"github.com/flxproto/felix"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// A head from AppendEventBatchHead followed by the records section as a
// frame carries it is byte for byte the frame AppendEventBatch writes, for
// every batch and every set of accepted modifiers.
func TestEventBatchHeadThenRecordsIsTheFrame(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := genEventBatch(t)
		accepted := felix.Flags(rapid.Uint16().Draw(t, "accepted")) & felix.EventModifierMask
		whole, err := felix.AppendEventBatch(nil, &b, accepted)
		if err != nil {
			t.Fatal(err)
		}
		per, n := 4, 0
		if b.FlagsFor(accepted).Has(felix.FlagEventBatchTimestamps) {
			per = 12
		}
		for _, p := range b.Payloads {
			n += per + len(p)
		}
		records := whole[len(whole)-n:]
		head, err := felix.AppendEventBatchHead([]byte("keep"), &b, accepted, len(b.Payloads), len(records))
		if err != nil {
			t.Fatal(err)
		}
		require.Equal(t, "keep", string(head[:4]))
		require.Equal(t, whole, append(head[4:], records...))
	})
}

func TestAppendEventBatchHeadErrors(t *testing.T) {
	cases := []struct {
		name          string
		b             felix.EventBatch
		count, length int
		class         error
	}{
		{"skipped_without_offset", felix.EventBatch{SkippedBefore: 1}, 1, 5, felix.ErrBadFlagCombination},
		{"publisher_256", felix.EventBatch{HasPublisher: true, Publisher: make([]byte, 256)}, 1, 5, felix.ErrFrameTooLarge},
		{"negative_count", felix.EventBatch{}, -1, 5, felix.ErrInvalidValue},
		{"negative_length", felix.EventBatch{}, 1, -5, felix.ErrInvalidValue},
		{"count_over_u32", felix.EventBatch{}, 1 << 32, 5, felix.ErrFrameTooLarge},
		{"frame_over_u32", felix.EventBatch{}, 1, 1<<32 - 4, felix.ErrFrameTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := felix.AppendEventBatchHead([]byte("keep"), &tc.b, felix.EventModifierMask, tc.count, tc.length)
			binWantErr(t, err, tc.class)
			require.Equal(t, "keep", string(out))
		})
	}
	out, err := felix.AppendEventBatchHead(nil, &felix.EventBatch{}, 0, 1, 1<<32-5)
	require.NoError(t, err, "the largest frame")
	require.Len(t, out, felix.HeaderLen+4)
}

func TestAppendEventBatchHeadZeroAlloc(t *testing.T) {
	b := felix.EventBatch{HasBaseOffset: true, BaseOffset: 7, HasPublisher: true, Publisher: []byte("p")}
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = felix.AppendEventBatchHead(buf[:0], &b, felix.EventModifierMask, 64, 6656); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}
