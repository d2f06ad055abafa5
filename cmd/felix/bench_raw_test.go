package main

import (
	"strings"
	"testing"
)

// felix bench raw refuses what it cannot measure with one line saying why,
// before it starts any process.
func TestBenchRawRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-transport", "tcp"}, `-transport "tcp": felix, broker or raw`},
		{[]string{"-transport", "felix", "-cold"}, `-cold is for -transport raw, not "felix"`},
		{[]string{"-transport", "broker", "-cold"}, `-cold is for -transport raw, not "broker"`},
		{[]string{"-size", "0"}, "must be positive"},
		{[]string{"-size", "1048576", "-records", "9"}, "a batch at most 8 MiB"},
	} {
		code, _, stderr := felixRun(t, "", append([]string{"bench", "raw"}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, stderr, tc.want)
		}
		oneErrLine(t, stderr)
	}
}
