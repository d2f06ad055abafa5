//go:build !race

package main

// raceEnabled: built with -race (see race.go).
const raceEnabled = false
