package felix_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/flxproto/felix"
)

// The flag table of docs/frame.md §2, restated independently of flags.go.
var specFlags = []struct {
	bit  felix.Flags
	name string
	base bool
}{
	{0x0001, "BINARY_PUBLISH_BATCH", true},
	{0x0002, "BINARY_EVENT_BATCH", true},
	{0x0004, "BINARY_EVENT_BATCH_SHARED", true},
	{0x0008, "BINARY_PUBLISH_ACKED", false},
	{0x0010, "BINARY_PUBLISH_ACK", true},
	{0x0020, "EVENT_BATCH_OFFSETS", false},
	{0x0040, "BINARY_PUBLISH_KEYED", false},
	{0x0080, "BINARY_PUBLISH_ACK_OWNER", false},
	{0x0100, "BINARY_PUBLISH_IDEMPOTENT", false},
	{0x0200, "BINARY_PUBLISH_ACK_CODE", false},
	{0x0400, "BINARY_PUBLISH_ACK_DETAIL", false},
	{0x0800, "EVENT_BATCH_SKIPPED", false},
	{0x1000, "BINARY_PUBLISH_ACK_OFFSET", false},
	{0x2000, "EVENT_BATCH_PUBLISHER", false},
	{0x4000, "EVENT_BATCH_TIMESTAMPS", false},
}

func TestFlagConstants(t *testing.T) {
	consts := []felix.Flags{
		felix.FlagBinaryPublishBatch, felix.FlagBinaryEventBatch, felix.FlagBinaryEventBatchShared,
		felix.FlagBinaryPublishAcked, felix.FlagBinaryPublishAck, felix.FlagEventBatchOffsets,
		felix.FlagBinaryPublishKeyed, felix.FlagBinaryPublishAckOwner, felix.FlagBinaryPublishIdempotent,
		felix.FlagBinaryPublishAckCode, felix.FlagBinaryPublishAckDetail, felix.FlagEventBatchSkipped,
		felix.FlagBinaryPublishAckOffset, felix.FlagEventBatchPublisher, felix.FlagEventBatchTimestamps,
	}
	var all felix.Flags
	for i, c := range consts {
		if c != specFlags[i].bit {
			t.Errorf("constant %d = %#04x, want %#04x (%s)", i, uint16(c), uint16(specFlags[i].bit), specFlags[i].name)
		}
		all |= c
	}
	if felix.KnownFlags != 0x7FFF || all != felix.KnownFlags {
		t.Errorf("KnownFlags = %#04x, OR of the constants = %#04x, want 0x7fff", uint16(felix.KnownFlags), uint16(all))
	}
	if felix.OriginalV1Flags != 0x0007 {
		t.Errorf("OriginalV1Flags = %#04x, want 0x0007", uint16(felix.OriginalV1Flags))
	}
	if felix.PublishFlagsMask != 0x0149 || felix.AckFlagsMask != 0x1690 || felix.EventModifierMask != 0x6820 {
		t.Errorf("masks publish %#04x ack %#04x event %#04x", uint16(felix.PublishFlagsMask), uint16(felix.AckFlagsMask), uint16(felix.EventModifierMask))
	}
	// The broker→client modifier bits a client offers (docs/frame.md §3).
	if felix.ClientModifierFlags != 0x0020|0x0080|0x0200|0x0400|0x0800|0x1000|0x2000|0x4000 {
		t.Errorf("ClientModifierFlags = %#04x", uint16(felix.ClientModifierFlags))
	}
}

func TestFlagsString(t *testing.T) {
	tests := []struct {
		f    felix.Flags
		want string
	}{
		{0, "0x0000(JSON)"},
		{0x0001, "0x0001(BINARY_PUBLISH_BATCH)"},
		{0x0049, "0x0049(BINARY_PUBLISH_BATCH|BINARY_PUBLISH_ACKED|BINARY_PUBLISH_KEYED)"},
		{0x8000, "0x8000(0x8000)"},
		{0x8004, "0x8004(BINARY_EVENT_BATCH_SHARED|0x8000)"},
		{0x0820, "0x0820(EVENT_BATCH_OFFSETS|EVENT_BATCH_SKIPPED)"},
	}
	for _, tc := range tests {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("Flags(%#04x).String() = %q, want %q", uint16(tc.f), got, tc.want)
		}
	}
	for _, sf := range specFlags {
		want := fmt.Sprintf("0x%04x(%s)", uint16(sf.bit), sf.name)
		if got := sf.bit.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
	if got := felix.KnownFlags.String(); got != "0x7fff(BINARY_PUBLISH_BATCH|BINARY_EVENT_BATCH|BINARY_EVENT_BATCH_SHARED|BINARY_PUBLISH_ACKED|BINARY_PUBLISH_ACK|EVENT_BATCH_OFFSETS|BINARY_PUBLISH_KEYED|BINARY_PUBLISH_ACK_OWNER|BINARY_PUBLISH_IDEMPOTENT|BINARY_PUBLISH_ACK_CODE|BINARY_PUBLISH_ACK_DETAIL|EVENT_BATCH_SKIPPED|BINARY_PUBLISH_ACK_OFFSET|EVENT_BATCH_PUBLISHER|EVENT_BATCH_TIMESTAMPS)" {
		t.Errorf("KnownFlags.String() = %q", got)
	}
}

func TestFlagsHasAnyUnknown(t *testing.T) {
	f := felix.Flags(0x8049)
	if !f.Has(0x0049) || f.Has(0x0051) || !f.Any(0x0050) || f.Any(0x0006) {
		t.Error("Has/Any wrong")
	}
	if f.Unknown() != 0x8000 || felix.KnownFlags.Unknown() != 0 {
		t.Error("Unknown wrong")
	}
	wantClass(t, f.CheckKnown(), felix.ErrUnknownFlags)
	if err := felix.KnownFlags.CheckKnown(); err != nil {
		t.Error(err)
	}
}

func TestFlagsLayout(t *testing.T) {
	tests := []struct {
		f    felix.Flags
		want felix.Layout
		name string
	}{
		{0, felix.LayoutJSON, "json_message"},
		{0x0001, felix.LayoutPublishBatch, "binary_publish_batch"},
		{0x0041, felix.LayoutPublishBatch, "binary_publish_batch"},
		{0x0101, felix.LayoutPublishBatch, "binary_publish_batch"},
		{0x0009, felix.LayoutAckedPublishBatch, "binary_acked_publish_batch"},
		{0x0149, felix.LayoutAckedPublishBatch, "binary_acked_publish_batch"},
		{0x0010, felix.LayoutPublishAck, "binary_publish_ack"},
		{0x1690, felix.LayoutPublishAck, "binary_publish_ack"},
		{0x0004, felix.LayoutEventBatch, "binary_event_batch"},
		{0x0002, felix.LayoutEventBatch, "binary_event_batch"},
		{0x6826, felix.LayoutEventBatch, "binary_event_batch"},
		{0x0008, felix.LayoutUnknown, "unknown"},
		{0x0040, felix.LayoutUnknown, "unknown"},
		{0x8000, felix.LayoutUnknown, "unknown"},
		// Dispatch order: publish before ack before event.
		{0x0011, felix.LayoutPublishBatch, "binary_publish_batch"},
		{0x0014, felix.LayoutPublishAck, "binary_publish_ack"},
	}
	for _, tc := range tests {
		if got := tc.f.Layout(); got != tc.want || got.String() != tc.name {
			t.Errorf("Flags(%#04x).Layout() = %v, want %v", uint16(tc.f), got, tc.name)
		}
	}
	if s := felix.Layout(200).String(); s != "layout(200)" {
		t.Errorf("Layout(200).String() = %q", s)
	}
}

// legalWord is docs/frame.md §4's combination rules restated as an
// independent oracle: the layout a legal word selects, or false.
func legalWord(f felix.Flags) (felix.Layout, bool) {
	subset := func(x, of felix.Flags) bool { return x&^of == 0 }
	switch {
	case f == 0:
		return felix.LayoutJSON, true
	case slices.Contains([]felix.Flags{0x0001, 0x0041}, f):
		return felix.LayoutPublishBatch, true
	case slices.Contains([]felix.Flags{0x0009, 0x0049, 0x0109, 0x0149}, f):
		return felix.LayoutAckedPublishBatch, true
	case f&0x0010 != 0 && subset(f, 0x0010|0x0080|0x0200|0x0400|0x1000):
		return felix.LayoutPublishAck, true
	case (f&0x0006 == 0x0002 || f&0x0006 == 0x0004) && subset(f, 0x0006|0x0020|0x0800|0x2000|0x4000):
		if f&0x0800 != 0 && f&0x0020 == 0 {
			return 0, false
		}
		return felix.LayoutEventBatch, true
	}
	return 0, false
}

// Every one of the 65536 flag words is checked against the oracle with the
// layout it dispatches to: legal words pass, words with an unknown bit are
// unknown_flags, every other word is bad_flag_combination.
func TestCheckLayoutExhaustive(t *testing.T) {
	counts := map[felix.Layout]int{}
	for w := range 1 << 16 {
		f := felix.Flags(w)
		err := f.CheckLayout(f.Layout())
		wantLayout, ok := legalWord(f)
		switch {
		case ok:
			if err != nil {
				t.Fatalf("%v: legal word refused: %v", f, err)
			}
			if f.Layout() != wantLayout {
				t.Fatalf("%v: layout %v, want %v", f, f.Layout(), wantLayout)
			}
			counts[wantLayout]++
		case f&0x8000 != 0:
			if !errors.Is(err, felix.ErrUnknownFlags) || errors.Is(err, felix.ErrBadFlagCombination) {
				t.Fatalf("%v: err %v, want unknown_flags", f, err)
			}
		default:
			if !errors.Is(err, felix.ErrBadFlagCombination) {
				t.Fatalf("%v: err %v, want bad_flag_combination", f, err)
			}
		}
	}
	want := map[felix.Layout]int{
		felix.LayoutJSON:              1,
		felix.LayoutPublishBatch:      2,
		felix.LayoutAckedPublishBatch: 4,
		felix.LayoutPublishAck:        16,     // 0x0010 with any of 4 modifiers
		felix.LayoutEventBatch:        2 * 12, // 2 bases × (16 modifier sets − 4 with 0x0800 but no 0x0020)
	}
	for l, n := range want {
		if counts[l] != n {
			t.Errorf("%v: %d legal words, want %d", l, counts[l], n)
		}
	}
}

func TestCheckLayoutRules(t *testing.T) {
	const (
		ok   = ""
		bad  = "bad_flag_combination"
		unkn = "unknown_flags"
	)
	tests := []struct {
		name    string
		f       felix.Flags
		l       felix.Layout
		class   string
		errBits felix.Flags
	}{
		// JSON.
		{"json zero", 0, felix.LayoutJSON, ok, 0},
		{"json with a binary bit", 0x0001, felix.LayoutJSON, bad, 0x0001},
		{"json with unknown bit", 0x8000, felix.LayoutJSON, unkn, 0x8000},
		// The legal publish words.
		{"publish 0x0001", 0x0001, felix.LayoutPublishBatch, ok, 0},
		{"publish 0x0041 keyed", 0x0041, felix.LayoutPublishBatch, ok, 0},
		{"acked 0x0009", 0x0009, felix.LayoutAckedPublishBatch, ok, 0},
		{"acked 0x0049 keyed", 0x0049, felix.LayoutAckedPublishBatch, ok, 0},
		{"acked 0x0109 idempotent", 0x0109, felix.LayoutAckedPublishBatch, ok, 0},
		{"acked 0x0149 idempotent keyed", 0x0149, felix.LayoutAckedPublishBatch, ok, 0},
		// Publish refusals.
		{"0x0101: idempotent needs acked", 0x0101, felix.LayoutPublishBatch, bad, 0x0100},
		{"0x0141: idempotent needs acked", 0x0141, felix.LayoutPublishBatch, bad, 0x0100},
		{"0x0101 decoded as acked", 0x0101, felix.LayoutAckedPublishBatch, bad, 0x0100},
		{"acked word decoded as plain", 0x0009, felix.LayoutPublishBatch, bad, 0x0008},
		{"plain word decoded as acked", 0x0001, felix.LayoutAckedPublishBatch, bad, 0x0001},
		{"publish without base bit", 0x0048, felix.LayoutAckedPublishBatch, bad, 0x0048},
		{"publish with event bit", 0x0005, felix.LayoutPublishBatch, bad, 0x0004},
		{"publish with offsets bit", 0x0021, felix.LayoutPublishBatch, bad, 0x0020},
		{"publish with ack bit", 0x0019, felix.LayoutAckedPublishBatch, bad, 0x0010},
		{"publish with unknown bit", 0x8001, felix.LayoutPublishBatch, unkn, 0x8000},
		// Publish ack.
		{"ack plain", 0x0010, felix.LayoutPublishAck, ok, 0},
		{"ack owner", 0x0090, felix.LayoutPublishAck, ok, 0},
		{"ack code", 0x0210, felix.LayoutPublishAck, ok, 0},
		{"ack code detail", 0x0610, felix.LayoutPublishAck, ok, 0},
		{"ack detail without code is parsed (upstream parity)", 0x0410, felix.LayoutPublishAck, ok, 0},
		{"ack offset", 0x1010, felix.LayoutPublishAck, ok, 0},
		{"ack everything", 0x1690, felix.LayoutPublishAck, ok, 0},
		{"ack without base bit", 0x0200, felix.LayoutPublishAck, bad, 0x0200},
		{"ack with publish bit", 0x0018, felix.LayoutPublishAck, bad, 0x0008},
		{"ack with event modifier", 0x2010, felix.LayoutPublishAck, bad, 0x2000},
		{"ack with unknown bit", 0x8010, felix.LayoutPublishAck, unkn, 0x8000},
		// Event batches.
		{"shared", 0x0004, felix.LayoutEventBatch, ok, 0},
		{"legacy", 0x0002, felix.LayoutEventBatch, ok, 0},
		{"shared offsets", 0x0024, felix.LayoutEventBatch, ok, 0},
		{"shared offsets skipped", 0x0824, felix.LayoutEventBatch, ok, 0},
		{"legacy offsets skipped", 0x0822, felix.LayoutEventBatch, ok, 0},
		{"shared all modifiers", 0x6824, felix.LayoutEventBatch, ok, 0},
		{"legacy publisher timestamps", 0x6002, felix.LayoutEventBatch, ok, 0},
		{"skipped without offsets (shared)", 0x0804, felix.LayoutEventBatch, bad, 0x0800},
		{"skipped without offsets (legacy)", 0x0802, felix.LayoutEventBatch, bad, 0x0800},
		{"skipped without offsets with others", 0x6804, felix.LayoutEventBatch, bad, 0x0800},
		{"both event bases", 0x0006, felix.LayoutEventBatch, bad, 0x0006},
		{"event without base", 0x0020, felix.LayoutEventBatch, bad, 0x0020},
		{"event with publish modifier", 0x0044, felix.LayoutEventBatch, bad, 0x0040},
		{"event with ack modifier", 0x1004, felix.LayoutEventBatch, bad, 0x1000},
		{"event with unknown bit", 0x8004, felix.LayoutEventBatch, unkn, 0x8000},
		// No base bit at all.
		{"modifier alone", 0x0008, felix.LayoutUnknown, bad, 0x0008},
		{"keyed alone", 0x0040, felix.LayoutUnknown, bad, 0x0040},
		{"unknown alone", 0x8000, felix.LayoutUnknown, unkn, 0x8000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.CheckLayout(tc.l)
			if got := felix.ErrorClass(err); got != tc.class {
				t.Fatalf("CheckLayout(%v, %v) = %v (class %q), want class %q", tc.f, tc.l, err, got, tc.class)
			}
			if err == nil {
				return
			}
			var fe *felix.Error
			if !errors.As(err, &fe) {
				t.Fatalf("not a *felix.Error: %v", err)
			}
			if fe.Flags != tc.errBits || fe.Field != "flags" || fe.Offset != 6 {
				t.Fatalf("error names flags %v field %q offset %d, want %v flags 6", fe.Flags, fe.Field, fe.Offset, tc.errBits)
			}
		})
	}
}
