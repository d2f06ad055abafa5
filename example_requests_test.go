package felix_test

import (
	"fmt"
	"slices"

	"github.com/flxproto/felix"
)

// ExampleLookupRequest shows the facts a client decides by: whether the
// broker must advertise a feature first, what answers the request, which
// broker serves it and whether a lost answer may be re-sent.
func ExampleLookupRequest() {
	for _, typ := range []string{"cache_put", "counter_add", "group_poll", "cache_watch", "publish_ok"} {
		r, ok := felix.LookupRequest(typ)
		if !ok {
			fmt.Println(typ, "is not a request")
			continue
		}
		fmt.Println(r.Type, r.Gate, slices.Collect(r.Answers()), r.Route, "safe:", r.Safe)
	}
	// Output:
	// cache_put none [cache_ok ok] any safe: true
	// counter_add COUNTERS [counter_value] any safe: false
	// group_poll CONSUMER_GROUP [group_records] stream_shard safe: true
	// cache_watch CACHE_WATCH [cache_watch_started subscribe_cursor_error] cache_shard safe: true
	// publish_ok is not a request
}
