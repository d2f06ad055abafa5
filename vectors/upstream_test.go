package vectors

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// upstreamNames are the vector pairs of upstream's set committed in
// upstream/ (see upstream/README.md).
var upstreamNames = []string{
	"auth_extended_features", "auth_ok", "auth_ok_extended_features", "auth_with_capabilities",
	"binary_publish_ack_error", "binary_publish_ack_ok", "binary_publish_acked",
	"binary_publish_acked_keyed", "binary_publish_keyed",
	"cache_get", "cache_put", "cache_value", "error", "event", "ok", "publish", "subscribe",
}

// upstreamSet loads the upstream vectors of dir and checks that the set is
// complete: every pair present (.json and .hex), nothing else.
func upstreamSet(dir string) ([]Vector, error) {
	vs, err := LoadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
		if _, err := os.Stat(filepath.Join(dir, v.Name+".hex")); err != nil {
			return nil, fmt.Errorf("%s: %v", v.Name, err)
		}
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(upstreamNames))
	if !slices.Equal(names, want) {
		return nil, fmt.Errorf("%s holds %d vectors [%s], want the %d pairs [%s]", dir, len(names),
			strings.Join(names, " "), len(want), strings.Join(want, " "))
	}
	return vs, nil
}

// TestUpstreamVectors runs each of upstream's vectors as its own subtest
// (upstream/NAME). The set must be complete, and a vector the runner would
// skip fails.
func TestUpstreamVectors(t *testing.T) {
	vs, err := upstreamSet("upstream")
	if err != nil {
		t.Fatalf("upstream vectors: %v", err)
	}
	for _, v := range vs {
		t.Run(filepath.ToSlash(filepath.Join("upstream", v.Name)), func(t *testing.T) {
			if res := Run(v); res.Status != Pass {
				t.Fatalf("%v: %s", res.Status, res.Summary())
			}
		})
	}
}

// A missing, empty or incomplete upstream directory is an error, never a
// pass with nothing run.
func TestUpstreamSetIncomplete(t *testing.T) {
	partial := t.TempDir()
	for _, n := range upstreamNames[1:] {
		for _, ext := range []string{".json", ".hex"} {
			b, err := os.ReadFile(filepath.Join("upstream", n+ext))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(partial, n+ext), b, 0o644)
		}
	}
	noHex := t.TempDir()
	for _, n := range upstreamNames {
		b, _ := os.ReadFile(filepath.Join("upstream", n+".json"))
		os.WriteFile(filepath.Join(noHex, n+".json"), b, 0o644)
	}
	for name, dir := range map[string]string{
		"absent": filepath.Join(t.TempDir(), "absent"), "empty": t.TempDir(),
		"one pair missing": partial, "hex files missing": noHex,
	} {
		if _, err := upstreamSet(dir); err == nil {
			t.Errorf("%s directory accepted", name)
		}
	}
}
