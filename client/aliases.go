package client

import "github.com/flxproto/felix"

// StartPosition is where a subscription starts (felix.StartPosition).
type StartPosition = felix.StartPosition

// Start positions, so that a program that subscribes needs no other
// import than client.
var (
	// StartLatest delivers only records published from now on (the zero
	// value of StartPosition).
	StartLatest = StartPosition{Kind: felix.StartLatest}
	// StartEarliest delivers from the oldest record the broker keeps.
	StartEarliest = StartPosition{Kind: felix.StartEarliest}
)

// StartAt starts at offset off (felix.StartAt).
func StartAt(off uint64) StartPosition { return felix.StartAt(off) }
