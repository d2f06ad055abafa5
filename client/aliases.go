package client

import "github.com/flxproto/felix"

// StartPosition is where a subscription starts (felix.StartPosition).
type StartPosition = felix.StartPosition

// Start positions and cache conditions, so that a program needs no other
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

// CacheCondition is the condition of CachePutIf (felix.CacheCondition).
type CacheCondition = felix.CacheCondition

// IfAbsent is the CachePutIf condition "the key has no live entry".
var IfAbsent = CacheCondition{Kind: felix.CondAbsent}

// IfVersion is the CachePutIf condition "the entry's version is v" (see
// CacheGetVersioned, CondResult.Version).
func IfVersion(v uint64) CacheCondition {
	return CacheCondition{Kind: felix.CondVersion, Version: v}
}
