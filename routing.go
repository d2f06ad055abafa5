package felix

import "strconv"

// Routing is how a stream maps a routing key to one of its shards. It is
// part of the protocol: a broker places a keyed publish with it, and a
// client that routes by shard must compute the same answer. Both mappings
// hash the key with 64-bit FNV-1a followed by the splitmix64 finalizer;
// they differ in how the hash becomes a shard index.
//
// The zero value is RoutingModulo, the default of every stream not created
// asking otherwise. In a stream_shards_view an absent "routing" member
// means RoutingModulo; Opt[Routing] keeps absent apart from an explicit
// "modulo".
type Routing uint8

// The shard routings.
const (
	// RoutingModulo: finalize(fnv1a(key)) mod shards ("modulo", the default).
	RoutingModulo Routing = 0
	// RoutingJumpHash: the jump consistent hash of finalize(fnv1a(key))
	// ("jump_hash"); growing a stream from n-1 to n shards moves about 1/n
	// of the keys, all of them to the new shard.
	RoutingJumpHash Routing = 1
)

// ShardRouting is the former name of Routing.
//
// Deprecated: use Routing.
type ShardRouting = Routing

// String returns the wire word: "modulo" or "jump_hash"; any other value
// prints as "routing(N)".
func (r Routing) String() string {
	switch r {
	case RoutingModulo:
		return "modulo"
	case RoutingJumpHash:
		return "jump_hash"
	}
	return "routing(" + strconv.Itoa(int(r)) + ")"
}

// ParseRouting reads a routing word. The empty string is RoutingModulo (an
// absent routing means modulo); any word other than "modulo" and
// "jump_hash" is refused with an *Error of class ErrInvalidValue, as
// upstream refuses it.
func ParseRouting(s string) (Routing, error) {
	switch s {
	case "", "modulo":
		return RoutingModulo, nil
	case "jump_hash":
		return RoutingJumpHash, nil
	}
	return RoutingModulo, &Error{Class: ErrInvalidValue, Layout: "routing", Field: "routing", Offset: -1,
		Detail: "unknown routing " + strconv.Quote(s)}
}

// Shard returns the shard, in [0, shards), that a present routing key lands
// on. The key is present even when it is empty: an empty key hashes like
// any other (4 shards under modulo: shard 3). A publish without a key
// lands on shard 0; use ShardOf when the key may be absent. Zero or one
// shard always gives 0. A Routing value other than the two defined ones
// routes as RoutingModulo. Shard does not allocate.
func (r Routing) Shard(key []byte, shards uint32) uint32 {
	if shards <= 1 {
		return 0
	}
	h := finalize(fnv1a(key))
	if r == RoutingJumpHash {
		return jump(h, shards)
	}
	return uint32(h % uint64(shards))
}

// ShardOf is Shard for a key that may be absent: with hasKey false (a
// publish without a routing key) the answer is shard 0 whatever the key
// bytes; with hasKey true it is r.Shard(key, shards), an empty key
// included. An Opt[[]byte] key routes as r.ShardOf(k.V, k.Set, shards).
func (r Routing) ShardOf(key []byte, hasKey bool, shards uint32) uint32 {
	if !hasKey {
		return 0
	}
	return r.Shard(key, shards)
}

func (r Routing) appendJSON(dst []byte) []byte { return appendJSONString(dst, r.String()) }

func (r *Routing) decodeJSON(d *jsonDecoder, field string) {
	s, ok := d.stringMember(field)
	if !ok {
		return
	}
	switch string(s) {
	case "modulo":
		*r = RoutingModulo
	case "jump_hash":
		*r = RoutingJumpHash
	default:
		d.fail(field, "unknown routing "+strconv.Quote(string(s)))
	}
}

// fnv1a is 64-bit FNV-1a: offset basis 0xcbf29ce484222325, prime
// 0x100000001b3, xor then multiply for each byte.
func fnv1a(key []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, b := range key {
		h ^= uint64(b)
		h *= 0x00000100000001b3
	}
	return h
}

// finalize is the splitmix64 finalizer.
func finalize(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// jump is Lamping and Veach's jump consistent hash with the paper's
// constants and floating-point step, for n ≥ 1 buckets.
func jump(key uint64, n uint32) uint32 {
	b, j := int64(-1), int64(0)
	for j < int64(n) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return uint32(b)
}
