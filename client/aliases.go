package client

import (
	"github.com/flxproto/felix"
	"github.com/flxproto/felix/conn"
)

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

// PayloadMode says how long a delivered Event's Payload and Publisher
// stay valid (conn.PayloadMode).
type PayloadMode = conn.PayloadMode

// Payload modes (see conn.PayloadMode).
const (
	// PayloadsUntilNext (the default): valid until the next Next call;
	// Event.Clone keeps one.
	PayloadsUntilNext = conn.PayloadsUntilNext
	// PayloadsOwned: every frame in memory of its own; events may be kept.
	PayloadsOwned = conn.PayloadsOwned
	// PayloadsUntilRelease: valid until Event.Release on it or a later
	// event, for handing events to another goroutine in order.
	PayloadsUntilRelease = conn.PayloadsUntilRelease
)

// StartAt starts at offset off (felix.StartAt).
func StartAt(off uint64) StartPosition { return felix.StartAt(off) }
