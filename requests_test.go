package felix

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// featureByName maps a spec name (FEATURE_CACHE_DELETE) to its bit.
func featureByName(t *testing.T, name string) Features {
	t.Helper()
	for f, n := range featureNames {
		if "FEATURE_"+n == name {
			return f
		}
	}
	t.Fatalf("unknown feature %s", name)
	return 0
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	return string(b)
}

// TestRequestFactsMatchSpec checks every generated request fact against
// the protocol reference: the answer types (docs/messages.md §3–§9), the route
// (docs/messages.md §4 not_leader, §5, §6, §9) and re-send safety (docs/caches.md
// "Delivery of writes", docs/client-scenarios.md §5.5).
func TestRequestFactsMatchSpec(t *testing.T) {
	type want struct {
		answers []string
		route   Route
		safe    bool
	}
	spec := map[string]want{
		// §3: ok answers a legacy auth; unsupported answers extension.
		"auth":      {[]string{"auth_ok", "ok"}, RouteAny, true},
		"extension": {[]string{"unsupported"}, RouteAny, false},
		// §4: reads any broker answers from its own view.
		"topology":           {[]string{"topology_view"}, RouteAny, true},
		"stream_shards":      {[]string{"stream_shards_view"}, RouteAny, true},
		"cache_shards":       {[]string{"cache_shards_view"}, RouteAny, true},
		"shard_owners":       {[]string{"shard_owners_view"}, RouteAny, true},
		"shard_inspect":      {[]string{"shard_inspect_info"}, RouteAny, true},
		"subscriptions_list": {[]string{"subscriptions_list_info"}, RouteAny, true},
		// §5: publishes go to the shard leader; a plain publish re-sent
		// may be written twice (client-scenarios §5.5), an idempotent one
		// is dropped as a duplicate by its sequence.
		"publish":            {[]string{"publish_ok", "publish_error"}, RouteStreamShard, false},
		"publish_batch":      {[]string{"publish_ok", "publish_error"}, RouteStreamShard, false},
		"producer_init":      {[]string{"producer_init_ok"}, RouteAny, true},
		"publish_idempotent": {[]string{"publish_ok", "publish_error", "publish_refused"}, RouteStreamShard, true},
		"publish_if":         {[]string{"publish_ok", "publish_refused"}, RouteStreamShard, false},
		"commit":             {[]string{"commit_ok", "publish_refused"}, RouteStreamShard, false},
		"state_get":          {[]string{"state_value"}, RouteStreamShard, true},
		// §6: subscribe, offset_for_time and stream_read are leader only;
		// a start position that cannot be served is subscribe_cursor_error.
		"subscribe":       {[]string{"subscribed", "subscribe_cursor_error"}, RouteStreamShard, true},
		"offset_for_time": {[]string{"offset_value"}, RouteStreamShard, true},
		"stream_read":     {[]string{"stream_records", "subscribe_cursor_error"}, RouteStreamShard, true},
		// §7 and docs/caches.md: a watch goes to its cache shard's owner.
		"cache_put":       {[]string{"cache_ok", "ok"}, RouteAny, true},
		"cache_get":       {[]string{"cache_value"}, RouteAny, true},
		"cache_delete":    {[]string{"cache_value"}, RouteAny, true},
		"cache_put_if":    {[]string{"cache_condition_result"}, RouteAny, false},
		"cache_delete_if": {[]string{"cache_condition_result"}, RouteAny, false},
		"cache_watch":     {[]string{"cache_watch_started", "subscribe_cursor_error"}, RouteCacheShard, true},
		// §8: counter_add carries no id to drop a duplicate by.
		"counter_add": {[]string{"counter_value"}, RouteAny, false},
		"counter_get": {[]string{"counter_value"}, RouteAny, true},
		// §9: group requests go to the shard leader only; settlements and
		// deletes re-sent after they applied would be refused.
		"group_poll":         {[]string{"group_records"}, RouteStreamShard, true},
		"group_ack":          {[]string{"cache_ok"}, RouteStreamShard, false},
		"group_nack":         {[]string{"cache_ok"}, RouteStreamShard, false},
		"group_extend":       {[]string{"group_extended"}, RouteStreamShard, false},
		"group_dead_letter":  {[]string{"cache_ok"}, RouteStreamShard, false},
		"group_dead_letters": {[]string{"group_dead_letter_list"}, RouteStreamShard, true},
		"group_discard":      {[]string{"cache_ok"}, RouteStreamShard, false},
		"group_redrive":      {[]string{"cache_ok"}, RouteStreamShard, false},
		"group_seek":         {[]string{"group_position"}, RouteStreamShard, true},
		"group_describe":     {[]string{"group_info"}, RouteStreamShard, true},
		"group_delete":       {[]string{"group_deleted"}, RouteStreamShard, false},
	}
	seen := map[string]bool{}
	for r := range Requests() {
		t.Run(r.Type, func(t *testing.T) {
			w, ok := spec[r.Type]
			require.True(t, ok, "not a request of the spec")
			assert.Equal(t, w.answers, slices.Collect(r.Answers()), "answers")
			assert.Equal(t, w.route, r.Route, "route")
			assert.Equal(t, w.safe, r.Safe, "safe to re-send")
			got, ok := LookupRequest(r.Type)
			require.True(t, ok)
			assert.Equal(t, r.Type, got.Type)
			assert.Equal(t, r.Gate, got.Gate)
			assert.True(t, isRequest(r.Type))
		})
		seen[r.Type] = true
	}
	for typ := range spec {
		assert.True(t, seen[typ], "%s: request of the spec missing from the table", typ)
	}
}

// TestRequestGatesMatchIndex reads the gate of every C→B row of
// docs/messages.md §10 and checks LookupRequest and CanRequest
// agree with it, and that every B→C type is no request.
func TestRequestGatesMatchIndex(t *testing.T) {
	doc := readDoc(t, "docs/messages.md")
	row := regexp.MustCompile("(?m)^\\| *\\d+ \\| `([a-z_]+)` \\| (C→B|B→C) \\| (.*) \\|$")
	rows := row.FindAllStringSubmatch(doc, -1)
	require.Len(t, rows, len(messageTypes), "index rows")
	n := 0
	for _, m := range rows {
		typ, dir, gateText := m[1], m[2], m[3]
		r, known := LookupRequest(typ)
		gate := r.Gate
		if dir == "B→C" {
			assert.False(t, known, "%s is broker → client", typ)
			assert.False(t, isRequest(typ), typ)
			_, ok := LookupRequest(typ)
			assert.False(t, ok, typ)
			continue
		}
		n++
		require.True(t, known, typ)
		var want Features
		if f := regexp.MustCompile(`^` + "`" + `(FEATURE_[A-Z_]+)` + "`").FindStringSubmatch(gateText); f != nil {
			want = featureByName(t, f[1])
		} else {
			// "–", or a member's gate ("`queue_capacity`: ..."): the
			// request itself is ungated.
			fieldGate := regexp.MustCompile("^`[a-z_]+`: ").MatchString(gateText)
			require.True(t, strings.HasPrefix(gateText, "–") || fieldGate, "%s: gate %q is neither a feature nor –", typ, gateText)
		}
		assert.Equal(t, want, gate, "%s: gate", typ)
		if want != 0 {
			assert.False(t, Capabilities{Features: AllFeatures &^ want}.CanRequest(typ), "%s without its gate", typ)
		}
		assert.True(t, Capabilities{Features: want}.CanRequest(typ), "%s with its gate", typ)
	}
	assert.Equal(t, len(requestFacts), n, "C→B rows")
}

// TestRequestGatesMatchFeatures checks the features page: every gated
// request is named in its feature's row, and each "req → answer" pair
// there is one of the request's answers.
func TestRequestGatesMatchFeatures(t *testing.T) {
	doc := readDoc(t, "docs/features.md")
	rowRe := regexp.MustCompile("(?m)^\\| `0x[0-9A-F_]+` \\| `(FEATURE_[A-Z_]+)` \\| [^|]* \\| (.*) \\|$")
	rows := map[Features]string{}
	for _, m := range rowRe.FindAllStringSubmatch(doc, -1) {
		rows[featureByName(t, m[1])] = m[2]
	}
	require.NotEmpty(t, rows)
	arrow := regexp.MustCompile("`([a-z_]+)` → `([a-z_]+)`")
	for r := range Requests() {
		if r.Gate != 0 {
			assert.Contains(t, rows[r.Gate], "`"+r.Type+"`", "%s: not named in the row of %v", r.Type, r.Gate)
		}
	}
	pairs := 0
	for _, text := range rows {
		for _, m := range arrow.FindAllStringSubmatch(text, -1) {
			r, ok := LookupRequest(m[1])
			require.True(t, ok, m[1])
			assert.Contains(t, slices.Collect(r.Answers()), m[2], "%s → %s", m[1], m[2])
			pairs++
		}
	}
	assert.Positive(t, pairs)
}

// TestRequestSafetyMatchesCaches reads the "Delivery of writes" table of
// docs/caches.md: a request the client re-sends after a lost answer is Safe.
func TestRequestSafetyMatchesCaches(t *testing.T) {
	doc := readDoc(t, "docs/caches.md")
	rowRe := regexp.MustCompile("(?m)^\\| ((?:`[a-z_]+`(?:, )?)+) \\| [^|]* \\| (yes|no)\\b")
	rows := rowRe.FindAllStringSubmatch(doc, -1)
	require.NotEmpty(t, rows)
	n := 0
	for _, m := range rows {
		for _, typ := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[1], -1) {
			r, ok := LookupRequest(typ[1])
			require.True(t, ok, typ[1])
			assert.Equal(t, m[2] == "yes", r.Safe, "%s: safe", typ[1])
			n++
		}
	}
	assert.Equal(t, 6, n, "requests in the docs/caches.md table")
}

func TestRouteString(t *testing.T) {
	assert.Equal(t, "any", RouteAny.String())
	assert.Equal(t, "stream_shard", RouteStreamShard.String())
	assert.Equal(t, "cache_shard", RouteCacheShard.String())
	assert.Equal(t, "route(9)", Route(9).String())
}

func TestRequestsStopsEarly(t *testing.T) {
	n := 0
	for range Requests() {
		n++
		break
	}
	assert.Equal(t, 1, n)
	_, ok := LookupRequest("frobnicate")
	assert.False(t, ok)
}

// isRequest reports whether typ is a client → broker request.
func isRequest(typ string) bool {
	_, ok := LookupRequest(typ)
	return ok
}
