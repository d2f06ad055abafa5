package conformance

import (
	"bytes"
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
	if strings.Contains(b.String(), `"detail": ""`) {
		t.Fatalf("empty detail must be omitted:\n%s", b.String())
	}
	got, err := ReadResults(&b)
	if err != nil || !reflect.DeepEqual(got, res) {
		t.Fatalf("round trip: %+v, %v", got, err)
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
	if err := r.Record("no.such", StatusPass, ""); err == nil {
		t.Fatal("unknown id recorded")
	}
	if err := r.Record("pubsub.order", "passed", ""); err == nil {
		t.Fatal("bad status recorded")
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
	must(r.Skip("pubsub.order", "later"))
	must(r.Pass("pubsub.order"))       // replaces the skip
	must(r.Fail("cache.put_get", "x")) // a failure sticks
	must(r.Pass("cache.put_get"))
	must(r.Pass("pubsub.roundtrip"))
	want := []Outcome{
		{ID: "pubsub.order", Status: StatusPass},
		{ID: "cache.put_get", Status: StatusFail, Detail: "x"},
		{ID: "pubsub.roundtrip", Status: StatusPass},
	}
	if got := r.Results(); !reflect.DeepEqual(got.Outcomes, want) || got.Client != "felix-go" || got.Version != "dev" {
		t.Fatalf("results %+v", got)
	}
	path := filepath.Join(t.TempDir(), "r.json")
	must(r.WriteFile(path))
	got, err := LoadResults(path)
	if err != nil || !reflect.DeepEqual(got.Outcomes, want) {
		t.Fatalf("file: %+v %v", got, err)
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
			if err := r.Record(s.ID, StatusSkip, fmt.Sprint("reason ", i)); err != nil {
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
	t.Run("passes", func(t *testing.T) { r.Track(t, "pubsub.roundtrip") })
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
	end(&fakeTB{name: "TestS", skipped: true}, "pubsub.order", nil)
	end(&fakeTB{name: "TestE", skipped: true}, "cache.put_get", func() { r.Skip("cache.put_get", "client has no cache yet") })
	end(&fakeTB{name: "TestX", failed: true}, "cache.ttl_expires", func() { r.Skip("cache.ttl_expires", "explicit") })
	want := map[string]Outcome{
		"pubsub.roundtrip":  {ID: "pubsub.roundtrip", Status: StatusPass},
		"pubsub.order":      {ID: "pubsub.order", Status: StatusSkip, Detail: "test TestS was skipped"},
		"cache.put_get":     {ID: "cache.put_get", Status: StatusSkip, Detail: "client has no cache yet"},
		"cache.ttl_expires": {ID: "cache.ttl_expires", Status: StatusFail, Detail: "test TestX failed"},
	}
	got := r.Results().Outcomes
	if len(got) != len(want) {
		t.Fatalf("outcomes %+v", got)
	}
	for _, o := range got {
		if want[o.ID] != o {
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
