//go:build !race

package conn

// raceEnabled reports whether the race detector is on (the large floods of
// server_guess_test.go run at a smaller scale under it).
const raceEnabled = false
