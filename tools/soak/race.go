//go:build race

package main

// raceEnabled: built with -race, whose shadow memory is outside the Go
// runtime's accounting and grows with the heap addresses touched.
const raceEnabled = true
