package conformance

import (
	"regexp"
	"strings"
	"testing"
)

func TestCatalogueCounts(t *testing.T) {
	all := Scenarios()
	if len(all) != 63 {
		t.Fatalf("catalogue has %d scenarios, want 63", len(all))
	}
	req := 0
	seen := map[string]bool{}
	idRE := regexp.MustCompile(`^[a-z_]+\.[a-z_]+$`)
	for _, s := range all {
		if seen[s.ID] {
			t.Errorf("id %s repeated", s.ID)
		}
		seen[s.ID] = true
		if !idRE.MatchString(s.ID) {
			t.Errorf("id %q is not group.name", s.ID)
		}
		if s.Required {
			req++
		}
		if s.Group == "" || s.Title == "" || s.Holds == "" {
			t.Errorf("%s: group, title and holds must be set: %+v", s.ID, s)
		}
		if strings.ContainsAny(s.Title, "\n\t") {
			t.Errorf("%s: title must be one line", s.ID)
		}
		got, ok := Lookup(s.ID)
		if !ok || got.ID != s.ID {
			t.Errorf("Lookup(%s) = %+v, %v", s.ID, got, ok)
		}
	}
	if req != 49 {
		t.Fatalf("catalogue has %d required scenarios, want 49", req)
	}
	if _, ok := Lookup("pubsub.nonexistent"); ok {
		t.Fatal("Lookup of an unknown id succeeded")
	}
}

// TestCatalogueOptional pins the 14 optional ids, so a flipped flag shows.
func TestCatalogueOptional(t *testing.T) {
	want := []string{
		"retry.idempotent_producers_re_send_ambiguous_outcomes",
		"retry.transport_failures_are_retried_against_another_broker",
		"ack.at_least_once_may_duplicate_and_says_so",
		"ack.carries_the_offset",
		"ack.duplicate_reports_the_original_offset",
		"ack.offset_negotiated",
		"error.bad_offset_is_typed",
		"queue.dead_letters_are_listable_and_redrivable",
		"watch.retained_delivers_state_before_changes",
		"sharded.resumes_per_shard",
		"sharded.a_lost_shard_is_surfaced",
		"commit.expected_offset_refuses_a_stale_write",
		"publish_if.lands_at_the_expected_offset",
		"publish_if.refused_with_the_tail",
	}
	var got []string
	for _, s := range Scenarios() {
		if !s.Required {
			got = append(got, s.ID)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("optional scenarios:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCatalogueGroups(t *testing.T) {
	want := map[string]int{
		"Publish and subscribe": 5, "Cache and counters": 6, "Reconnection": 3,
		"Redirects": 3, "Retry classification": 4, "Acknowledgement modes": 6,
		"Errors": 5, "Concurrency and lifecycle": 3, "Connection faults": 7,
		"Queues": 4, "Cache watches": 5, "Multi-shard streams": 4, "Atomic commits": 8,
	}
	got := map[string]int{}
	for _, s := range Scenarios() {
		got[s.Group]++
	}
	for g, n := range want {
		if got[g] != n {
			t.Errorf("group %q has %d scenarios, want %d", g, got[g], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("groups %v, want %v", got, want)
	}
}

func TestCatalogueFaultSteps(t *testing.T) {
	want := map[string]Step{
		"fault.publish_through_a_dropped_link":      {DuringPublish, FaultDrop, 3, 10, 8000},
		"fault.publish_through_a_reset_link":        {DuringPublish, FaultReset, 3, 10, 0},
		"fault.publish_through_a_stalled_link":      {DuringPublish, FaultStall, 3, 10, 2000},
		"fault.subscription_through_a_dropped_link": {DuringSubscribe, FaultDrop, 3, 10, 8000},
		"fault.subscription_through_a_reset_link":   {DuringSubscribe, FaultReset, 3, 10, 0},
		"fault.subscription_through_a_stalled_link": {DuringSubscribe, FaultStall, 3, 10, 2000},
		"fault.cache_through_a_reset_link":          {DuringCache, FaultReset, 2, 6, 0},
	}
	n := 0
	for _, s := range Scenarios() {
		w, isFault := want[s.ID]
		switch {
		case isFault && s.Step == nil:
			t.Errorf("%s has no step", s.ID)
		case isFault && *s.Step != w:
			t.Errorf("%s step %+v, want %+v", s.ID, *s.Step, w)
		case !isFault && s.Step != nil:
			t.Errorf("%s is not a fault scenario but has step %+v", s.ID, *s.Step)
		}
		if isFault {
			n++
			if !s.Required {
				t.Errorf("%s must be required", s.ID)
			}
		}
	}
	if n != len(want) {
		t.Fatalf("found %d of %d fault scenarios", n, len(want))
	}
	fs := Faults()
	if len(fs) != len(want) {
		t.Fatalf("Faults() has %d entries, want %d", len(fs), len(want))
	}
	for _, f := range fs {
		if want[f.ID] != f.Step {
			t.Errorf("Faults(): %s = %+v, want %+v", f.ID, f.Step, want[f.ID])
		}
	}
}

func TestScenariosAreCopies(t *testing.T) {
	a := Scenarios()
	a[0].ID = "changed"
	for i := range a {
		if a[i].Step != nil {
			a[i].Step.Records = 999
		}
	}
	b := Scenarios()
	if b[0].ID == "changed" {
		t.Fatal("Scenarios shares its slice")
	}
	s, _ := Lookup("fault.publish_through_a_dropped_link")
	if s.Step.Records != 10 {
		t.Fatal("Scenarios shares its steps")
	}
}
