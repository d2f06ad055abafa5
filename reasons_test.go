package felix_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/flxproto/felix"
)

// The reason tables of docs/errors.md §4, restated independently.
func TestReasonWords(t *testing.T) {
	shardUnavailable := map[string]string{
		felix.ReasonNotAssigned:       "not_assigned",
		felix.ReasonOwnerUnavailable:  "owner_unavailable",
		felix.ReasonNotReady:          "not_ready",
		felix.ReasonStale:             "stale",
		felix.ReasonFenced:            "fenced",
		felix.ReasonMoving:            "moving",
		felix.ReasonRegionNotRoutable: "region_not_routable",
	}
	assert.Len(t, shardUnavailable, 7, "seven distinct words")
	for got, want := range shardUnavailable {
		assert.Equal(t, want, got)
	}
	assert.Equal(t, "publish_queue_full", felix.ReasonPublishQueueFull)
	assert.Equal(t, "tenant_quota", felix.ReasonTenantQuota)

	// They travel in detail.reason as plain strings.
	m := &felix.ErrorMessage{Message: "m", Code: felix.Some(felix.CodeShardUnavailable), Retry: felix.Some(felix.RetryRetry),
		Detail: felix.Some(felix.ErrorDetail{Reason: felix.Some(felix.ReasonMoving)})}
	assert.Equal(t, `{"type":"error","message":"m","code":"shard_unavailable","retry":"retry","detail":{"reason":"moving"}}`, string(m.AppendJSON(nil)))
}
