package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestResultsJSON(t *testing.T) {
	res := Results{Client: "felix-go", Version: "0.3.0", Outcomes: []Outcome{
		{ID: "pubsub.roundtrip", Status: StatusPass},
		{ID: "queue.dead_letters_are_listable_and_redrivable", Status: StatusSkip, Detail: "why: not exposed yet"},
	}}
	var b bytes.Buffer
	if err := res.Write(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), `"detail": ""`) || strings.Contains(b.String(), `"evidence"`) ||
		strings.Contains(b.String(), `"format"`) {
		t.Fatalf("empty detail, evidence and format must be omitted:\n%s", b.String())
	}
	got, err := ReadResults(&b)
	if err != nil || !reflect.DeepEqual(got, res) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	// Format 2: a pass carries its evidence, which grades the same read
	// back from the file as when it was recorded.
	ev := Evidence{"before": []uint64{4, 5}, "after": []uint64{6}, "resumed_at": 6, "resumes": 1}
	v2 := Results{Format: ResultsFormat, Client: "c", Version: "v", Outcomes: []Outcome{
		{ID: "fault.subscription_through_a_dropped_link", Status: StatusPass, Evidence: ev}}}
	b.Reset()
	if err := v2.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"format": 2`) || !strings.Contains(b.String(), `"resumes": 1`) {
		t.Fatalf("format 2 document:\n%s", b.String())
	}
	got, err = ReadResults(&b)
	if err != nil || got.Format != 2 || CheckEvidence(got.Outcomes[0].ID, got.Outcomes[0].Evidence) != nil {
		t.Fatalf("format 2 round trip: %+v, %v", got, err)
	}
	// The document of docs/client-scenarios.md §2 reads as written.
	doc := `{"client": "felix-go", "version": "0.3.0",
 "outcomes": [{"id": "pubsub.roundtrip", "status": "pass"},
              {"id": "queue.dead_letters_are_listable_and_redrivable", "status": "skip",
               "detail": "why: not exposed yet"}]}`
	got, err = ReadResults(strings.NewReader(doc))
	if err != nil || !reflect.DeepEqual(got, res) {
		t.Fatalf("spec document: %+v, %v", got, err)
	}
	if _, err := ReadResults(strings.NewReader(`{"outcomes": [`)); err == nil {
		t.Fatal("truncated document read without error")
	}
	var e bytes.Buffer
	(Results{Client: "x"}).Write(&e)
	if !strings.Contains(e.String(), `"outcomes": []`) {
		t.Fatalf("no outcomes must be an empty list, not null: %s", e.String())
	}
}

func TestRecorder(t *testing.T) {
	r := NewRecorder("felix-go", "dev")
	if err := r.Record(Outcome{ID: "no.such", Status: StatusSkip, Detail: "x"}); err == nil {
		t.Fatal("unknown id recorded")
	}
	if err := r.Record(Outcome{ID: "pubsub.order", Status: "passed"}); err == nil {
		t.Fatal("bad status recorded")
	}
	// A pass needs its evidence, complete and well-formed.
	for _, ev := range []Evidence{nil, {}, {"delivered": []uint64{1, 2}}, {"delivered": []uint64{1, 3}, "records": 2},
		{"delivered": []uint64{1, 2}, "records": 0}, {"delivered": "1,2", "records": 2}} {
		if err := r.Pass("pubsub.order", ev); !errors.Is(err, ErrNoEvidence) {
			t.Fatalf("pass with evidence %v: %v, want ErrNoEvidence", ev, err)
		}
	}
	if len(r.Results().Outcomes) != 0 {
		t.Fatalf("refused outcomes were recorded: %+v", r.Results().Outcomes)
	}
	if err := r.Skip("pubsub.order", ""); err == nil {
		t.Fatal("skip without a reason recorded")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	order := Evidence{"delivered": []uint64{1, 2}, "records": 2}
	must(r.Skip("pubsub.order", "later"))
	must(r.Pass("pubsub.order", order)) // replaces the skip
	must(r.Fail("cache.put_get", "x"))  // a failure sticks
	must(r.Pass("cache.put_get", pass("cache.put_get").Evidence))
	must(r.Pass("pubsub.roundtrip", pass("pubsub.roundtrip").Evidence))
	want := []Outcome{
		{ID: "pubsub.order", Status: StatusPass, Evidence: order},
		{ID: "cache.put_get", Status: StatusFail, Detail: "x"},
		pass("pubsub.roundtrip"),
	}
	if got := r.Results(); !reflect.DeepEqual(got.Outcomes, want) || got.Client != "felix-go" || got.Version != "dev" ||
		got.Format != ResultsFormat {
		t.Fatalf("results %+v", got)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	must(r.WriteFile(path))
	got, err := LoadResults(path)
	if err != nil || len(got.Outcomes) != len(want) {
		t.Fatalf("file: %+v %v", got, err)
	}
	for i, o := range got.Outcomes {
		w, _ := normalize(want[i].Evidence)
		g, _ := normalize(o.Evidence)
		if o.ID != want[i].ID || o.Status != want[i].Status || !reflect.DeepEqual(w, g) {
			t.Fatalf("file outcome %d: %+v, want %+v", i, o, want[i])
		}
	}
	if rep := Verify(got); rep.Passed != 2 || rep.Failed != 1 || rep.Unproven != 0 {
		t.Fatalf("the recorded document grades %+v", rep)
	}
}

func TestRecorderConcurrent(t *testing.T) {
	r := NewRecorder("c", "v")
	all := Scenarios()
	var wg sync.WaitGroup
	for i, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Skip(s.ID, fmt.Sprint("reason ", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := len(r.Results().Outcomes); n != len(all) {
		t.Fatalf("%d outcomes recorded, want %d", n, len(all))
	}
}

func TestRecorderTrack(t *testing.T) {
	r := NewRecorder("c", "v")
	if err := r.Track(t, "no.such"); err == nil {
		t.Fatal("unknown id tracked")
	}
	// A real subtest runs its cleanups before t.Run returns.
	t.Run("passes", func(t *testing.T) {
		r.Track(t, "pubsub.roundtrip")
		if err := r.Pass("pubsub.roundtrip", pass("pubsub.roundtrip").Evidence); err != nil {
			t.Fatal(err)
		}
	})
	// Returning without a pass and its evidence proves nothing: a failure.
	t.Run("returns", func(t *testing.T) { r.Track(t, "pubsub.order") })
	// Skipped and failed tests are driven through a fake TB, so that this
	// test neither skips nor fails.
	end := func(f *fakeTB, id string, during func()) {
		if err := r.Track(f, id); err != nil {
			t.Fatal(err)
		}
		if during != nil {
			during()
		}
		f.cleanup()
	}
	end(&fakeTB{name: "TestS", skipped: true}, "pubsub.resume_from_offset", nil)
	end(&fakeTB{name: "TestP", failed: true}, "pubsub.start_earliest", func() {
		r.Pass("pubsub.start_earliest", pass("pubsub.start_earliest").Evidence)
	})
	end(&fakeTB{name: "TestE", skipped: true}, "cache.put_get", func() { r.Skip("cache.put_get", "client has no cache yet") })
	end(&fakeTB{name: "TestX", failed: true}, "cache.ttl_expires", func() { r.Skip("cache.ttl_expires", "explicit") })
	want := map[string]Outcome{
		"pubsub.roundtrip":          pass("pubsub.roundtrip"),
		"pubsub.order":              {ID: "pubsub.order", Status: StatusFail, Detail: "test TestRecorderTrack/returns returned without recording a pass and its evidence"},
		"pubsub.resume_from_offset": {ID: "pubsub.resume_from_offset", Status: StatusSkip, Detail: "test TestS was skipped"},
		"pubsub.start_earliest":     {ID: "pubsub.start_earliest", Status: StatusFail, Detail: "test TestP failed"},
		"cache.put_get":             {ID: "cache.put_get", Status: StatusSkip, Detail: "client has no cache yet"},
		"cache.ttl_expires":         {ID: "cache.ttl_expires", Status: StatusFail, Detail: "test TestX failed"},
	}
	got := r.Results().Outcomes
	if len(got) != len(want) {
		t.Fatalf("outcomes %+v", got)
	}
	for _, o := range got {
		if !reflect.DeepEqual(want[o.ID], o) {
			t.Errorf("%s: %+v, want %+v", o.ID, o, want[o.ID])
		}
	}
}

type fakeTB struct {
	name            string
	failed, skipped bool
	cleanup         func()
}

func (f *fakeTB) Name() string      { return f.name }
func (f *fakeTB) Failed() bool      { return f.failed }
func (f *fakeTB) Skipped() bool     { return f.skipped }
func (f *fakeTB) Cleanup(fn func()) { f.cleanup = fn }
