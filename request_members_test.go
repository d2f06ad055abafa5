package felix

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestIDEveryType sets and reads the request_id of every message
// type of the table, both directions: a type has one exactly when its Go
// type has a RequestID field, the id set is the one written on the wire,
// and it reads back after decoding.
func TestRequestIDEveryType(t *testing.T) {
	with := 0
	for _, typ := range messageTypes {
		t.Run(typ, func(t *testing.T) {
			m := newMessage(typ)
			require.NotNil(t, m)
			field := reflect.ValueOf(m).Elem().FieldByName("RequestID")
			if !field.IsValid() {
				assert.False(t, SetRequestID(m, 7), "set on a type without request_id")
				assert.Equal(t, newMessage(typ), m, "SetRequestID changed a type without request_id")
				id, ok := RequestIDOf(m)
				assert.False(t, ok)
				assert.Zero(t, id)
				return
			}
			with++
			optional := field.Type() == reflect.TypeOf(Opt[uint64]{})
			id, ok := RequestIDOf(m)
			assert.Zero(t, id)
			assert.Equal(t, !optional, ok, "zero message: a required request_id is 0, an optional one absent")

			const want = uint64(1<<53 + 3)
			require.True(t, SetRequestID(m, want))
			id, ok = RequestIDOf(m)
			assert.True(t, ok)
			assert.Equal(t, want, id)
			if optional {
				assert.Equal(t, Some(want), field.Interface())
			} else {
				assert.Equal(t, want, field.Interface())
			}
			if k := reflect.ValueOf(m).Elem().FieldByName("Kind"); k.IsValid() {
				k.Set(reflect.ValueOf(ShardKindCache)) // the zero kind does not decode
			}
			wire := string(m.AppendJSON(nil))
			assert.Contains(t, wire, `"request_id":`+strconv.FormatUint(want, 10))

			back, err := DecodeMessage([]byte(wire))
			require.NoError(t, err, wire)
			id, ok = RequestIDOf(back)
			assert.True(t, ok)
			assert.Equal(t, want, id)
			require.True(t, SetRequestID(back, 1))
			id, _ = RequestIDOf(back)
			assert.Equal(t, uint64(1), id, "a second set replaces the id")
		})
	}
	assert.Equal(t, 57, with, "message types with a request_id member")
}

// TestRequestIDAnswers checks that every answer listed for a request that
// carries a request_id carries one too (so a Requestor can match it),
// except where the protocol answers on a stream of its own.
func TestRequestIDAnswers(t *testing.T) {
	// Answers without request_id: they answer requests without one, or
	// are the only request of their stream (auth, subscribe, cache_watch).
	noID := map[string]bool{
		"auth_ok": true, "ok": true, "subscribed": true, "subscribe_cursor_error": true,
		"cache_watch_started": true,
	}
	for r := range Requests() {
		req := newMessage(r.Type)
		if !SetRequestID(req, 1) {
			continue
		}
		for a := range r.Answers() {
			if noID[a] {
				continue
			}
			assert.True(t, SetRequestID(newMessage(a), 1), "%s answers %s without request_id", a, r.Type)
		}
	}
}

func TestRequestIDForeignAndNil(t *testing.T) {
	assert.False(t, SetRequestID(nil, 1))
	_, ok := RequestIDOf(nil)
	assert.False(t, ok)
	cg := &CacheGet{Key: "k"}
	_, ok = RequestIDOf(cg)
	assert.False(t, ok, "optional request_id absent")
	require.True(t, SetRequestID(cg, 9))
	assert.Equal(t, Some[uint64](9), cg.RequestID)
	assert.Equal(t, "k", cg.Key)
}

func TestRouteTargetOf(t *testing.T) {
	stream := func(name string) RouteTarget {
		return RouteTarget{Kind: ShardKindStream, TenantID: "t", Namespace: "ns", Name: name}
	}
	withShard := func(rt RouteTarget, s uint32) RouteTarget { rt.Shard = Some(s); return rt }
	withKey := func(rt RouteTarget, k []byte) RouteTarget { rt.Key, rt.Keyed = k, true; return rt }
	for _, c := range []struct {
		name string
		m    Message
		want RouteTarget
	}{
		{"publish_if keyed", &PublishIf{TenantID: "t", Namespace: "ns", Stream: "s", Key: Some([]byte("k1"))},
			withKey(stream("s"), []byte("k1"))},
		{"publish_if without key", &PublishIf{TenantID: "t", Namespace: "ns", Stream: "s"}, stream("s")},
		{"publish_if with an empty key", &PublishIf{TenantID: "t", Namespace: "ns", Stream: "s", Key: Some([]byte(nil))},
			withKey(stream("s"), []byte{})},
		{"publish keyed", &Publish{TenantID: "t", Namespace: "ns", Stream: "s", Key: Some([]byte("k"))},
			withKey(stream("s"), []byte("k"))},
		{"publish with an explicit shard", &Publish{TenantID: "t", Namespace: "ns", Stream: "s", Shard: Some[uint32](2)},
			withShard(stream("s"), 2)},
		{"publish_idempotent without key", &PublishIdempotent{TenantID: "t", Namespace: "ns", Stream: "s"}, stream("s")},
		{"commit with an empty entity key", &Commit{TenantID: "t", Namespace: "ns", Stream: "s"},
			withKey(stream("s"), []byte{})},
		{"commit", &Commit{TenantID: "t", Namespace: "ns", Stream: "s", EntityKey: []byte("e")},
			withKey(stream("s"), []byte("e"))},
		{"state_get routes by entity_key, not key", &StateGet{TenantID: "t", Namespace: "ns", Stream: "s", EntityKey: []byte("e"), Key: "field"},
			withKey(stream("s"), []byte("e"))},
		{"stream_read shard 0", &StreamRead{TenantID: "t", Namespace: "ns", Stream: "s"}, withShard(stream("s"), 0)},
		{"stream_read shard", &StreamRead{TenantID: "t", Namespace: "ns", Stream: "s", Shard: 5}, withShard(stream("s"), 5)},
		{"subscribe without shard", &Subscribe{TenantID: "t", Namespace: "ns", Stream: "s"}, stream("s")},
		{"offset_for_time", &OffsetForTime{TenantID: "t", Namespace: "ns", Stream: "s", Shard: 1}, withShard(stream("s"), 1)},
		{"group_poll", &GroupPoll{TenantID: "t", Namespace: "ns", Stream: "jobs", Shard: 3, Group: "g"}, withShard(stream("jobs"), 3)},
		{"group_ack", &GroupAck{TenantID: "t", Namespace: "ns", Stream: "jobs", Group: "g", Offset: 9}, withShard(stream("jobs"), 0)},
		{"cache_watch prefix on a shard", &CacheWatch{TenantID: "t", Namespace: "ns", Cache: "c", Prefix: Some("p/"), Shard: Some[uint32](4)},
			RouteTarget{Kind: ShardKindCache, TenantID: "t", Namespace: "ns", Name: "c", Shard: Some[uint32](4)}},
		{"cache_watch key: a filter, not a routing key", &CacheWatch{TenantID: "t", Namespace: "ns", Cache: "c", Key: Some("k")},
			RouteTarget{Kind: ShardKindCache, TenantID: "t", Namespace: "ns", Name: "c"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := RouteTargetOf(c.m)
			require.True(t, ok)
			assert.Equal(t, c.want, got)
			if c.want.Keyed && len(c.want.Key) == 0 {
				assert.NotNil(t, got.Key, "an empty routing key is a key")
			}
			if !c.want.Keyed {
				assert.Nil(t, got.Key)
			}
		})
	}
	// A RouteAny request naming a stream or cache: the names only.
	got, ok := RouteTargetOf(&CacheGet{TenantID: "t", Namespace: "ns", Cache: "c", Key: "k"})
	require.True(t, ok)
	assert.Equal(t, RouteTarget{Kind: ShardKindCache, TenantID: "t", Namespace: "ns", Name: "c"}, got)
	got, ok = RouteTargetOf(&StreamShards{TenantID: "t", Namespace: "ns", Stream: "s"})
	require.True(t, ok)
	assert.Equal(t, stream("s"), got)
	for _, m := range []Message{
		&ShardOwners{TenantID: "t", Namespace: "ns", Name: "s"}, // route any, names no stream or cache member
		&Topology{},
		&PublishOK{RequestID: 1}, // broker → client
		&EventMessage{TenantID: "t", Namespace: "ns", Stream: "s"}, // broker → client with a target
		nil,
	} {
		got, ok := RouteTargetOf(m)
		assert.False(t, ok, "%T", m)
		assert.Zero(t, got)
	}
}

// TestRouteTargetEveryRequest checks RouteTargetOf against each request's
// Route: a target for every shard-routed request, of the matching kind,
// naming the message's tenant, namespace and stream or cache; none for the
// others and for every broker → client type.
func TestRouteTargetEveryRequest(t *testing.T) {
	routed := 0
	for _, typ := range messageTypes {
		m := newMessage(typ)
		r, isReq := LookupRequest(typ)
		got, ok := RouteTargetOf(m)
		if isReq && r.Route == RouteAny {
			v := reflect.ValueOf(m).Elem()
			names := v.FieldByName("TenantID").IsValid() && v.FieldByName("Namespace").IsValid() &&
				(v.FieldByName("Stream").Kind() == reflect.String || v.FieldByName("Cache").Kind() == reflect.String)
			assert.Equal(t, names, ok, typ)
			assert.False(t, got.Shard.Set || got.Keyed, "%s: a RouteAny request carries no route", typ)
			continue
		}
		if !isReq {
			assert.False(t, ok, typ)
			continue
		}
		routed++
		require.True(t, ok, typ)
		want := map[Route]ShardKind{RouteStreamShard: ShardKindStream, RouteCacheShard: ShardKindCache}[r.Route]
		assert.Equal(t, want, got.Kind, typ)
		// The names come from the members: fill every string field and
		// look for them in the target.
		v := reflect.ValueOf(m).Elem()
		for _, f := range []string{"TenantID", "Namespace", "Stream", "Cache"} {
			if fv := v.FieldByName(f); fv.IsValid() {
				fv.SetString(strings.ToLower(f) + "-x")
			}
		}
		got, _ = RouteTargetOf(m)
		assert.Equal(t, "tenantid-x", got.TenantID, typ)
		assert.Equal(t, "namespace-x", got.Namespace, typ)
		assert.Equal(t, map[ShardKind]string{ShardKindStream: "stream-x", ShardKindCache: "cache-x"}[got.Kind], got.Name, typ)
		// Every routed request names a shard or a key (the generator
		// refuses one that does not); a required shard is always set.
		sh := v.FieldByName("Shard")
		key := v.FieldByName("Key")
		hasKey := v.FieldByName("EntityKey").IsValid() || key.IsValid() && key.Type() == reflect.TypeOf(Opt[[]byte]{})
		assert.True(t, sh.IsValid() || hasKey, "%s names no shard", typ)
		if sh.IsValid() && sh.Kind() == reflect.Uint32 {
			assert.True(t, got.Shard.Set, typ)
		}
	}
	assert.Equal(t, 21, routed, "shard-routed requests")
}

func TestUnadvertisedMemberGates(t *testing.T) {
	for _, c := range []struct {
		name    string
		unset   Message // the request without the member
		set     Message // with it
		feature Features
		want    string
	}{
		{"commit expected_offset", &Commit{}, &Commit{ExpectedOffset: Some[uint64](0)},
			FeaturePublishConditional, "commit expected_offset (FEATURE_PUBLISH_CONDITIONAL)"},
		{"group_poll visibility_ms", &GroupPoll{}, &GroupPoll{VisibilityMs: 1},
			FeatureGroupClaimControl, "group_poll visibility_ms (FEATURE_GROUP_CLAIM_CONTROL)"},
		{"group_poll consumer", &GroupPoll{}, &GroupPoll{Consumer: Some("c1")},
			FeatureGroupConsumer, "group_poll consumer (FEATURE_GROUP_CONSUMER)"},
		{"group_poll reclaim", &GroupPoll{}, &GroupPoll{Reclaim: true},
			FeatureGroupConsumer, "group_poll reclaim (FEATURE_GROUP_CONSUMER)"},
		{"group_nack delay_ms", &GroupNack{}, &GroupNack{DelayMs: 10},
			FeatureGroupClaimControl, "group_nack delay_ms (FEATURE_GROUP_CLAIM_CONTROL)"},
		{"group_nack attempts", &GroupNack{}, &GroupNack{Attempts: 2},
			FeatureGroupClaimControl, "group_nack attempts (FEATURE_GROUP_CLAIM_CONTROL)"},
		{"subscribe queue_capacity", &Subscribe{}, &Subscribe{QueueCapacity: Some[uint32](64)},
			FeatureSubscribeQueue, "subscribe queue_capacity (FEATURE_SUBSCRIBE_QUEUE)"},
		{"cache_watch retained", &CacheWatch{}, &CacheWatch{Retained: true},
			FeatureCacheWatchRetained, "cache_watch retained (FEATURE_CACHE_WATCH_RETAINED)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, ok := LookupRequest(c.set.MessageType())
			require.True(t, ok)
			assert.Equal(t, "FEATURE_"+c.feature.String()+")", c.want[strings.LastIndex(c.want, "(")+1:], "the text names the feature's String form")
			all := Capabilities{Features: AllFeatures}
			without := Capabilities{Features: AllFeatures &^ c.feature}
			gateOnly := Capabilities{Features: r.Gate}
			assert.Equal(t, "", all.Unadvertised(c.set), "every feature advertised")
			assert.Equal(t, c.want, without.Unadvertised(c.set), "member set, its feature missing")
			assert.Equal(t, "", without.Unadvertised(c.unset), "member unset: its feature is not needed")
			assert.Equal(t, "", gateOnly.Unadvertised(c.unset), "member unset, only the request gate")
			assert.Equal(t, c.want, gateOnly.Unadvertised(c.set))
			assert.Equal(t, "", Capabilities{Features: r.Gate | c.feature}.Unadvertised(c.set), "the request gate and the member's feature suffice")
			// The request gate comes first.
			if r.Gate != 0 {
				assert.Equal(t, r.Type+" (FEATURE_"+r.Gate.String()+")", Capabilities{Features: c.feature}.Unadvertised(c.set))
			}
		})
	}
	// The first missing member in table order is reported.
	both := &GroupPoll{Consumer: Some("c"), VisibilityMs: 5}
	assert.Equal(t, "group_poll consumer (FEATURE_GROUP_CONSUMER)",
		Capabilities{Features: FeatureConsumerGroup}.Unadvertised(both))
	assert.Equal(t, "group_poll visibility_ms (FEATURE_GROUP_CLAIM_CONTROL)",
		Capabilities{Features: FeatureConsumerGroup | FeatureGroupConsumer}.Unadvertised(both))
	// An empty Opt string is still sent, so it still needs the feature.
	assert.Equal(t, "group_poll consumer (FEATURE_GROUP_CONSUMER)",
		Capabilities{Features: FeatureConsumerGroup}.Unadvertised(&GroupPoll{Consumer: Some("")}))
}

func TestUnadvertisedRequestGate(t *testing.T) {
	for r := range Requests() {
		m := newMessage(r.Type)
		assert.Equal(t, "", Capabilities{Features: r.Gate}.Unadvertised(m), "%s with its gate only", r.Type)
		if r.Gate == 0 {
			assert.Equal(t, "", Capabilities{}.Unadvertised(m), r.Type)
			assert.True(t, LegacyCapabilities().CanRequest(r.Type))
			continue
		}
		c := Capabilities{Features: AllFeatures &^ r.Gate}
		assert.Equal(t, r.Type+" (FEATURE_"+r.Gate.String()+")", c.Unadvertised(m))
		assert.False(t, c.CanRequest(r.Type), "agrees with CanRequest")
	}
	assert.Equal(t, "cache_delete (FEATURE_CACHE_DELETE)", Capabilities{}.Unadvertised(&CacheDelete{Key: "k"}))
	assert.Equal(t, "", Capabilities{}.Unadvertised(&CacheGet{Key: "k"}))
	assert.Equal(t, "publish_ok (not a known request)", Capabilities{Features: AllFeatures}.Unadvertised(&PublishOK{}))
	assert.Equal(t, "acme (not a known request)", Capabilities{Features: AllFeatures}.Unadvertised(foreign("acme")))
	assert.Equal(t, "nil message (not a known request)", Capabilities{}.Unadvertised(nil))
	// A foreign Message of a known request type has its request gate
	// checked.
	assert.Equal(t, "cache_delete (FEATURE_CACHE_DELETE)", Capabilities{}.Unadvertised(foreign("cache_delete")))
	assert.Equal(t, "", Capabilities{Features: FeatureCacheDelete}.Unadvertised(foreign("cache_delete")))
}

// foreign is a Message of another implementation.
type foreign string

func (f foreign) MessageType() string          { return string(f) }
func (f foreign) AppendJSON(dst []byte) []byte { return append(dst, `{"type":"`+f+`"}`...) }

// TestMemberGatesMatchSpec reads the member tables of docs/messages.md:
// every client → broker member whose notes say "only with FEATURE_X" (or
// "[B]" claim-control fields) is gated by Unadvertised on exactly that
// feature.
func TestMemberGatesMatchSpec(t *testing.T) {
	want := map[string]Features{
		"commit expected_offset":   FeaturePublishConditional,
		"subscribe queue_capacity": FeatureSubscribeQueue,
		"cache_watch retained":     FeatureCacheWatchRetained,
		"group_poll consumer":      FeatureGroupConsumer,
		"group_poll reclaim":       FeatureGroupConsumer,
		"group_poll visibility_ms": FeatureGroupClaimControl,
		"group_nack delay_ms":      FeatureGroupClaimControl,
		"group_nack attempts":      FeatureGroupClaimControl,
	}
	doc := readDoc(t, "docs/messages.md")
	found := map[string]bool{}
	sections := strings.Split(doc, "\n### ")
	for _, s := range sections[1:] {
		head, body, _ := strings.Cut(s, "\n")
		typ := strings.Trim(strings.Fields(head)[0], "`")
		if !strings.Contains(head, "C→B") {
			continue
		}
		for _, line := range strings.Split(body, "\n") {
			cells := strings.Split(line, "|")
			if len(cells) < 5 || !strings.Contains(cells[4], "only with `FEATURE_") {
				continue
			}
			name := strings.Trim(strings.TrimSpace(cells[1]), "`")
			if name == "shard" || name == "client_features_hi" {
				continue // FEATURE_EXPLICIT_SHARD has no bit; FEATURE_EXTENDED is the client's own marker
			}
			found[typ+" "+name] = true
		}
	}
	found["group_nack attempts"] = true // "[B] for the last two" in the group_nack heading
	assert.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(found)), "member gates of the spec")
	for k, f := range want {
		typ, name, _ := strings.Cut(k, " ")
		r, _ := LookupRequest(typ)
		m := newMessage(typ)
		setMember(t, m, name)
		assert.Equal(t, k+" (FEATURE_"+f.String()+")", Capabilities{Features: r.Gate}.Unadvertised(m))
		assert.Equal(t, "", Capabilities{Features: r.Gate | f}.Unadvertised(m))
	}
}

// setMember sets the member of m whose JSON name is json to a present,
// non-zero value, finding its Go field by the wire encoding.
func setMember(t *testing.T, m Message, json string) {
	t.Helper()
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		before := string(m.AppendJSON(nil))
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint32, reflect.Uint64:
			f.SetUint(1)
		case reflect.Struct:
			if f.FieldByName("Set").IsValid() {
				f.FieldByName("Set").SetBool(true)
			}
		default:
			continue
		}
		if after := string(m.AppendJSON(nil)); after != before && strings.Contains(after, `"`+json+`":`) && !strings.Contains(before, `"`+json+`":`) {
			return
		}
		f.Set(reflect.Zero(f.Type()))
	}
	t.Fatalf("%s: no member %s", m.MessageType(), json)
}
