package felix_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/flxproto/felix"
)

// The frozen values of docs/routing.md §2 (upstream's contract tests),
// restated independently. jump < 0 means "not frozen" for that mapping.
var frozenRouting = []struct {
	shards  uint32
	key     string
	modulo  int
	jumpVal int
}{
	{8, "customer-0", 0, 3},
	{8, "customer-1", 3, 0},
	{8, "customer-2", 6, 5},
	{8, "customer-4", 2, 2},
	{8, "customer-6", 4, 7},
	{12, "k0", 6, 3},
	{12, "k1", 10, 4},
	{4, "", 3, -1}, // empty key, present
}

func TestRoutingFrozenValues(t *testing.T) {
	for _, tc := range frozenRouting {
		t.Run(fmt.Sprintf("%d/%q", tc.shards, tc.key), func(t *testing.T) {
			assert.Equal(t, uint32(tc.modulo), felix.RoutingModulo.Shard([]byte(tc.key), tc.shards), "modulo")
			assert.Equal(t, uint32(tc.modulo), felix.RoutingModulo.ShardOf([]byte(tc.key), true, tc.shards), "modulo ShardOf")
			if tc.jumpVal >= 0 {
				assert.Equal(t, uint32(tc.jumpVal), felix.RoutingJumpHash.Shard([]byte(tc.key), tc.shards), "jump_hash")
				assert.Equal(t, uint32(tc.jumpVal), felix.RoutingJumpHash.ShardOf([]byte(tc.key), true, tc.shards), "jump_hash ShardOf")
			}
		})
	}
	// The empty key is present: a nil slice is an empty key too.
	assert.Equal(t, uint32(3), felix.RoutingModulo.Shard(nil, 4))
	assert.Equal(t, uint32(3), felix.RoutingModulo.ShardOf(nil, true, 4))
	// The key "k" on 4 shards (issue 10: plain FNV-1a mod 4 would give 2).
	assert.Equal(t, uint32(0), felix.RoutingModulo.Shard([]byte("k"), 4))
}

func TestRoutingZeroOrOneShard(t *testing.T) {
	for _, r := range []felix.Routing{felix.RoutingModulo, felix.RoutingJumpHash, felix.Routing(9)} {
		for _, n := range []uint32{0, 1} {
			for _, key := range []string{"", "k", "customer-0", "anything at all"} {
				assert.Zero(t, r.Shard([]byte(key), n), "%v %d %q", r, n, key)
				assert.Zero(t, r.ShardOf([]byte(key), true, n), "%v %d %q", r, n, key)
			}
		}
	}
}

func TestRoutingNoKey(t *testing.T) {
	for _, r := range []felix.Routing{felix.RoutingModulo, felix.RoutingJumpHash} {
		for _, n := range []uint32{0, 1, 4, 16, 1 << 31} {
			for _, key := range []string{"", "k", "customer-1"} {
				assert.Zero(t, r.ShardOf([]byte(key), false, n), "%v %d %q", r, n, key)
			}
		}
	}
	// An Opt key: unset routes to 0, set routes by its bytes.
	var k felix.Opt[[]byte]
	assert.Zero(t, felix.RoutingModulo.ShardOf(k.V, k.Set, 16))
	k = felix.Some([]byte("customer-1"))
	assert.Equal(t, uint32(3), felix.RoutingModulo.ShardOf(k.V, k.Set, 8))
}

func TestRoutingUnknownValueRoutesAsModulo(t *testing.T) {
	for _, tc := range frozenRouting {
		assert.Equal(t, uint32(tc.modulo), felix.Routing(7).Shard([]byte(tc.key), tc.shards))
	}
}

func TestRoutingStringParse(t *testing.T) {
	cases := []struct {
		r    felix.Routing
		word string
	}{{felix.RoutingModulo, "modulo"}, {felix.RoutingJumpHash, "jump_hash"}}
	for _, tc := range cases {
		assert.Equal(t, tc.word, tc.r.String())
		got, err := felix.ParseRouting(tc.word)
		require.NoError(t, err)
		assert.Equal(t, tc.r, got)
	}
	assert.Equal(t, felix.RoutingModulo, felix.Routing(0), "zero value is modulo")
	got, err := felix.ParseRouting("")
	require.NoError(t, err, "empty means absent means modulo")
	assert.Equal(t, felix.RoutingModulo, got)
	assert.Equal(t, "routing(5)", felix.Routing(5).String())
	for _, bad := range []string{"Modulo", "jump", "jumphash", "mod", " modulo", "consistent"} {
		_, err := felix.ParseRouting(bad)
		require.Error(t, err, bad)
		assert.True(t, errors.Is(err, felix.ErrInvalidValue), bad)
		var fe *felix.Error
		require.True(t, errors.As(err, &fe))
		assert.Contains(t, fe.Detail, strconv.Quote(bad))
	}
}

// TestRoutingInStreamShardsView: absent means modulo, explicit "modulo" is
// kept, "jump_hash" round-trips, another word is refused (docs/messages.md §4).
func TestRoutingInStreamShardsView(t *testing.T) {
	cases := []struct {
		json string
		want felix.Opt[felix.Routing]
	}{
		{`{"type":"stream_shards_view","shards":4,"request_id":1}`, felix.Opt[felix.Routing]{}},
		{`{"type":"stream_shards_view","shards":4,"request_id":1,"routing":"modulo"}`, felix.Some(felix.RoutingModulo)},
		{`{"type":"stream_shards_view","shards":4,"request_id":1,"routing":"jump_hash"}`, felix.Some(felix.RoutingJumpHash)},
	}
	for _, tc := range cases {
		m, err := felix.DecodeMessage([]byte(tc.json))
		require.NoError(t, err, tc.json)
		v, ok := m.(*felix.StreamShardsView)
		require.True(t, ok)
		assert.Equal(t, tc.want, v.Routing)
		assert.Equal(t, felix.RoutingModulo == felix.Routing(0), true)
		assert.Equal(t, tc.json, string(v.AppendJSON(nil)), "re-encoded as written")
	}
	_, err := felix.DecodeMessage([]byte(`{"type":"stream_shards_view","shards":4,"request_id":1,"routing":"ring"}`))
	require.Error(t, err)
	assert.True(t, errors.Is(err, felix.ErrInvalidJSON) || errors.Is(err, felix.ErrInvalidValue), "%v", err)
}

func keys(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(prefix + strconv.Itoa(i))
	}
	return out
}

// Property (docs/routing.md §1): the same key always maps to the same shard, in
// range, for 2..64 shards.
func TestPropRoutingDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := rapid.SampledFrom([]felix.Routing{felix.RoutingModulo, felix.RoutingJumpHash}).Draw(t, "routing")
		n := rapid.Uint32Range(2, 64).Draw(t, "shards")
		key := rapid.SliceOf(rapid.Byte()).Draw(t, "key")
		s := r.Shard(key, n)
		if s >= n {
			t.Fatalf("shard %d out of range %d", s, n)
		}
		cp := append([]byte(nil), key...)
		if again := r.Shard(cp, n); again != s {
			t.Fatalf("same key gave %d then %d", s, again)
		}
	})
}

// Property (jump consistent hash): growing n to n+1 shards either keeps a
// key where it was or moves it to the new shard n.
func TestPropRoutingJumpMonotone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Uint32Range(1, 1<<20).Draw(t, "shards")
		key := rapid.SliceOf(rapid.Byte()).Draw(t, "key")
		a, b := felix.RoutingJumpHash.Shard(key, n), felix.RoutingJumpHash.Shard(key, n+1)
		if a >= n || b >= n+1 || (a != b && b != n) {
			t.Fatalf("key %x: %d shards → %d, %d shards → %d", key, n, a, n+1, b)
		}
	})
}

func TestRoutingSpreads(t *testing.T) {
	for _, r := range []felix.Routing{felix.RoutingModulo, felix.RoutingJumpHash} {
		seen := map[uint32]bool{}
		for _, k := range keys("key-", 64) {
			seen[r.Shard(k, 8)] = true
		}
		assert.Greater(t, len(seen), 1, "%v: 64 keys over 8 shards", r)
	}
}

func TestRoutingJumpGrowth(t *testing.T) {
	ks := keys("key-", 10000)
	jumpMoved, modMoved := 0, 0
	for _, k := range ks {
		if a, b := felix.RoutingJumpHash.Shard(k, 8), felix.RoutingJumpHash.Shard(k, 9); a != b {
			jumpMoved++
			assert.Equal(t, uint32(8), b, "key %s moved from %d to %d", k, a, b)
		}
		if felix.RoutingModulo.Shard(k, 8) != felix.RoutingModulo.Shard(k, 9) {
			modMoved++
		}
	}
	assert.GreaterOrEqual(t, jumpMoved, 800)
	assert.LessOrEqual(t, jumpMoved, 1500)
	assert.Greater(t, modMoved, 8000)
}

func TestRoutingJumpCoversEveryShard(t *testing.T) {
	ks := keys("key-", 512)
	for n := uint32(1); n <= 64; n++ {
		hit := make([]bool, n)
		for _, k := range ks {
			s := felix.RoutingJumpHash.Shard(k, n)
			require.Less(t, s, n)
			hit[s] = true
		}
		for i, h := range hit {
			assert.True(t, h, "%d shards: shard %d never hit", n, i)
		}
	}
}

func BenchmarkRoutingShard(b *testing.B) {
	key := []byte("customer-12345")
	for _, r := range []felix.Routing{felix.RoutingModulo, felix.RoutingJumpHash} {
		b.Run(r.String(), func(b *testing.B) {
			b.ReportAllocs()
			var sink uint32
			for b.Loop() {
				sink += r.Shard(key, 64)
			}
			_ = sink
		})
	}
}

func TestRoutingShardDoesNotAllocate(t *testing.T) {
	key := []byte("customer-12345")
	for _, r := range []felix.Routing{felix.RoutingModulo, felix.RoutingJumpHash} {
		allocs := testing.AllocsPerRun(100, func() { _ = r.ShardOf(key, true, 64) })
		assert.Zero(t, allocs, r.String())
	}
}

// A client routes a keyed publish to the shard the broker will place it
// on, using the routing the stream reports in its stream_shards_view.
func ExampleRouting_Shard() {
	view := &felix.StreamShardsView{Shards: 8, RequestID: 1, Routing: felix.Some(felix.RoutingJumpHash)}
	routing := view.Routing.V // absent: the zero value, RoutingModulo
	fmt.Println(routing, routing.Shard([]byte("customer-0"), view.Shards))
	fmt.Println(felix.RoutingModulo, felix.RoutingModulo.Shard([]byte("customer-0"), view.Shards))
	fmt.Println("no key:", routing.ShardOf(nil, false, view.Shards))
	// Output:
	// jump_hash 3
	// modulo 0
	// no key: 0
}
