//go:build race

package felix_test

// raceEnabled reports whether the race detector (and with it checkptr) is on.
const raceEnabled = true
